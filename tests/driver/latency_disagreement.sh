#!/usr/bin/env bash
# Two driver ranks launched apart (CONFLUX_DRIVER_RANK/_NRANKS/_ROOT), each with its own
# CONFLUX_NET_LATENCY_US: when the plugin's getProperties latency differs between ranks the
# driver must stop with "NCCL would hang" (NCCL models the network with each rank's own
# figure), and with equal settings the run goes through verified.
#   latency_disagreement.sh <conflux-nccl-driver> <libnccl-net-conflux.so>
set -u
driver=$1 plugin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_pair() {  # run_pair <latency rank 0> <latency rank 1>: sets rc0 rc1, outputs in $work
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local r pids=()
  for r in 0 1; do
    local lat=$1
    [[ $r == 1 ]] && lat=$2
    env CONFLUX_SOCKET_IFNAME=lo CONFLUX_DRIVER_NRANKS=2 CONFLUX_DRIVER_ROOT="127.0.0.1:$port" \
      CONFLUX_DRIVER_RANK=$r CONFLUX_NET_LATENCY_US="$lat" \
      "$driver" --plugin "$plugin" --modes ring -b 4 -e 4K -f 32 -n 1 -w 0 --timeout 30 \
      >"$work/out$r" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
}
fail() { echo "FAIL: $*"; tail -n 5 "$work"/out0 "$work"/out1; exit 1; }

run_pair 0 30
((rc0 != 0 && rc1 != 0)) || fail "differing latencies: exit codes $rc0 $rc1, want both non-zero"
grep -q "NCCL would hang: net.getProperties(0).latency differs between ranks (rank 0: 0 us, rank 1: 30 us)" \
  "$work/out0" "$work/out1" || fail "no 'NCCL would hang' line naming both ranks' latencies"
echo "differing latencies (0, 30 us): both ranks stopped, 'NCCL would hang'"

run_pair 30 30
((rc0 == 0 && rc1 == 0)) || fail "equal latencies: exit codes $rc0 $rc1, want 0 0"
grep -q "verified: all results correct" "$work/out0" || fail "equal latencies: not verified"
echo "equal latencies (30, 30 us): verified"
