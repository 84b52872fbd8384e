#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# AArch64 (arm64) builds of the aggregator side, cross-compiled here and run under qemu-user:
# the BlueField-class DPU target of deploy/dpu.md.
#
#   scripts/cross_aarch64.sh tests   [DIR]  the reduction, protocol and aggregator test programs
#                                           (test hooks on) and bench_reduce in DIR (default
#                                           build-aarch64)
#   scripts/cross_aarch64.sh package [DIR]  Release, no tests or hooks: the arm64
#                                           conflux-aggregator .deb in DIR/packages (default
#                                           build-package-aarch64), checked: architecture,
#                                           confluxd --help / --print-config and conflux --help
#                                           under qemu, and no test hook (check_no_test_hooks.sh)
#   scripts/cross_aarch64.sh run DIR PROGRAM [ARGS]
#                                           runs DIR/PROGRAM (from "tests") under qemu-aarch64
#
# Needs what scripts/setup.sh installs: g++-aarch64-linux-gnu, qemu-user and the arm64
# development packages of the compiled dependencies (multiarch). Without them it exits 77
# ("skipped" for ctest), or 1 under CONFLUX_CI=1, where a missing tool is a failure.
# tests/aarch64 runs both modes from ctest (label aarch64).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: cross_aarch64.sh tests|package [DIR]}

missing=()
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
[ -f /usr/lib/aarch64-linux-gnu/cmake/spdlog/spdlogConfig.cmake ] || missing+=(libspdlog-dev:arm64)
if ((${#missing[@]})); then
  echo "cross_aarch64: missing ${missing[*]} (scripts/setup.sh installs them)"
  case "${CONFLUX_CI:-}" in "" | 0) exit 77 ;; *) exit 1 ;; esac
fi

# The direct-connect planner needs GLPK, which the arm64 multiarch set does not carry: the
# aggregator side on a DPU has no use for it (conflux plan runs on an operator's machine).
configure() {  # DIR, extra cmake arguments
  local dir=$1
  shift
  cmake -S "$src" -B "$dir" -G Ninja \
    -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-aarch64-linux-gnu.cmake" \
    -DCONFLUX_WITH_DPDK=OFF -DCONFLUX_DIRECT_PLANNER=OFF "$@" >"$dir.configure.log" 2>&1 || {
    cat "$dir.configure.log"
    exit 1
  }
}

case "$mode" in
  run)
    dir=${2:?usage: cross_aarch64.sh run DIR PROGRAM [ARGS]}
    prog=$dir/${3:?usage: cross_aarch64.sh run DIR PROGRAM [ARGS]}
    shift 3
    [ -x "$prog" ] || { echo "cross_aarch64: $prog not built (cross_aarch64.sh tests $dir)"; exit 1; }
    exec qemu-aarch64 "$prog" "$@"
    ;;
  tests)
    dir=${2:-$src/build-aarch64}
    mkdir -p "$(dirname "$dir")"
    configure "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCONFLUX_BUILD_TESTS=ON -DCONFLUX_BUILD_BENCH=ON
    cmake --build "$dir" -j"$(nproc)" --target confluxd conflux test_reduce test_protocol \
      test_aggregator fuzz_replay_data fuzz_replay_control fuzz_replay_slots bench_reduce
    file -b "$dir/aggregator/confluxd" | grep -q "ARM aarch64" || {
      echo "cross_aarch64: $dir/aggregator/confluxd is not an AArch64 executable"
      exit 1
    }
    echo "cross_aarch64: built in $dir"
    ;;
  package)
    dir=${2:-$src/build-package-aarch64}
    mkdir -p "$(dirname "$dir")"
    configure "$dir" -DCMAKE_BUILD_TYPE=Release -DCONFLUX_BUILD_TESTS=OFF -DCONFLUX_BUILD_BENCH=OFF \
      -DCONFLUX_TEST_HOOKS=OFF -DCONFLUX_PACKAGE_COMPONENTS=aggregator \
      -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON
    cmake --build "$dir" -j"$(nproc)" --target confluxd conflux
    rm -rf "$dir/packages" "$dir/root"
    (cd "$dir" && cpack -G DEB >cpack.log 2>&1) || {
      cat "$dir/cpack.log"
      exit 1
    }
    deb=("$dir"/packages/conflux-aggregator_*_arm64.deb)
    [ -f "${deb[0]}" ] || { echo "FAILED: no arm64 conflux-aggregator package"; ls "$dir/packages"; exit 1; }
    arch=$(dpkg-deb -f "${deb[0]}" Architecture)
    [ "$arch" = arm64 ] || { echo "FAILED: ${deb[0]} says Architecture: $arch"; exit 1; }
    echo "Depends: $(dpkg-deb -f "${deb[0]}" Depends)"
    dpkg-deb -x "${deb[0]}" "$dir/root"
    root=$dir/root
    file -b "$root/usr/bin/confluxd" | grep -q "ARM aarch64" || { echo "FAILED: confluxd is not AArch64"; exit 1; }
    qemu-aarch64 "$root/usr/bin/confluxd" --help >"$dir/help.txt" ||
      { echo "FAILED: confluxd --help under qemu exited $?"; exit 1; }
    grep -q -- "--config" "$dir/help.txt" || { echo "FAILED: confluxd --help names no --config"; exit 1; }
    qemu-aarch64 "$root/usr/bin/confluxd" --config "$root/etc/conflux/confluxd.toml" --print-config \
      >"$dir/cfg.txt" || { echo "FAILED: confluxd --print-config under qemu exited $?"; exit 1; }
    grep -q "control_port" "$dir/cfg.txt" || { echo "FAILED: --print-config printed no control_port"; exit 1; }
    qemu-aarch64 "$root/usr/bin/conflux" --help >"$dir/cli.txt" ||
      { echo "FAILED: conflux --help under qemu exited $?"; exit 1; }
    "$src/scripts/check_no_test_hooks.sh" "${deb[0]}"
    echo "ok: ${deb[0]} (arm64) installs and starts under qemu"
    ;;
  *)
    echo "usage: cross_aarch64.sh tests|package [DIR]"
    exit 2
    ;;
esac
