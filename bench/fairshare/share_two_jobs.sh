#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two CollNet jobs sharing one confluxd under a bandwidth cap (fair sharing): job A
# (2 ranks) starts alone, job B (2 ranks) joins 4 s later and ends first. Every 0.5 s prints
# each job's grant and achieved result rate from /metrics (conflux_job_grant_mbps,
# conflux_job_result_mbps, the latter sampled by the daemon about once a second); both jobs
# verify every result. Loopback only. WEIGHTS "WA,WB" (e.g. 3,1) makes A and B jobs of two
# tenants of these weights (aggregator/README.md "Tenants"), each with its own secret; each
# job's expected part of the cap is then its weight over the sum (else a half).
#   bench/fairshare/share_two_jobs.sh [BUILD_DIR] [MAX_MBPS] [WEIGHTS]  (defaults: build, 400)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
cap=${2:-400}
weights=${3:-1,1}
wa=${weights%,*} wb=${weights#*,}
secret_a=() secret_b=()
if [[ -n ${3:-} ]]; then
  work=$(mktemp -d)
  daemon_config=$work/tenants.toml
  printf '[tenants.a]\nsecret = "bench-tenant-a"\nweight = %s\n[tenants.b]\nsecret = "bench-tenant-b"\nweight = %s\n' \
    "$wa" "$wb" >"$daemon_config"
  secret_a=(CONFLUX_SECRET=bench-tenant-a) secret_b=(CONFLUX_SECRET=bench-tenant-b)
fi
source bench/fairshare/capped_daemon.sh
export CONFLUX_AGGREGATORS=127.0.0.1:$control CONFLUX_SOCKET_IFNAME=lo
job() {  # job ITERATIONS NAME
  local secret=("${secret_a[@]}")
  [[ $2 == b ]] && secret=("${secret_b[@]}")
  env "${secret[@]}" "$B/tools/driver/conflux-nccl-driver" --plugin "$B/nccl_plugin/libnccl-net-conflux.so" \
    --nranks 2 --modes collnet --require-collnet -d float -o sum -b 1M -e 1M -n "$1" -w 1 \
    --timeout 200 >"$work/$2" 2>&1
}
job 400 a &
a=$!
sleep 4
job 150 b &
b=$!
t0=$(date +%s%N)
echo "# t(s) job:grant=Mbit/s job:result=Mbit/s ..., cap $cap Mbit/s"
while kill -0 "$a" 2>/dev/null; do
  line=$(curl -s "http://127.0.0.1:$metrics/metrics" |
    sed -n 's/^conflux_job_\(grant\|result\)_mbps{conflux_job="\([0-9]*\)"} \(.*\)/\2:\1=\3/p' | tr '\n' ' ')
  awk -v ns="$(($(date +%s%N) - t0))" -v l="$line" 'BEGIN { printf "%5.1f %s\n", ns / 1e9, l }'
  sleep 0.5
done | tee "$work/samples"
# While both jobs held a grant: each one's mean achieved rate; after B left: how long until A
# reached 95 % of the cap.
awk -v cap="$cap" -v wa="$wa" -v wb="$wb" '
  { n = 0; delete r
    for (i = 2; i <= NF; i++) if ($i ~ /:result=/) { split($i, p, /[:=]/); r[p[1]] = p[3]; n++ } }
  n == 2 { for (j in r) { sum[j] += r[j]; cnt[j]++ }; last_two = $1 }
  n == 1 && last_two != "" && !done { for (j in r) if (r[j] >= 0.95 * cap) {
      printf "# after the second job left: the first at >= 95%% of the cap within %.1f s\n",
             $1 - last_two; done = 1 } }
  END { first = ""; for (j in sum) if (first == "" || j + 0 < first + 0) first = j
        for (j in sum) { w = (j == first ? wa : wb) / (wa + wb)
          printf "# job %s: mean %.0f Mbit/s = %.2f of the cap while both ran (%.2f of its share %.2f)\n",
                 j, sum[j] / cnt[j], sum[j] / cnt[j] / cap, sum[j] / cnt[j] / cap / w, w } }' "$work/samples"
ok=0
for j in a b; do
  pid=$a
  [[ $j == b ]] && pid=$b
  wait "$pid" 2>/dev/null || true
  if grep -q "verified: all results correct" "$work/$j"; then echo "job $j: verified"; else
    echo "job $j: NOT verified"
    tail -5 "$work/$j"
    ok=1
  fi
done
exit $ok
