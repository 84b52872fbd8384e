# SPDX-License-Identifier: Apache-2.0
# Shared by the DPDK veth test scripts (sourced, not run). The caller sets AGG_IP, WRK_IP,
# CTL, DATA, MET, VETH_QUEUES and `worker`; this defines skip/fail, wait_ready, metric,
# run_job and stop_daemon, checks root and tools, and
# veth_setup builds (and the EXIT trap removes) this layout, names carrying the PID:
#   netns cfxa<pid>: veth cfxd<pid>  $AGG_IP/24  <- DPDK af_packet vdev + kernel TCP control
#   netns cfxw<pid>: veth cfxk<pid>  $WRK_IP/24  <- workers (kernel UDP)
# The aggregator namespace's kernel owns $AGG_IP for the control TCP port only (like a
# bifurcated NIC): it drops the UDP data ports on input (af_packet has already seen the frame)
# and does not answer ARP (arp_ignore=8), so the workers resolve it through confluxd's ARP
# responder. The worker veth computes checksums in software (tx off): af_packet cannot tell
# the PMD that a checksum is left to offload.
# A skip for a missing tool or permission fails under CONFLUX_CI=1 (.ci/run sets it).
skip() {
  if [ -n "${CONFLUX_CI:-}" ] && [ "${CONFLUX_CI}" != 0 ]; then
    echo "FAILED: would skip, which CONFLUX_CI=1 forbids: $*"
    exit 1
  fi
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*"
  [ -f "$tmp/confluxd.log" ] && tail -n 30 "$tmp/confluxd.log"
  # Non-zero dataplane counters help tell a lost frame from a stuck slot.
  ip netns exec $W curl -s --max-time 3 "http://$AGG_IP:$MET/metrics" 2>/dev/null |
    grep -E '^conflux_(dpdk|dataplane)_' | grep -v ' 0$'
  exit 1
}

[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veth, AF_PACKET)"
for t in ip nft ethtool curl; do command -v $t >/dev/null || skip "needs $t"; done

id=$$
A=cfxa$id W=cfxw$id VD=cfxd$id VK=cfxk$id
tmp=$(mktemp -d)
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  ip netns del $A 2>/dev/null; ip netns del $W 2>/dev/null
  rm -rf "$tmp" /var/run/dpdk/cfx$id
}
trap cleanup EXIT
trap "exit 1" INT TERM
ina() { ip netns exec $A "$@"; }
inw() { ip netns exec $W "$@"; }

veth_setup() {
  local q=${VETH_QUEUES:-1}
  ip netns add $A || skip "cannot create network namespaces"
  ip netns add $W
  ip link add $VD numtxqueues $q numrxqueues $q type veth peer name $VK \
      numtxqueues $q numrxqueues $q || skip "cannot create veth pairs"
  ip link set $VD netns $A
  ip link set $VK netns $W
  ina ip link set lo up; inw ip link set lo up
  ina ip link set $VD mtu 9000 up; inw ip link set $VK mtu 9000 up
  ina ip addr add $AGG_IP/24 dev $VD
  inw ip addr add $WRK_IP/24 dev $VK
  ina sysctl -qw net.ipv4.conf.$VD.arp_ignore=8
  inw ethtool -K $VK tx off >/dev/null 2>&1
  ina nft -f - <<NFT || fail "nft setup"
table inet cfx {
  chain input { type filter hook input priority 0; udp dport $DATA-$((DATA + 3)) drop; }
}
NFT
}

# wait_ready TENTHS: waits that many 0.1 s for confluxd ($daemon_pid) to write its ready file
# and checks that it runs the DPDK dataplane.
wait_ready() {
  for _ in $(seq "$1"); do
    [ -f "$tmp/ready" ] && break
    kill -0 $daemon_pid 2>/dev/null || break
    sleep 0.1
  done
  [ -f "$tmp/ready" ] || fail "confluxd did not start"
  grep "dpdk dataplane" "$tmp/confluxd.log" || fail "not the dpdk dataplane"
}

metrics() { inw curl -s --max-time 5 "http://$AGG_IP:$MET/metrics"; }
metric() {  # metric NAME [LABEL_FILTER]: sum of matching samples
  metrics | awk -v n="$1" -v f="${2:-}" '$1 ~ "^"n"({|$)" && index($1, f) { s += $2 } END { print s + 0 }'
}
# run_job KEY N ARGS...: N ranks of one job in the worker namespace; fails unless all verify.
run_job() {
  local key=$1 n=$2; shift 2
  local pids=() r rc=0
  for r in $(seq 0 $((n - 1))); do
    inw "$worker" --aggregators $AGG_IP:$CTL --nranks $n --rank $r --bind $WRK_IP \
        --job-key $key "$@" >"$tmp/w$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p || rc=1; done
  cat "$tmp/w0.log"
  [ $rc = 0 ] || { for r in $(seq 0 $((n - 1))); do tail -n 5 "$tmp/w$r.log"; done; }
  return $rc
}
# stop_daemon: SIGTERM to confluxd ($daemon_pid); it must exit 0 within 5 s (its lcores and
# port stop in ~0.5 s).
stop_daemon() {
  kill -TERM $daemon_pid
  for _ in $(seq 50); do kill -0 $daemon_pid 2>/dev/null || break; sleep 0.1; done
  kill -0 $daemon_pid 2>/dev/null && fail "confluxd still running 5 s after SIGTERM"
  local rc
  wait $daemon_pid; rc=$?; daemon_pid=
  [ $rc = 0 ] || fail "confluxd exited $rc after SIGTERM"
}
