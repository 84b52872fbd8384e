#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# DPDK dataplane vs kernel-UDP dataplane, same veth pair, same workers, one run (root).
#   dpdk_vs_udp.sh CONFLUXD WORKER [RANKS] [SIZE] [ITERS]
# For each backend: confluxd (1 queue) in namespace A, RANKS conflux-allreduce-worker ranks
# in namespace W doing float-sum AllReduces of SIZE bytes. Prints per lcore/thread: packets/s
# and Gbit/s received (contributions) and sent (results), and CPU cycles per received packet:
#   busy   DPDK: TSC cycles of poll iterations that had frames (conflux_dpdk_busy_cycles_total)
#   cpu    both: the daemon process's CPU time (utime+stime) x TSC Hz; a busy-polling lcore
#          is always 100% busy, so for DPDK this is wall time, not work.
# See bench/dpdk/README.md for what af_packet limits here.
set -u
confluxd=$1 worker=$2 ranks=${3:-2} size=${4:-16M} iters=${5:-20}
[ "$(id -u)" = 0 ] || { echo "needs root"; exit 77; }
id=$$ A=cfxba$$ W=cfxbw$$ VD=cfxbd$$ VK=cfxbk$$
AGG_IP=10.78.0.1 WRK_IP=10.78.0.2 CTL=7470 DATA=7471 MET=9470
tmp=$(mktemp -d) pid=
cleanup() {
  [ -n "$pid" ] && kill $pid 2>/dev/null && wait $pid 2>/dev/null
  ip netns del $A 2>/dev/null; ip netns del $W 2>/dev/null; rm -rf "$tmp" /var/run/dpdk/cfxb$id
}
trap cleanup EXIT
trap "exit 1" INT TERM
ina() { ip netns exec $A "$@"; }
inw() { ip netns exec $W "$@"; }
ip netns add $A; ip netns add $W
ip link add $VD type veth peer name $VK
ip link set $VD netns $A; ip link set $VK netns $W
ina ip link set lo up; inw ip link set lo up
ina ip link set $VD mtu 9000 up; inw ip link set $VK mtu 9000 up
ina ip addr add $AGG_IP/24 dev $VD; inw ip addr add $WRK_IP/24 dev $VK
inw ethtool -K $VK tx off >/dev/null 2>&1
tck=$(getconf CLK_TCK)

metric() {  # metric TEXT NAME
  echo "$1" | awk -v n="$2" '$1 ~ "^"n"({|$)" { s += $2 } END { printf "%.0f", s }'
}
cpu_ticks() { awk '{ print $14 + $15 }' /proc/$1/stat; }

run_backend() {
  local b=$1 extra=()
  if [ $b = dpdk ]; then
    ina sysctl -qw net.ipv4.conf.$VD.arp_ignore=8
    ina nft -f - <<NFT
table inet cfx {
  chain input { type filter hook input priority 0; udp dport $DATA drop; }
}
NFT
    local lc="-l 0"; [ "$(nproc)" -ge 2 ] && lc="-l 0,1"
    extra=(--dataplane dpdk --dpdk-idle-sleep-us 0 --dpdk-eal-args
           "$lc --no-huge -m 512 --no-pci --file-prefix=cfxb$id --no-telemetry --log-level=*:warning --vdev=net_af_packet0,iface=$VD,framesz=9216,blocksz=36864,framecnt=1024")
  else
    ina sysctl -qw net.ipv4.conf.$VD.arp_ignore=0
    ina nft delete table inet cfx 2>/dev/null
    extra=(--dataplane udp)
  fi
  rm -f "$tmp/ready"
  ip netns exec $A "$confluxd" --listen $AGG_IP --control-port $CTL --data-port $DATA --metrics-port $MET \
      --threads 1 --ready-file "$tmp/ready" --log-level warn "${extra[@]}" >"$tmp/$b.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do [ -f "$tmp/ready" ] && break; sleep 0.1; done
  [ -f "$tmp/ready" ] || { echo "$b: confluxd did not start"; cat "$tmp/$b.log"; return 1; }
  local m0 m1 c0 c1 t0 t1 r rc=0 pids=()
  m0=$(inw curl -s http://$AGG_IP:$MET/metrics); c0=$(cpu_ticks $pid); t0=$(date +%s.%N)
  for r in $(seq 0 $((ranks - 1))); do
    inw "$worker" --aggregators $AGG_IP:$CTL --nranks $ranks --rank $r --bind $WRK_IP \
        --job-key 77 --dtype float --op sum --sizes $size --iters $iters --warmup 2 \
        --no-check --timeout-s 120 >"$tmp/w$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p || rc=1; done
  t1=$(date +%s.%N); c1=$(cpu_ticks $pid); m1=$(inw curl -s http://$AGG_IP:$MET/metrics)
  kill $pid; wait $pid 2>/dev/null; pid=
  [ $rc = 0 ] || { echo "$b: workers failed"; tail -3 "$tmp"/w*.log; return 1; }
  local pin bin pout bout busy frames hz
  pin=$(( $(metric "$m1" conflux_dataplane_packets_in_total) - $(metric "$m0" conflux_dataplane_packets_in_total) ))
  bin=$(( $(metric "$m1" conflux_dataplane_bytes_in_total) - $(metric "$m0" conflux_dataplane_bytes_in_total) ))
  pout=$(( $(metric "$m1" conflux_dataplane_packets_out_total) - $(metric "$m0" conflux_dataplane_packets_out_total) ))
  bout=$(( $(metric "$m1" conflux_dataplane_bytes_out_total) - $(metric "$m0" conflux_dataplane_bytes_out_total) ))
  if [ $b = dpdk ]; then
    busy=$(( $(metric "$m1" conflux_dpdk_busy_cycles_total) - $(metric "$m0" conflux_dpdk_busy_cycles_total) ))
    frames=$(( $(metric "$m1" conflux_dpdk_frames_in_total) - $(metric "$m0" conflux_dpdk_frames_in_total) ))
    hz=$(metric "$m1" conflux_dpdk_tsc_hz); echo "$hz" >"$tmp/hz"
  else
    busy=; frames=; hz=$(cat "$tmp/hz" 2>/dev/null || echo 0)
  fi
  awk -v b=$b -v pin=$pin -v bin=$bin -v pout=$pout -v bout=$bout -v t0=$t0 -v t1=$t1 \
      -v c=$((c1 - c0)) -v tck=$tck -v hz=$hz -v busy="$busy" -v frames="$frames" 'BEGIN {
    t = t1 - t0; cpu = c / tck
    printf "%-5s %10d %7.2f %9.3f %8.3f %9.3f %8.3f %10s %10.0f %6.0f%%\n", b, pin, t,
      pin / t / 1e6, bin * 8 / t / 1e9, pout / t / 1e6, bout * 8 / t / 1e9,
      (busy == "" ? "-" : sprintf("%.0f", busy / frames)), cpu * hz / pin, 100 * cpu / t }'
}

echo "# $ranks ranks, float sum, $size per AllReduce, $iters iterations; 1 dataplane queue"
echo "# tsc cycles/packet: busy = DPDK poll iterations with work; cpu = daemon CPU time (all threads)"
printf "%-5s %10s %7s %9s %8s %9s %8s %10s %10s %7s\n" backend pkts_in secs Mpps_in Gbps_in \
  Mpps_out Gbps_out busy_cyc cpu_cyc cpu
run_backend dpdk   # first: it records the TSC frequency used for both
run_backend udp
