#!/usr/bin/env bash
# GPU validation: 4 ranks on one GPU as 4 "nodes" (distinct NCCL_HOSTID), every byte through
# the network plugin. Builds the plugin, confluxd and nccl_allreduce_check, then runs three
# configurations and prints algbw for each:
#   1. Conflux CollNet      NCCL_NET_PLUGIN=conflux NCCL_COLLNET_ENABLE=1 (through confluxd)
#   2. Conflux, no CollNet  NCCL_NET_PLUGIN=conflux NCCL_COLLNET_ENABLE=0 (ring over our net)
#   3. NCCL's Socket net    no plugin, NCCL_NET=Socket
#   bench/gpu/gpu_validate.sh [max_bytes=256M] [iters=20]
# nccl-tests the same way: build it with `make MPI=1 NCCL_HOME=/usr/local/cuda`, then e.g.
#   mpirun -np 4 -x NCCL_NET_PLUGIN=conflux -x NCCL_COLLNET_ENABLE=1 -x CONFLUX_AGGREGATORS \
#     -x NCCL_TESTS_DEVICE=0 sh -c 'NCCL_HOSTID=node$OMPI_COMM_WORLD_RANK exec \
#     ./build/all_reduce_perf -b 4 -e 256M -f 4 -g 1'
# and reduce_scatter_perf / all_gather_perf with the same arguments (CollNetDirect's
# ireducescatter / iallgather, where NCCL's tuning picks CollNet for them).
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX=${1:-256M}
ITERS=${2:-20}
to_bytes() { numfmt --from=iec "$1"; }
B=${CONFLUX_BUILD_DIR:-build}
CONFLUX_BUILD_TARGETS="confluxd nccl-net-conflux" scripts/build.sh
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$B/gpu"
"$CUDA/bin/nvcc" -O2 -std=c++17 -o "$B/gpu/nccl_allreduce_check" bench/gpu/nccl_allreduce_check.cu \
  -I"$CUDA/include" -L"$CUDA/lib64" -L"$CUDA/lib" -lnccl
export LD_LIBRARY_PATH="$PWD/$B/nccl_plugin:$CUDA/lib64:$CUDA/lib:${LD_LIBRARY_PATH:-}"

work=$(mktemp -d)
"$B/aggregator/confluxd" --listen 127.0.0.1 --control-port 0 --data-port 0 --metrics-port 0 \
  --ready-file "$work/ready" --log-level warn &
daemon=$!
trap 'kill $daemon 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do [[ -s $work/ready ]] && break; sleep 0.05; done
agg=127.0.0.1:$(sed -n 's/^control_port=//p' "$work/ready")

run() {  # run <label> <env...>
  local label=$1; shift
  local port=$((20000 + RANDOM % 20000))
  echo "## $label"
  for r in 0 1 2 3; do
    env "$@" NCCL_COMM_ID=127.0.0.1:$port NCCL_HOSTID=conflux-node$r CONFLUX_GPU_RANK=$r \
      CONFLUX_GPU_NRANKS=4 "$B/gpu/nccl_allreduce_check" 4 "$(to_bytes "$MAX")" "$ITERS" \
      >"$work/rank$r.out" 2>&1 &
  done
  wait
  cat "$work/rank0.out"
  for r in 1 2 3; do grep -q "error\|WRONG" "$work/rank$r.out" && cat "$work/rank$r.out"; done || true
}
run "Conflux CollNet (1 confluxd)" NCCL_NET_PLUGIN=conflux NCCL_NET=Conflux NCCL_COLLNET_ENABLE=1 \
  NCCL_ALGO=allreduce:collnetchain CONFLUX_AGGREGATORS=$agg CONFLUX_REQUIRE_AGGREGATORS=1
run "Conflux net, CollNet off (ring over the plugin's p2p net)" NCCL_NET_PLUGIN=conflux \
  NCCL_NET=Conflux NCCL_COLLNET_ENABLE=0
run "NCCL Socket net (no plugin)" NCCL_NET=Socket NCCL_NET_PLUGIN=none
