#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU validation: 4 ranks on one GPU as 4 "nodes" (distinct NCCL_HOSTID), every byte through
# the network plugin. Builds the plugin, confluxd and nccl_allreduce_check, then runs seven
# configurations, checks every element and prints algbw for each:
#   1. Conflux CollNet      NCCL_NET_PLUGIN=conflux NCCL_COLLNET_ENABLE=1 (through confluxd)
#   2. Conflux hybrid       the same with half of every AllReduce over the workers' ring
#   3. Conflux failover     striped over two confluxd, one killed mid-run
#   4. Conflux tree         depth 2: ranks 0-1 under leaf confluxd A, 2-3 under leaf B, one root
#   5. Conflux, no CollNet  NCCL_NET_PLUGIN=conflux NCCL_COLLNET_ENABLE=0 (ring over our net)
#   6. NCCL's Socket net    no plugin, NCCL_NET=Socket
#   7. Conflux CollNet from device memory: the NIC's gdr bit 1 (a delegate net that claims
#      HOST|CUDA|DMABUF, NCCL_NET_GDR_LEVEL=SYS), so NCCL hands CollNet device buffers and the
#      plugin stages them itself; checked in rank 0's log ("device memory staged"). Compare
#      with 1, where NCCL stages through mapped host memory (gdr 0).
#   bench/gpu/gpu_validate.sh [max_bytes=256M] [iters=20]
# Environment: CONFLUX_GPU_PREBUILT=<folder> runs what bench/gpu/pack.sh packed instead of
# building; CONFLUX_GPU_LOGDIR keeps every rank's log (NCCL_DEBUG=INFO unless set);
# CONFLUX_GPU_TIMEOUT bounds each configuration (seconds, default 300); NCCL_LIB_DIR names
# where libnccl.so.2 is (default: CUDA's lib folder, else Python's nvidia-nccl package);
# CONFLUX_GPU_MPS=1 runs the ranks under an MPS daemon of the script's own (without MPS the
# four processes time-slice the GPU and even a 4 B AllReduce takes ~7 ms in every
# configuration, so only MPS timings say anything about the network path); CONFLUXD_ARGS
# adds confluxd options (e.g. "--threads 8"); CONFLUX_GPU_CONFIGS runs only the listed
# configurations (comma-separated tags: collnet,hybrid,failover,tree,p2p,socket,gdr); CONFLUX_GPU_MIN is
# the smallest size (default 4); CONFLUX_GPU_TOP=S records `top -H` S seconds into each
# configuration (the busiest threads: the plugin's are cfx-engine, cfx-collnet, cfx-ring,
# cfx-net<N>; confluxd's cfx-udp<N> and cfx-control) and prints them after it.
# bench/gpu/nccl_tests.sh runs nccl-tests' all_reduce_perf etc. the same way (through mpirun).
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX=${1:-256M}
ITERS=${2:-20}
source bench/gpu/common.sh
gpu_setup
work=$(mktemp -d)
LOGS=${CONFLUX_GPU_LOGDIR:-$work}  # every rank's output (NCCL_DEBUG=INFO) is kept there
mkdir -p "$LOGS"
gpu_start_mps "$work"
# Everything is on loopback (MTU 64 KiB): the largest payload per datagram, as scripts/demo.sh.
PAYLOAD=${CONFLUX_PAYLOAD_BYTES:-61440}
# shellcheck disable=SC2086  # CONFLUXD_ARGS is a list of options
gpu_start_confluxd "$work" --max-payload-bytes "$PAYLOAD" ${CONFLUXD_ARGS:-}
AGG1=$AGG METRICS1=$METRICS DAEMON1=$DAEMON
mkdir -p "$work/2"
# shellcheck disable=SC2086
gpu_start_confluxd "$work/2" --max-payload-bytes "$PAYLOAD" ${CONFLUXD_ARGS:-}
AGG2=$AGG DAEMON2=$DAEMON METRICS=$METRICS1
LEAF_PIDS=() LEAF_AGGS=() LEAF_METRICS=()
trap 'kill $DAEMON1 $DAEMON2 "${LEAF_PIDS[@]}" 2>/dev/null; gpu_stop_mps; rm -rf "$work"' EXIT

failed=0
selected() { [[ ,${CONFLUX_GPU_CONFIGS:-collnet,hybrid,failover,tree,p2p,socket,gdr}, == *,$1,* ]]; }
RANK_AGGS=()  # when set, rank r names RANK_AGGS[r] as its aggregators (after the run's env)
run() {  # run <label> <tag> <env...>
  local label=$1 tag=$2; shift 2
  local port pids=() r top=
  selected "$tag" || return 0
  port=$(gpu_free_port)
  echo "## $label"
  for r in 0 1 2 3; do
    timeout "${CONFLUX_GPU_TIMEOUT:-300}" env "$@" NCCL_DEBUG=${NCCL_DEBUG:-INFO} \
      NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,COLL,NET} NCCL_COMM_ID=127.0.0.1:$port \
      NCCL_HOSTID=conflux-node$r CONFLUX_GPU_RANK=$r CONFLUX_GPU_NRANKS=4 \
      ${RANK_AGGS[r]:+CONFLUX_AGGREGATORS=${RANK_AGGS[r]}} \
      "$CHECK" "$(to_bytes "${CONFLUX_GPU_MIN:-4}")" "$(to_bytes "$MAX")" "$ITERS" \
      >"$LOGS/$tag.rank$r.log" 2>&1 &
    pids+=($!)
  done
  if [[ -n ${CONFLUX_GPU_TOP:-} ]]; then
    (sleep "$CONFLUX_GPU_TOP"; top -H -b -n 1 -w 200 >"$LOGS/$tag.top") &
    top=$!
  fi
  for r in 0 1 2 3; do
    if ! wait "${pids[$r]}"; then
      echo "rank $r FAILED ($LOGS/$tag.rank$r.log):"
      grep -v "NCCL INFO" "$LOGS/$tag.rank$r.log" | tail -20
      failed=1
    fi
  done
  if [[ -n $top ]]; then
    wait "$top" || true
    echo "  busiest threads after ${CONFLUX_GPU_TOP} s (top -H):"
    awk '/^ *PID/ {on = 1} on && n++ < 25 {print "  " $0}' "$LOGS/$tag.top"
  fi
  grep -v "NCCL INFO" "$LOGS/$tag.rank0.log" | grep -v "^ *[A-Za-z]* |\|^$" || true
  grep -h "NCCL INFO Using network\|NCCL version\|CollNet failover\|re-stripe\|closing:" \
    "$LOGS/$tag.rank0.log" | sed 's/^.*NCCL INFO /  /' | sort -u | head -8 || true
}
collnet=(NCCL_NET_PLUGIN=conflux NCCL_NET=Conflux NCCL_COLLNET_ENABLE=1
  NCCL_ALGO=allreduce:collnetchain CONFLUX_REQUIRE_AGGREGATORS=1 CONFLUX_PAYLOAD_BYTES=$PAYLOAD)
before=$(gpu_bytes_in) gather_before=$(gpu_gather)
run "Conflux CollNet (1 confluxd)" collnet "${collnet[@]}" CONFLUX_AGGREGATORS=$AGG1
after=$(gpu_bytes_in) gather_after=$(gpu_gather)
if selected collnet; then
  echo "confluxd received $(python3 -c "print(f'{($after - $before) / 1e9:.3f}')") GB during the CollNet run"
  # How long the slowest rank kept the others waiting, per slot generation (rank skew).
  python3 -c "
s0, g0 = map(float, '$gather_before'.split()); s1, g1 = map(float, '$gather_after'.split())
n = s1 - s0
print(f'confluxd: {n:.0f} slot generations, {(g1 - g0) / n * 1e6:.1f} us on average from the first to the last contribution' if n else 'confluxd: no slot completed')"
fi
run "Conflux CollNet, half of every AllReduce over the ring (CONFLUX_RING_FRACTION=0.5)" hybrid \
  "${collnet[@]}" CONFLUX_AGGREGATORS=$AGG1 CONFLUX_RING_FRACTION=0.5
# Failover under real NCCL: the ranks stripe over two aggregators; one is killed mid-run and
# every result must still be right (its stripes go to the survivor or over the ring).
if selected failover; then
  (sleep "${CONFLUX_GPU_KILL_AFTER_S:-2}"; kill -9 "$DAEMON2"; echo "(confluxd $AGG2 killed)") &
  killer=$!
fi
run "Conflux CollNet over 2 confluxd, one killed after ${CONFLUX_GPU_KILL_AFTER_S:-2} s" failover \
  "${collnet[@]}" CONFLUX_AGGREGATORS=$AGG1,$AGG2 CONFLUX_AGGREGATOR_TIMEOUT_MS=500
[[ -z ${killer:-} ]] || wait "$killer"  # (a bare wait would wait for confluxd too)
# A reduction tree of depth 2 under real NCCL: ranks 0-1 join leaf A, ranks 2-3 leaf B, both
# leaves join the first confluxd as their parent (a root needs no configuration).
if selected tree; then
  for leaf in a b; do
    mkdir -p "$work/$leaf"
    # shellcheck disable=SC2086
    gpu_start_confluxd "$work/$leaf" --max-payload-bytes "$PAYLOAD" --parent "$AGG1" \
      ${CONFLUXD_ARGS:-}
    LEAF_PIDS+=("$DAEMON") LEAF_AGGS+=("$AGG") LEAF_METRICS+=("$METRICS")
  done
  RANK_AGGS=("${LEAF_AGGS[0]}" "${LEAF_AGGS[0]}" "${LEAF_AGGS[1]}" "${LEAF_AGGS[1]}")
  root_before=$(METRICS=$METRICS1 gpu_bytes_in)
fi
run "Conflux CollNet through a tree: 2 leaf confluxd under 1 root" tree "${collnet[@]}"
if selected tree; then
  RANK_AGGS=()
  echo "bytes received: root $(( ($(METRICS=$METRICS1 gpu_bytes_in) - root_before) / 1000000 )) MB," \
    "leaf A $(( $(METRICS=${LEAF_METRICS[0]} gpu_bytes_in) / 1000000 )) MB," \
    "leaf B $(( $(METRICS=${LEAF_METRICS[1]} gpu_bytes_in) / 1000000 )) MB"
fi
run "Conflux net, CollNet off (ring over the plugin's p2p net)" p2p NCCL_NET_PLUGIN=conflux \
  NCCL_NET=Conflux NCCL_COLLNET_ENABLE=0
run "NCCL Socket net (no plugin)" socket NCCL_NET=Socket NCCL_NET_PLUGIN=none
# gdr 1 by NCCL's own rule: CollNet mirrors the net's devices, and the delegate claims GPUDirect.
# NCCL_ALGO keeps every collective on CollNetChain (each rank is a node of its own, so no ring
# connection is made: the test delegate, Conflux's TCP net renamed, reads host memory only).
run "Conflux CollNet from device memory (NIC gdr 1: delegate claims HOST|CUDA|DMABUF)" gdr \
  "${collnet[@]}" CONFLUX_AGGREGATORS=$AGG1 CONFLUX_NET_DELEGATE="$DELEGATE" \
  TEST_DELEGATE_PTR_SUPPORT=7 NCCL_NET_GDR_LEVEL=SYS
if selected gdr && ! grep -q "device memory staged through" "$LOGS/gdr.rank0.log"; then
  echo "gdr: FAILED: CollNet never registered device memory (NCCL did not hand it any)"
  failed=1
fi
exit $failed
