#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two jobs on the same aggregators (run under with_confluxd.sh): job A starts, job B joins once
# A is connected, B ends while A still runs. Each job's output lines are prefixed "job A: " /
# "job B: "; exits non-zero when either job does.
#   two_jobs.sh [--a-env "K=V..."] [--b-env "K=V..."] --a "ARGS OF A..." -- CMD ARGS...
#   (CMD ARGS: job B; A runs CMD with its own args; --a-env/--b-env: extra environment of one
#   job, e.g. its own CONFLUX_SECRET as a tenant)
set -uo pipefail
usage() { echo "two_jobs: usage: two_jobs.sh [--a-env 'K=V...'] [--b-env 'K=V...'] --a 'ARGS' -- CMD ARGS..." >&2; exit 2; }
a_env=() b_env=()
while [[ $# -gt 0 && $1 == --?-env ]]; do
  [[ $# -ge 2 ]] || usage
  if [[ $1 == --a-env ]]; then read -r -a a_env <<<"$2"; else read -r -a b_env <<<"$2"; fi
  shift 2
done
[[ $# -ge 3 && $1 == --a && $3 == -- ]] || usage
read -r -a a_args <<<"$2"
shift 3  # --a ARGS --
cmd=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
env "${a_env[@]}" "$cmd" "${a_args[@]}" >"$work/a" 2>&1 &
a_pid=$!
# B joins once A's CollNet is connected (NCCL_DEBUG=INFO prints it).
for _ in $(seq 1 600); do
  grep -q "CollNet connected" "$work/a" && break
  kill -0 "$a_pid" 2>/dev/null || break
  sleep 0.1
done
env "${b_env[@]}" "$cmd" "$@" >"$work/b" 2>&1
b_rc=$?
wait "$a_pid"
a_rc=$?
sed 's/^/job A: /' "$work/a"
sed 's/^/job B: /' "$work/b"
echo "two_jobs: job A exit $a_rc, job B exit $b_rc"
[[ $a_rc -eq 0 && $b_rc -eq 0 ]]
