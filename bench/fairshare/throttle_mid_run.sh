#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# An aggregator throttled mid-run: one confluxd on loopback capped at CAP Mbit/s, a
# 2-rank job with the auto split (`conflux-nccl-driver --modes hybrid --ring-fraction auto`,
# 1 MiB AllReduces), and after AFTER seconds `conflux throttle --max-mbps CAP/4`. Prints, every
# 0.5 s, the job's grant and the result rate the daemon measures (conflux_job_grant_mbps,
# conflux_job_result_mbps), then the plugin's log lines about the grant and its split (the
# driver passes its ranks' output on when they end, so these carry request numbers, not
# times). Loopback only; the job verifies every result.
#   bench/fairshare/throttle_mid_run.sh [BUILD_DIR] [CAP] [AFTER] [ITERS]   (build 800 3 8000)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
cap=${2:-800}
after=${3:-3}
iters=${4:-8000}
source bench/fairshare/capped_daemon.sh
t0=$(date +%s%N)
stamp() { awk -v t0="$t0" '{ "date +%s%N" | getline now; close("date +%s%N");
                             printf "%6.2f %s\n", (now - t0) / 1e9, $0; fflush() }'; }
CONFLUX_AGGREGATORS=127.0.0.1:$control CONFLUX_SOCKET_IFNAME=lo NCCL_DEBUG=INFO \
  "$B/tools/driver/conflux-nccl-driver" --plugin "$B/nccl_plugin/libnccl-net-conflux.so" \
  --nranks 2 --modes hybrid --ring-fraction auto --require-collnet -d float -o sum -b 1M -e 1M \
  -n "$iters" -w 1 --timeout 300 >"$work/job" 2>&1 &
job=$!
(sleep "$after"
 echo "$(awk -v t0="$t0" -v now="$(date +%s%N)" 'BEGIN { printf "%6.2f", (now - t0) / 1e9 }') \
throttle: $("$B/aggregator/cli/conflux" throttle "127.0.0.1:$metrics" --max-mbps $((cap / 4)))" \
   >"$work/throttle") &
echo "# t(s) grant=Mbit/s result=Mbit/s (cap $cap, then $((cap / 4)) after ${after} s)"
while kill -0 "$job" 2>/dev/null; do
  curl -s "http://127.0.0.1:$metrics/metrics" |
    sed -n 's/^conflux_job_\(grant\|result\)_mbps{conflux_job="[0-9]*"} \(.*\)/\1=\2/p' | tr '\n' ' ' |
    stamp
  sleep 0.5
done
wait "$job" || true
cat "$work/throttle"
grep -E "grant now|ring fraction [0-9.]+ from request" "$work/job" | grep "^\[0\]" |
  sed 's/^\[0\] INFO [^ ]* //' | head -20
grep -q "verified: all results correct" "$work/job" && echo "job: verified" ||
  { echo "job: NOT verified"; tail -5 "$work/job"; exit 1; }
