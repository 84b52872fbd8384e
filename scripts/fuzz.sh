#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for N seconds (default 30)
# from the committed seed corpus: scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
SECONDS_PER_TARGET=${1:-30}
CC=clang CXX=clang++ CONFLUX_BUILD_DIR=build-fuzz CONFLUX_BUILD_TYPE=RelWithDebInfo \
  CONFLUX_BUILD_TARGETS="fuzz_data fuzz_control" \
  scripts/build.sh -DCONFLUX_BUILD_FUZZ=ON -DCONFLUX_BUILD_TESTS=OFF -DCONFLUX_BUILD_BENCH=OFF
for t in data control; do
  work=$(mktemp -d)
  cp protocol/fuzz/corpus_${t}/* "$work"/
  echo "fuzz_${t}: ${SECONDS_PER_TARGET}s"
  build-fuzz/protocol/fuzz_${t} -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
    -max_len=66000 "$work" 2>&1 | tail -n 12
  rm -rf "$work"
done
