#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds Conflux into build/ (or $CONFLUX_BUILD_DIR).
#   CONFLUX_BUILD_TARGETS="a b"  build only these targets (default: everything)
#   extra arguments go to cmake's configure step
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${CONFLUX_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${CONFLUX_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
targets=()
for t in ${CONFLUX_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
