#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds what we ship: a Release build without tests, benchmarks or test hooks
# (CONFLUX_TEST_HOOKS=OFF) in build-package/ (or $CONFLUX_BUILD_DIR), the two Debian packages
# with CPack (<build>/packages/conflux-{aggregator,nccl-plugin}_*.deb), then checks that the
# packaged confluxd, conflux and libnccl-net-conflux.so carry no test hook.
#   scripts/package.sh [extra cmake configure arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CONFLUX_BUILD_DIR=${CONFLUX_BUILD_DIR:-build-package}
CONFLUX_BUILD_TYPE=${CONFLUX_BUILD_TYPE:-Release} scripts/build.sh \
  -DCONFLUX_BUILD_TESTS=OFF -DCONFLUX_BUILD_BENCH=OFF -DCONFLUX_TEST_HOOKS=OFF "$@"
rm -rf "$CONFLUX_BUILD_DIR/packages"
(cd "$CONFLUX_BUILD_DIR" && cpack -G DEB >cpack.log 2>&1) || {
  cat "$CONFLUX_BUILD_DIR/cpack.log"
  exit 1
}
scripts/check_no_test_hooks.sh "$CONFLUX_BUILD_DIR"/packages/*.deb
