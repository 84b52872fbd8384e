#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets with clang and runs each for N seconds (default 30)
# from the committed seed corpus: scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
SECONDS_PER_TARGET=${1:-30}
CC=clang CXX=clang++ CONFLUX_BUILD_DIR=build-fuzz CONFLUX_BUILD_TYPE=RelWithDebInfo \
  CONFLUX_BUILD_TARGETS="fuzz_data fuzz_control fuzz_slots fuzz_session" \
  scripts/build.sh -DCONFLUX_BUILD_FUZZ=ON -DCONFLUX_BUILD_TESTS=OFF -DCONFLUX_BUILD_BENCH=OFF
# target binary, then its seed corpus: the stateless parsers, then the stateful targets
for t in "protocol/fuzz_data protocol/fuzz/corpus_data" \
  "protocol/fuzz_control protocol/fuzz/corpus_control" \
  "aggregator/fuzz_slots aggregator/fuzz/corpus_slots" \
  "aggregator/fuzz_session aggregator/fuzz/corpus_session"; do
  read -r bin corpus <<<"$t"
  work=$(mktemp -d)
  cp "$corpus"/* "$work"/
  echo "$(basename "$bin"): ${SECONDS_PER_TARGET}s"
  # Coverage (DONE cov: edges) and speed on success; the whole end of the log on a failure.
  if build-fuzz/"$bin" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
    -max_len=66000 "$work" >"$work.log" 2>&1; then
    grep -E "DONE|stat::(number_of_executed_units|average_exec_per_sec)" "$work.log"
  else
    tail -n 60 "$work.log"
    exit 1
  fi
  rm -rf "$work" "$work.log"
done
