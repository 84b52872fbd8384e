#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what Conflux needs to build and test on Debian 12 (run as root, or with sudo).
# Idempotent: skips apt when every package is already installed.
set -euo pipefail

PACKAGES=(
  # Build: compilers, CMake/Ninja, clang (libFuzzer targets, scripts/fuzz.sh, with
  # libclang-rt-14-dev) and clang-format (scripts/lint.sh).
  build-essential cmake ninja-build pkg-config git clang clang-format libclang-rt-14-dev
  # Libraries find_package()/pkg_check_modules() ask for (CMakeLists.txt, cmake/, protocol/):
  # xsimd (common/ kernels), spdlog+fmt, toml++, CLI11, nlohmann-json (JSON in and out),
  # OpenSSL (data MAC), DPDK (the optional dataplane, built when found; it brings ibverbs for
  # its mlx drivers).
  libxsimd-dev libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  libssl-dev dpdk-dev libdpdk-dev
  # GLPK, the MILP solver of the direct-connect planner (conflux plan --fabric direct).
  libglpk-dev
  # Tests and benchmarks: GoogleTest, Google Benchmark (bench/), Gloo and Open MPI (the ring
  # baselines of tests/fabric and bench/fabric), matplotlib (bench/fabric plots).
  libgtest-dev libbenchmark-dev libgloo-dev openmpi-bin libopenmpi-dev python3 python3-matplotlib
  # Tools the tests run (a test that skips for want of one fails under CONFLUX_CI=1):
  # iproute2/nftables/procps/curl/iperf3 (namespaces, loss, /metrics, fabric link checks),
  # ethtool (DPDK veth tests), the deploy-file checks (shellcheck, systemd-analyze from
  # systemd, promtool from prometheus, python3-yaml), the package test (file, dpkg-dev),
  # DNS discovery (dnsmasq-base).
  iproute2 nftables procps curl iperf3
  ethtool shellcheck systemd prometheus python3-yaml file dpkg-dev
  dnsmasq-base
  # The AArch64 cross build and its runs under qemu (scripts/cross_aarch64.sh, tests/aarch64):
  # Debian's cross compiler, qemu-user, and the arm64 development packages of what the
  # aggregator side links or includes (multiarch: dpkg --add-architecture arm64, below).
  g++-aarch64-linux-gnu qemu-user
  libxsimd-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64 libtomlplusplus-dev:arm64
  libssl-dev:arm64 libgtest-dev:arm64
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
