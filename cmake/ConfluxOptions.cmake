# CONFLUX_WITH_DPDK: ON, OFF or AUTO (default: built when libdpdk is found). The DPDK dataplane
# is the only optional part; kernel UDP is always built.
set(CONFLUX_WITH_DPDK AUTO CACHE STRING "Build the DPDK dataplane (ON/OFF/AUTO)")

find_package(PkgConfig)
if(PkgConfig_FOUND AND NOT CONFLUX_WITH_DPDK STREQUAL "OFF")
  pkg_check_modules(DPDK QUIET IMPORTED_TARGET libdpdk)
endif()
if(CONFLUX_WITH_DPDK STREQUAL "ON" AND NOT DPDK_FOUND)
  message(FATAL_ERROR "CONFLUX_WITH_DPDK=ON but libdpdk was not found (pkg-config libdpdk)")
endif()
if(NOT CONFLUX_WITH_DPDK STREQUAL "OFF" AND DPDK_FOUND)
  set(CONFLUX_HAVE_DPDK TRUE)
else()
  set(CONFLUX_HAVE_DPDK FALSE)
endif()
message(STATUS "Conflux: DPDK support: ${CONFLUX_HAVE_DPDK}")
