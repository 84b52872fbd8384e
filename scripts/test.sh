#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite: installs dependencies, builds, runs ctest.
#   scripts/test.sh              release-ish build in build/, every test
#   scripts/test.sh --sanitize   ASan+UBSan build in build-asan/: every test but the "large"
#                                ones, the namespace harnesses (fabric: shaped netns runs;
#                                dpdk: built without DPDK here), the package tests (a .deb of
#                                a sanitizer build is no product: its plugin needs the ASan
#                                runtime preloaded) and the AArch64 cross build under qemu
#                                (aarch64), which the plain run covers
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [[ "${1:-}" == "--sanitize" ]]; then
  # -O2: GCC declares some AVX-512 intrinsics as macros at -O0, which xsimd 8.1 cannot use.
  export CONFLUX_BUILD_DIR=build-asan CONFLUX_BUILD_TYPE=RelWithDebInfo
  scripts/build.sh -DCONFLUX_SANITIZE=ON -DCONFLUX_BUILD_BENCH=OFF -DCONFLUX_WITH_DPDK=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir build-asan --output-on-failure -LE "large|fabric|dpdk|package|aarch64" --timeout 600
else
  scripts/build.sh
  ctest --test-dir "${CONFLUX_BUILD_DIR:-build}" --output-on-failure --timeout 600
fi
