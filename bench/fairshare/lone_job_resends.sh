#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One CollNet job (2 ranks, 1 MiB float sums, every result verified) alone on a loopback confluxd
# capped at MAX_MBPS (one dataplane thread, capped_daemon.sh): how much of the cap it reaches and
# how many of the results the daemon sent it were resends ("needless resends under
# pacing"). Prints one line: the daemon's mean result rate (conflux_job_result_mbps, sampled
# every 0.5 s, without the first 2 s and the last sample) over the cap, the goodput (2 ranks x
# 1 MiB over the driver's time per AllReduce) over the cap, the results resent
# (conflux_job_unicast_resends_total) of those sent (conflux_job_results_sent_total), and each
# rank's own counters (NCCL_DEBUG=INFO: retransmitted, of which needless; window decreases).
# CONFLUX_* variables (e.g. CONFLUX_WINDOW_SLOTS) pass through to the ranks.
#   bench/fairshare/lone_job_resends.sh [BUILD_DIR] [MAX_MBPS] [ITERS] [PLUGIN]
#   (defaults: build, 100, 60 (about 10 s at 100 Mbit/s), BUILD_DIR's libnccl-net-conflux.so)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
cap=${2:-100}
iters=${3:-60}
plugin=${4:-$B/nccl_plugin/libnccl-net-conflux.so}
source bench/fairshare/capped_daemon.sh
export CONFLUX_AGGREGATORS=127.0.0.1:$control CONFLUX_SOCKET_IFNAME=lo NCCL_DEBUG=INFO
"$B/tools/driver/conflux-nccl-driver" --plugin "$plugin" --nranks 2 --modes collnet \
  --require-collnet -d float -o sum -b 1M -e 1M -n "$iters" -w 1 --timeout 120 >"$work/out" 2>&1 &
driver=$!
: >"$work/samples"
while kill -0 "$driver" 2>/dev/null; do
  { curl -s "http://127.0.0.1:$metrics/metrics" | grep '^conflux_job_' || true; } | tr '\n' ' ' \
    >>"$work/samples"
  echo >>"$work/samples"
  sleep 0.5
done
if ! wait "$driver" || ! grep -q "verified: all results correct" "$work/out"; then
  echo "job: NOT verified"
  tail -20 "$work/out"
  exit 1
fi
# The job's counters as last sampled (the daemon forgets the job when its ranks leave).
last=$(grep conflux_job_results_sent_total "$work/samples" | tail -n 1 || true)
sum() { grep -o "$1{[^}]*} [0-9.e+]*" <<<"$last" | awk '{ s += $2 } END { print s + 0 }'; }
sent=$(sum conflux_job_results_sent_total)
resent=$(sum conflux_job_unicast_resends_total)
rate=$({ grep -o 'conflux_job_result_mbps{[^}]*} [0-9.e+]*' "$work/samples" || true; } | awk '
  { r[n++] = $2 } END { for (i = 4; i < n - 1; i++) { s += r[i]; k++ }; printf "%.1f", k ? s / k : 0 }')
us=$(awk '$1 == 1048576 { t = $5 } END { print t + 0 }' "$work/out")
ranks=$({ grep -o '[0-9]* retransmitted ([0-9]* fast, [0-9]* needless), [0-9]* congestion-window decreases' \
  "$work/out" || true; } | tr '\n' ';')
awk -v cap="$cap" -v rate="$rate" -v us="$us" -v sent="$sent" -v resent="$resent" -v ranks="$ranks" '
  BEGIN { good = us > 0 ? 2 * 1048576 * 8 / us : 0
          c = cap > 0 ? cap : 1  # cap 0: no cap, the ratios are then rates
          printf "cap %d: result rate %.1f Mbit/s = %.2f of the cap, goodput %.1f = %.2f, resent %d of %d = %.2f %% | %s\n",
                 cap, rate, rate / c, good, good / c, resent, sent, sent ? 100 * resent / sent : 0, ranks }'
