# What a user installs, and the Debian packages (CPack DEB) that carry it:
#
#   conflux-aggregator   bin/confluxd, bin/conflux (the operator CLI), the systemd unit
#                        (lib/systemd/system/confluxd.service), /etc/conflux/confluxd.toml
#                        (from deploy/confluxd.example.toml; a conffile) and the docs
#                        (share/doc/conflux: README.md, confluxd.example.toml, dpdk.md, dpu.md,
#                        grafana-dashboard.json), share/doc/conflux-aggregator/copyright
#   conflux-nccl-plugin  ${CMAKE_INSTALL_LIBDIR}/libnccl-net-conflux.so (and
#                        share/doc/conflux-nccl-plugin/copyright). NCCL dlopen()s
#                        "libnccl-net-conflux.so" for NCCL_NET_PLUGIN=conflux: the packages put
#                        it in /usr/lib, which the dynamic loader searches; for another prefix
#                        add <prefix>/lib to LD_LIBRARY_PATH, or give NCCL_NET_PLUGIN the full
#                        path of the .so.
#
#   cmake --install build [--prefix /usr/local]      everything, into the prefix
#   (cd build && cpack -G DEB)                       build/conflux-{aggregator,nccl-plugin}_*.deb
# Dependencies come from dpkg-shlibdeps (CPACK_DEBIAN_PACKAGE_SHLIBDEPS).
include(GNUInstallDirs)

if(TARGET confluxd)
  install(TARGETS confluxd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT aggregator)
endif()
if(TARGET conflux)
  install(TARGETS conflux RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT aggregator)
endif()
if(TARGET nccl-net-conflux)
  install(TARGETS nccl-net-conflux LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          COMPONENT nccl-plugin)
endif()
install(FILES README.md deploy/confluxd.example.toml deploy/dpdk.md deploy/dpu.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT aggregator)
if(EXISTS ${PROJECT_SOURCE_DIR}/deploy/grafana-dashboard.json)
  install(FILES deploy/grafana-dashboard.json DESTINATION ${CMAKE_INSTALL_DOCDIR}
          COMPONENT aggregator)
endif()
# Each package's copyright file (Debian policy: /usr/share/doc/<package>/copyright), from the
# licence (LICENSE, Apache-2.0).
install(FILES deploy/copyright
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/conflux-aggregator COMPONENT aggregator)
install(FILES deploy/copyright
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/conflux-nccl-plugin COMPONENT nccl-plugin)
install(CODE "set(CONFLUX_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
set(CONFLUX_BINDIR_REL \"${CMAKE_INSTALL_BINDIR}\")
set(CONFLUX_DOCDIR_REL \"${CMAKE_INSTALL_DOCDIR}\")" COMPONENT aggregator)
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/ConfluxInstallDeploy.cmake COMPONENT aggregator)

# Debian packages, one per component. The staging install runs with DESTDIR and the prefix
# /usr (CPACK_SET_DESTDIR), so ConfluxInstallDeploy.cmake sees the real prefix.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME conflux)
set(CPACK_PACKAGE_VENDOR "Conflux")
set(CPACK_PACKAGE_CONTACT "Conflux maintainers <conflux@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "In-network AllReduce aggregation for NCCL")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)  # the prefix of the staging install under CPACK_SET_DESTDIR
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# A build that packages only part (the arm64 cross build of scripts/cross_aarch64.sh: the
# aggregator, for DPUs) names the components it builds.
set(CONFLUX_PACKAGE_COMPONENTS "aggregator;nccl-plugin" CACHE STRING
    "Components CPack packages (aggregator, nccl-plugin)")
set(CPACK_COMPONENTS_ALL ${CONFLUX_PACKAGE_COMPONENTS})
# CPack asks dpkg for the architecture, which is the host's; a cross build says its own.
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_AGGREGATOR_PACKAGE_NAME conflux-aggregator)
set(CPACK_DEBIAN_AGGREGATOR_DESCRIPTION
    "Conflux aggregator daemon (confluxd), operator CLI (conflux) and systemd unit")
set(CPACK_DEBIAN_NCCL-PLUGIN_PACKAGE_NAME conflux-nccl-plugin)
set(CPACK_DEBIAN_NCCL-PLUGIN_DESCRIPTION
    "Conflux NCCL net/CollNet plugin (libnccl-net-conflux.so, NCCL_NET_PLUGIN=conflux)")
set(CPACK_COMPONENT_AGGREGATOR_DESCRIPTION ${CPACK_DEBIAN_AGGREGATOR_DESCRIPTION})
set(CPACK_COMPONENT_NCCL-PLUGIN_DESCRIPTION ${CPACK_DEBIAN_NCCL-PLUGIN_DESCRIPTION})
# /etc/conflux/confluxd.toml is a conffile: dpkg keeps an operator's edits on upgrade.
file(WRITE ${PROJECT_BINARY_DIR}/cpack/aggregator/conffiles "/etc/conflux/confluxd.toml\n")
set(CPACK_DEBIAN_AGGREGATOR_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/cpack/aggregator/conffiles)
include(CPack)
