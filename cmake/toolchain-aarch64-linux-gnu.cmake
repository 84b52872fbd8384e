# Cross build for AArch64 Linux (BlueField-class DPUs, Graviton, Grace) on a Debian x86-64 host:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
# Needs Debian's cross compiler (g++-aarch64-linux-gnu), the arm64 development packages of the
# compiled dependencies from the multiarch archive (dpkg --add-architecture arm64; libspdlog-dev,
# libfmt-dev, libtomlplusplus-dev, libgtest-dev :arm64; the header-only ones are shared) and
# qemu-user to run what it builds: CMake runs the tests through CMAKE_CROSSCOMPILING_EMULATOR.
# scripts/cross_aarch64.sh does all of it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Debian multiarch: arm64 libraries and their CMake packages live in /usr/lib/aarch64-linux-gnu,
# which find_package()/find_library() search once this is set; the amd64 ones are not searched.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# pkg-config must not report the host's (amd64) libraries, DPDK among them.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# The arm64 loader and libraries are installed natively (multiarch), so qemu needs no -L.
find_program(CONFLUX_QEMU_AARCH64 qemu-aarch64)
if(CONFLUX_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CONFLUX_QEMU_AARCH64})
endif()
