#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two driver ranks launched apart (CONFLUX_DRIVER_RANK/_NRANKS/_ROOT), each with its own value
# of one setting that NCCL reads from every rank's own getProperties (CONFLUX_NET_LATENCY_US:
# NCCL models the network with each rank's figure; CONFLUX_NET_MAX_RECVS: each proxy decides
# from its own whether senders share a connection, src/transport/net.cc). Ranks whose values
# differ must both stop with "NCCL would hang" naming the two values; with equal values (the
# second, on both ranks) the run goes through verified.
#   setting_disagreement.sh <conflux-nccl-driver> <libnccl-net-conflux.so> <VAR> <value0>
#       <value1> <hang line> <equal-run line, or ""> -- <driver arguments>
set -u
driver=$1 plugin=$2 var=$3 v0=$4 v1=$5 hang_line=$6 equal_line=$7
shift 7
[[ ${1-} == -- ]] || { echo "usage: see the header"; exit 2; }
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_pair() {  # run_pair <value rank 0> <value rank 1>: sets rc0 rc1, outputs in $work
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local r v pids=()
  for r in 0 1; do
    v=$1
    [[ $r == 1 ]] && v=$2
    env CONFLUX_SOCKET_IFNAME=lo CONFLUX_DRIVER_NRANKS=2 CONFLUX_DRIVER_ROOT="127.0.0.1:$port" \
      CONFLUX_DRIVER_RANK=$r "$var=$v" "$driver" --plugin "$plugin" "${@:3}" --timeout 30 \
      >"$work/out$r" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
}
fail() { echo "FAIL: $*"; tail -n 5 "$work"/out0 "$work"/out1; exit 1; }

run_pair "$v0" "$v1" "$@"
((rc0 != 0 && rc1 != 0)) || fail "$var $v0 / $v1: exit codes $rc0 $rc1, want both non-zero"
grep -qF "$hang_line" "$work/out0" "$work/out1" || fail "no line '$hang_line'"
echo "$var $v0 / $v1: both ranks stopped, '$hang_line'"

run_pair "$v1" "$v1" "$@"
((rc0 == 0 && rc1 == 0)) || fail "$var $v1 / $v1: exit codes $rc0 $rc1, want 0 0"
if [[ -n $equal_line ]]; then
  grep -qF "$equal_line" "$work/out0" || fail "$var $v1 / $v1: no line '$equal_line'"
fi
grep -q "verified: all results correct" "$work/out0" || fail "$var $v1 / $v1: not verified"
echo "$var $v1 / $v1: verified"
