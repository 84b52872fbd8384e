#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# confluxd with the DPDK dataplane on a veth pair, kernel-UDP workers on the other end.
#   dpdk_veth_test.sh SCENARIO CONFLUXD WORKER HOSTILE_FRAMES
# SCENARIO: all_types (every dtype x op exact, 3 ranks), loss (5% of results dropped by
# nftables on the workers' input hook + 2% of contributions dropped by confluxd's receive
# fault injection), hostile (malformed/foreign frames dropped and counted, daemon still serves),
# unpinned (no free EAL worker lcore: the queue runs on a registered thread), multicast
# (results to the job's group, multicast = auto: the PROBE goes out by DPDK too; every dtype x
# op exact, 3 ranks that joined the group on the worker veth).
# Several queues (software steering on a port without rte_flow): dpdk_multiqueue_test.sh.
#
# Layout and the kernel's part: veth_lib.sh.
set -u
scenario=$1 confluxd=$2 worker=$3 hostile=$4
AGG_IP=10.77.0.1 WRK_IP=10.77.0.2 CTL=7470 DATA=7471 MET=9470 VETH_QUEUES=1
. "$(dirname "$0")/veth_lib.sh"
veth_setup

lcores="-l 0"
[ "$(nproc)" -ge 2 ] && lcores="-l 0,1"
queues=1 qpairs=1
case $scenario in
  unpinned) lcores="-l 0" ;;  # no worker lcore: the queue runs on a registered std::thread
esac
eal="$lcores --no-huge -m 512 --no-pci --file-prefix=cfx$id --no-telemetry --log-level=*:warning"
eal="$eal --vdev=net_af_packet0,iface=$VD,framesz=9216,blocksz=36864,framecnt=512,qpairs=$qpairs"
fault=0
[ "$scenario" = loss ] && fault=0.02
extra=()
[ "$scenario" = multicast ] && extra=(--multicast-range 239.205.1.2/32 --multicast-ttl 2)
# Not through ina(): a backgrounded function would be a subshell, and $! must be confluxd
# itself (ip netns exec execs it) so that cleanup stops it.
ip netns exec $A "$confluxd" --listen $AGG_IP --control-port $CTL --data-port $DATA --metrics-port $MET \
    --threads $queues --dataplane dpdk --dpdk-eal-args "$eal" --dpdk-idle-sleep-us 50 \
    --fault-drop $fault "${extra[@]}" --ready-file "$tmp/ready" --log-level info \
    >"$tmp/confluxd.log" 2>&1 &
daemon_pid=$!
wait_ready 100

case $scenario in
  all_types)
    run_job 11 3 --dtype all --op all --count 1,1000,70000 --iters 2 --warmup 1 --timeout-s 60 \
        || fail "all dtype x op"
    arp=$(metric conflux_dpdk_arp_replies_total)
    [ "$arp" -ge 1 ] || fail "workers did not resolve the aggregator through its ARP responder"
    slots=$(metric conflux_dataplane_slots_completed_total)
    [ "$slots" -gt 0 ] || fail "no slot completed on the dpdk dataplane"
    echo "ok: every dtype x op exact over DPDK; $slots slots, $arp ARP replies"
    ;;
  multicast)
    # Frame-level checks (group MAC, TTL): the dpdk instantiation of the conformance suite,
    # Backends/ConformanceMulticast.*/dpdk.
    run_job 16 3 --dtype all --op all --count 1,1000,70000 --iters 2 --warmup 1 --timeout-s 60 \
        --log-level info || fail "all dtype x op by multicast"
    for r in 0 1 2; do
      grep -q "results by multicast (group 239.205.1.2:$DATA: every rank" "$tmp/w$r.log" \
          || { cat "$tmp/w$r.log"; fail "rank $r: results not by multicast"; }
    done
    grep -q "results by multicast to group 239.205.1.2:$DATA (every rank" "$tmp/confluxd.log" \
        || fail "the daemon did not decide multicast after its probe"
    decided=$(metric conflux_multicast_decisions_total 'mode="multicast"')
    [ "$decided" = 1 ] || fail "multicast decisions: $decided"
    echo "ok: every dtype x op exact by multicast over DPDK (probe and results to the group)"
    ;;
  unpinned)
    grep -q "running unpinned threads" "$tmp/confluxd.log" || fail "no unpinned-thread warning"
    run_job 15 2 --dtype float,f8e5m2,uint64 --op all --count 1,3000 --iters 1 --warmup 0 \
        --timeout-s 60 || fail "allreduce on an unpinned queue thread"
    echo "ok: exact on a registered non-EAL thread"
    ;;
  loss)
    inw nft -f - <<EOF || fail "nft loss rule"
table inet loss {
  chain input { type filter hook input priority 0; udp sport $DATA numgen random mod 100 < 5 drop; }
}
EOF
    run_job 12 2 --dtype float,bf16,int32 --op sum,max --count 1000,300000 --iters 2 --warmup 0 \
        --rto-us 2000 --timeout-s 90 || fail "allreduce under loss"
    served=$(metric conflux_dataplane_retransmits_served_total)
    faults=$(metric conflux_dataplane_faults_injected_total 'kind="drop"')
    [ "$served" -gt 0 ] || fail "no lost result was re-served"
    echo "ok: exact under loss; $served results re-served, $faults contributions dropped on receive"
    ;;
  hostile)
    mac=$(ina cat /sys/class/net/$VD/address)
    run_job 13 2 --dtype float --op sum --count 5000 --iters 1 --warmup 0 || fail "before"
    before=$(metrics)
    inw "$hostile" $VK "$mac" $WRK_IP $AGG_IP $DATA 20 >"$tmp/expect" || fail "sending frames"
    sleep 0.5
    after=$(metrics)
    while IFS='=' read -r reason n; do
      if [ "$reason" = bad_magic ]; then name=conflux_dataplane_drops_total; else name=conflux_dpdk_frame_drops_total; fi
      b=$(echo "$before" | awk -v n=$name -v r="reason=\"$reason\"" '$1 ~ "^"n"{" && index($1, r) { s += $2 } END { print s + 0 }')
      a=$(echo "$after" | awk -v n=$name -v r="reason=\"$reason\"" '$1 ~ "^"n"{" && index($1, r) { s += $2 } END { print s + 0 }')
      d=$((a - b))
      echo "  $reason: +$d (sent $n)"
      if [ "$reason" = ip_fragment ] && [ $d = 0 ]; then
        # The af_packet PMD joins a PACKET_FANOUT group with PACKET_FANOUT_FLAG_DEFRAG: the
        # kernel holds fragments for reassembly and they never reach the PMD (the drop path
        # itself is covered by test_dpdk_frame). Either way no fragment reaches the engine.
        echo "    (held by the kernel's af_packet fanout defrag before the PMD)"
      elif [ "$reason" = foreign ]; then [ $d -ge $n ] || fail "$reason: $d < $n"
      else [ $d -eq $n ] || { echo "$after" | grep -E "frame|drops_total.*(magic|trunc)"; fail "$reason: counted $d, sent $n"; }; fi
    done <"$tmp/expect"
    run_job 14 2 --dtype float,int8 --op sum --count 5000 --iters 2 --warmup 0 || fail "after"
    kill -0 $daemon_pid || fail "daemon died"
    echo "ok: hostile frames dropped and counted; daemon still serving"
    ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
# SIGTERM: lcores stop, the port stops, exit 0 (within the daemon's ~0.5 s budget, give 5 s).
stop_daemon
exit 0
