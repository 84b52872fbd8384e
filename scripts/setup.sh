#!/usr/bin/env bash
# Installs what Conflux needs to build and test on Debian 12 (run as root, or with sudo).
# Idempotent: skips apt when every package is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang clang-format clang-tidy
  libclang-rt-14-dev libxsimd-dev libtbb-dev libgtest-dev libgmock-dev libbenchmark-dev
  libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev
  iproute2 nftables iperf3 procps curl python3 python3-matplotlib libgloo-dev
  openmpi-bin libopenmpi-dev
  libibverbs-dev librdmacm-dev dpdk-dev libdpdk-dev libssl-dev
  # Tools the tests run (a test that skips for want of one fails under CONFLUX_CI=1):
  # ethtool (DPDK veth tests), the deploy-file checks (shellcheck, systemd-analyze from
  # systemd, promtool from prometheus, python3-yaml), the package test (file, dpkg-dev).
  ethtool shellcheck systemd prometheus python3-yaml file dpkg-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
