#!/usr/bin/env bash
# Two driver ranks launched apart (CONFLUX_DRIVER_RANK/_NRANKS/_ROOT), each with its own
# CONFLUX_NET_MAX_RECVS: NCCL's proxies decide from their own maxRecvs whether senders share a
# connection (src/transport/net.cc), so ranks that declare different figures must stop the
# pxn mode with "NCCL would hang"; with equal settings it goes through verified.
#   max_recvs_disagreement.sh <conflux-nccl-driver> <libnccl-net-conflux.so>
set -u
driver=$1 plugin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_pair() {  # run_pair <maxRecvs rank 0> <maxRecvs rank 1>: sets rc0 rc1, outputs in $work
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local r pids=()
  for r in 0 1; do
    local m=$1
    [[ $r == 1 ]] && m=$2
    env CONFLUX_SOCKET_IFNAME=lo CONFLUX_DRIVER_NRANKS=2 CONFLUX_DRIVER_ROOT="127.0.0.1:$port" \
      CONFLUX_DRIVER_RANK=$r CONFLUX_NET_MAX_RECVS="$m" \
      "$driver" --plugin "$plugin" --modes pxn -b 4K -e 64K -f 16 -n 1 -w 0 --pxn-senders 2 \
      --timeout 30 >"$work/out$r" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
}
fail() { echo "FAIL: $*"; tail -n 5 "$work"/out0 "$work"/out1; exit 1; }

run_pair 8 1
((rc0 != 0 && rc1 != 0)) || fail "differing maxRecvs: exit codes $rc0 $rc1, want both non-zero"
grep -q "NCCL would hang: net.getProperties(0).maxRecvs differs between ranks (rank 0: 8, rank 1: 1)" \
  "$work/out0" "$work/out1" || fail "no 'NCCL would hang' line naming both ranks' maxRecvs"
echo "differing maxRecvs (8, 1): both ranks stopped, 'NCCL would hang'"

run_pair 1 1
((rc0 == 0 && rc1 == 0)) || fail "equal maxRecvs: exit codes $rc0 $rc1, want 0 0"
grep -q "2 senders per peer over 2 connections" "$work/out0" || fail "maxRecvs 1: not 2 connections"
grep -q "verified: all results correct" "$work/out0" || fail "equal maxRecvs: not verified"
echo "equal maxRecvs (1, 1): a connection per sender, verified"
