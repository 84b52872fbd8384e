#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# confluxd's DPDK dataplane with several queues over a veth pair; kernel-UDP workers on the
# other end.
#   dpdk_multiqueue_test.sh SCENARIO CONFLUXD WORKER
# SCENARIO:
#   software_steering_2q: 2 queues on a net_af_packet vdev with qpairs=2. The PMD's two
#     sockets form a PACKET_FANOUT hash group: the kernel spreads frames over the queues by
#     flow hash, so UDP ports do not map to queues and the port has no rte_flow. confluxd must
#     fall back to software steering: a queue hands a datagram for the other queue's slot over
#     through that queue's ring. Checks: every dtype x op exact, both queues received frames,
#     hand-overs happened in both directions' sum (out == in, no ring drops), no wrong_queue.
#   multicast_2q: the same with multicast results (multicast = auto): each queue sends its
#     slots' results to the job's group from its own data port, queue 0 also the PROBEs; the
#     workers take group datagrams from any of the JoinAck's ports.
# (af_xdp cannot be used here: with 2 queues on a veth the DPDK 22.11 PMD refuses to start,
# as it accepts at most the interface's "combined" channel count and veth reports only
# separate rx/tx channels; one queue fails its xsk socket setup with confluxd's mbuf pools.
# See deploy/dpdk.md.)
#
# Layout and the kernel's part: veth_lib.sh.
set -u
scenario=$1 confluxd=$2 worker=$3
case $scenario in
  software_steering_2q) queues=2 ;;
  multicast_2q) queues=2 ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
AGG_IP=10.78.0.1 WRK_IP=10.78.0.2 CTL=7470 DATA=7471 MET=9470 VETH_QUEUES=$queues
. "$(dirname "$0")/veth_lib.sh"
veth_setup

# The main lcore plus one EAL lcore per queue, all floating over the CPUs this machine has
# (2 here, shared with other jobs): the queues still run on EAL lcores, not unpinned threads,
# and the idle sleep keeps shared cores usable.
cpus="(0-$(($(nproc) - 1)))"
lcores="--lcores 0@$cpus"
for q in $(seq $queues); do lcores="$lcores,$q@$cpus"; done
payload=8192
vargs="net_af_packet0,iface=$VD,framesz=9216,blocksz=36864,framecnt=512,qpairs=$queues"
extra=()
[ $scenario = multicast_2q ] && extra=(--multicast-range 239.78.0.0/26)
eal="$lcores --no-huge -m 512 --no-pci --file-prefix=cfx$id --no-telemetry --log-level=*:warning"
ip netns exec $A "$confluxd" --listen $AGG_IP --control-port $CTL --data-port $DATA \
    --metrics-port $MET --threads $queues --dataplane dpdk --dpdk-eal-args "$eal --vdev=$vargs" \
    --dpdk-idle-sleep-us 50 --max-payload-bytes $payload --ready-file "$tmp/ready" \
    "${extra[@]}" --log-level info >"$tmp/confluxd.log" 2>&1 &
daemon_pid=$!
wait_ready 150

start_s=$(date +%s)
run_job 21 3 --payload $payload --dtype all --op all --count 1,1000,70000 --iters 2 --warmup 1 --timeout-s 90 \
    --log-level info || fail "all dtype x op"
if [ $scenario = multicast_2q ]; then
  for r in 0 1 2; do
    grep -q "results by multicast (group 239.78.0.0:$DATA: every rank" "$tmp/w$r.log" \
        || { cat "$tmp/w$r.log"; fail "rank $r: results not by multicast"; }
  done
  for q in 0 1; do  # the group's results left by both queues (their own data ports)
    sent=$(metric conflux_dataplane_packets_out_total "thread=\"$q\"")
    [ "$sent" -gt 0 ] || fail "queue $q sent no result"
  done
fi
if [ $queues = 2 ]; then
  # Every worker process is a new UDP flow per data port: more jobs make it (all but) certain
  # that the flow hash puts some flows on the queue that does not own their slots.
  for key in 22 23 24; do
    run_job $key 2 --payload $payload --dtype float,int32,bf16 --op sum,max --count 5000 --iters 1 --warmup 0 \
        --timeout-s 60 || fail "job $key"
  done
  steer=$(metric conflux_dpdk_software_steering)
  [ "$steer" = 1 ] || fail "software steering is not on (conflux_dpdk_software_steering $steer)"
  grep -q "software steering" "$tmp/confluxd.log" || fail "no software-steering log line"
  q0=$(metric conflux_dpdk_frames_in_total 'thread="0"')
  q1=$(metric conflux_dpdk_frames_in_total 'thread="1"')
  out=$(metric conflux_dpdk_handoff_out_total)
  in=$(metric conflux_dpdk_handoff_in_total)
  drops=$(metric conflux_dpdk_handoff_drops_total)
  wrong=$(metric conflux_dataplane_drops_total 'reason="wrong_queue"')
  echo "frames_in q0=$q0 q1=$q1; handed over out=$out in=$in drops=$drops; wrong_queue=$wrong"
  [ "$q0" -gt 0 ] && [ "$q1" -gt 0 ] || fail "one queue received nothing (q0=$q0 q1=$q1)"
  [ "$out" -gt 0 ] || fail "no datagram was handed over"
  [ "$out" = "$in" ] || fail "handed over $out, taken $in"
  [ "$drops" = 0 ] || fail "$drops hand-overs dropped (ring full)"
  [ "$wrong" = 0 ] || fail "$wrong wrong_queue drops with software steering"
  for q in 0 1; do
    s=$(metric conflux_dataplane_slots_completed_total "thread=\"$q\"")
    [ "$s" -gt 0 ] || fail "queue $q completed no slot"
  done
fi
slots=$(metric conflux_dataplane_slots_completed_total)
[ "$slots" -gt 0 ] || fail "no slot completed"
echo "ok: $scenario: every dtype x op exact, $slots slots, $(($(date +%s) - start_s)) s of jobs"

stop_daemon
exit 0
