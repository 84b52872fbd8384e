#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl-tests through Conflux: 4 MPI ranks on one GPU as 4 "nodes" (distinct NCCL_HOSTID), as
# gpu_validate.sh does. Builds nccl-tests (MPI=1) from a source tree you provide, starts a
# local confluxd and runs all_reduce_perf (-c 1: every result checked) in three
# configurations: Conflux CollNet, Conflux's p2p net with CollNet off (NCCL's ring), NCCL's
# Socket net; then reduce_scatter_perf and all_gather_perf with CollNet on.
#   bench/gpu/nccl_tests.sh <nccl-tests source> [max_bytes=256M] [iters=20]
# Environment as gpu_validate.sh (CONFLUX_GPU_PREBUILT, CONFLUX_GPU_MPS, NCCL_LIB_DIR), and
# MPI_HOME (default /usr/lib/x86_64-linux-gnu/openmpi), NVCC_GENCODE (default: sm_90),
# CONFLUXD_ARGS (extra confluxd options, e.g. "--threads 4").
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 1 ]] || { echo "usage: $0 <nccl-tests source> [max_bytes] [iters]" >&2; exit 2; }
SRC=$(realpath "$1")
MAX=${2:-256M}
ITERS=${3:-20}
source bench/gpu/common.sh
gpu_setup
work=$(mktemp -d)
gpu_start_mps "$work"
PAYLOAD=${CONFLUX_PAYLOAD_BYTES:-61440}  # loopback's MTU is 64 KiB, as in gpu_validate.sh
# shellcheck disable=SC2086  # CONFLUXD_ARGS is a list of options
gpu_start_confluxd "$work" --max-payload-bytes "$PAYLOAD" ${CONFLUXD_ARGS:-}
trap 'kill $DAEMON 2>/dev/null; gpu_stop_mps; rm -rf "$work"' EXIT

# nccl-tests wants NCCL_HOME/include/nccl.h and NCCL_HOME/lib/libnccl.so.
mkdir -p "$work/nccl/lib"
ln -s "$(realpath "$NCCL_INC_DIR")" "$work/nccl/include"
ln -s "$(realpath "$NCCL_LIB_DIR")/libnccl.so.2" "$work/nccl/lib/libnccl.so"
make -s -C "$SRC/src" -j"$(nproc)" MPI=1 MPI_HOME="${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}" \
  NCCL_HOME="$work/nccl" BUILDDIR="$work/tests" CUDA_HOME="$CUDA" \
  NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" >"$work/make.log" 2>&1 ||
  { tail -30 "$work/make.log"; exit 1; }

failed=0
perf() {  # perf <label> <test> <VAR=value...>
  local label=$1 test=$2; shift 2
  echo "## $label: $test"
  local xs=(-x LD_LIBRARY_PATH -x NCCL_TESTS_DEVICE=0) kv  # every rank on GPU 0
  [[ -n ${CUDA_MPS_PIPE_DIRECTORY:-} ]] && xs+=(-x CUDA_MPS_PIPE_DIRECTORY)
  for kv in "$@"; do xs+=(-x "$kv"); done
  if ! timeout "${CONFLUX_GPU_TIMEOUT:-300}" mpirun --allow-run-as-root --oversubscribe -np 4 \
      --bind-to none "${xs[@]}" \
      sh -c 'NCCL_HOSTID=conflux-node$OMPI_COMM_WORLD_RANK exec "$0" "$@"' \
      "$work/tests/$test" -b 4 -e "$MAX" -f 4 -g 1 -c 1 -n "$ITERS" -w 2 >"$work/out" 2>&1; then
    failed=1
  fi
  grep -v "^#  *Rank\|^# *Using devices\|NCCL INFO" "$work/out" | tail -25
  grep -q "Out of bounds values : 0 OK" "$work/out" || { echo "(not OK)"; failed=1; }
}
collnet=(NCCL_NET_PLUGIN=conflux NCCL_NET=Conflux NCCL_COLLNET_ENABLE=1
  CONFLUX_AGGREGATORS="$AGG" CONFLUX_REQUIRE_AGGREGATORS=1 CONFLUX_PAYLOAD_BYTES="$PAYLOAD")
before=$(gpu_bytes_in)
perf "Conflux CollNet" all_reduce_perf "${collnet[@]}" NCCL_ALGO=allreduce:collnetchain
echo "confluxd received $(( ($(gpu_bytes_in) - before) / 1000000 )) MB during that run"
perf "Conflux net, CollNet off" all_reduce_perf NCCL_NET_PLUGIN=conflux NCCL_NET=Conflux \
  NCCL_COLLNET_ENABLE=0
perf "NCCL Socket net" all_reduce_perf NCCL_NET=Socket NCCL_NET_PLUGIN=none
for t in reduce_scatter_perf all_gather_perf; do
  before=$(gpu_bytes_in)
  perf "Conflux, CollNet on (NCCL picks the algorithm)" "$t" "${collnet[@]}"
  echo "confluxd received $(( ($(gpu_bytes_in) - before) / 1000000 )) MB during that run"
done
exit $failed
