#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Work-conserving fair share: job B (2 ranks, conflux-allreduce-worker) is joined to
# a capped confluxd but mostly idle, one 1 MiB AllReduce then PAUSE ms of "compute", while job
# A (2 ranks, conflux-nccl-driver --modes collnet, 1 MiB AllReduces back to back) runs. A is
# granted half the cap; with the idle job's share lent it should get most of the cap. Every 0.5
# s prints both jobs' grant and achieved result rate; then A's mean rate while B was joined.
# Both jobs verify every result. Loopback only.
#   bench/fairshare/lend_idle_share.sh [BUILD_DIR] [MAX_MBPS] [PAUSE_MS] [CONFLUXD]
#   (defaults: build, 400, 300, BUILD_DIR/aggregator/confluxd; CONFLUXD: compare a daemon)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
cap=${2:-400}
pause=${3:-300}
confluxd=${4:-$B/aggregator/confluxd}
source bench/fairshare/capped_daemon.sh
export CONFLUX_AGGREGATORS=127.0.0.1:$control CONFLUX_SOCKET_IFNAME=lo
b_pids=()
for r in 0 1; do
  "$B/tools/conflux-allreduce-worker" --aggregators "$CONFLUX_AGGREGATORS" --nranks 2 \
    --rank "$r" --job-key 4242 --count 256K --iters 30 --warmup 0 --pause-ms "$pause" \
    >"$work/b$r" 2>&1 &
  b_pids+=($!)
done
sleep 1  # B joined first: A's grant is half the cap from its start
"$B/tools/driver/conflux-nccl-driver" --plugin "$B/nccl_plugin/libnccl-net-conflux.so" \
  --nranks 2 --modes collnet --require-collnet -d float -o sum -b 1M -e 1M -n 300 -w 1 \
  --timeout 200 >"$work/a" 2>&1 &
a=$!
echo "# t(s) job:grant=Mbit/s job:result=Mbit/s ..., cap $cap Mbit/s, B pauses $pause ms"
while kill -0 "$a" 2>/dev/null; do
  line=$(curl -s "http://127.0.0.1:$metrics/metrics" |
    sed -n 's/^conflux_job_\(grant\|result\)_mbps{conflux_job="\([0-9]*\)"} \(.*\)/\2:\1=\3/p' | tr '\n' ' ')
  echo "$line"
  sleep 0.5
done | tee "$work/samples"
# A is the job with the larger id (it joined second). Its mean result rate over the samples
# where both jobs were live and A had a rate.
awk -v cap="$cap" '
  { n = 0; delete g; delete r
    for (i = 1; i <= NF; i++) { split($i, p, /[:=]/)
      if (p[2] == "grant") { g[p[1]] = p[3]; n++ } else r[p[1]] = p[3] } }
  n == 2 { a = ""; for (j in g) if (a == "" || j + 0 > a + 0) a = j
           if (r[a] > 0) { sum += r[a]; cnt++; grant = g[a] } }
  END { if (cnt) printf "# job A: mean %.0f Mbit/s while B was joined = %.2f of its grant %d, %.2f of the cap\n",
                        sum / cnt, sum / cnt / grant, grant, sum / cnt / cap }' "$work/samples"
a_rc=0
wait "$a" || a_rc=$?
ok=0
if [[ $a_rc -eq 0 ]] && grep -q "verified: all results correct" "$work/a"; then echo "job a: verified"; else
  echo "job a: NOT verified (exit $a_rc)"
  tail -5 "$work/a"
  ok=1
fi
for r in 0 1; do  # the worker checks every result: exit 0 = all correct
  if wait "${b_pids[$r]}"; then echo "job b rank $r: verified"; else
    echo "job b rank $r: FAILED"
    tail -3 "$work/b$r"
    ok=1
  fi
done
exit $ok
