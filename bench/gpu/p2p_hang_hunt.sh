#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hunts the hang of NCCL's ring over Conflux's p2p net under nccl-tests (bench/gpu/README.md):
# runs all_reduce_perf (CollNet off, 4 ranks on one GPU as 4 "nodes") again and
# again in each of several variants, and on a hang saves what the ranks were doing.
#   bench/gpu/p2p_hang_hunt.sh <nccl-tests source> [runs per variant=5] [variant...]
# A variant is a space-separated list of VAR=value (quote it) over the base settings
# (NCCL_NET_PLUGIN=conflux NCCL_NET=Conflux NCCL_COLLNET_ENABLE=0); "default" adds none.
# Default variants: default; NCCL_PROTO=Simple; NCCL's own Socket net forced to LL (the hang
# came at 128 KiB under LL, maybe because the measured latency the plugin now reports moved
# NCCL's LL range: does LL over a host-memory net hang without Conflux too?); NCCL_ALGO=Ring;
# caller progress off.
# A run that prints nothing new for CONFLUX_HUNT_STALL_S seconds (default 15) is hung: every
# thread's state (comm, state, wchan, syscall) goes to <logdir>/hangN.threads and the whole
# output, with the plugin's stall warnings (CONFLUX_NET_STALL_WARN_S=5), to <logdir>/hangN.log.
# CONFLUX_HUNT_LOGDIR (default: a temporary folder, printed), CONFLUX_HUNT_ARGS (default
# "-b 4 -e 1M -f 4 -w 2 -n 5"), CONFLUX_HUNT_BUDGET_S (stop starting runs after that many
# seconds, default 400). Environment otherwise as nccl_tests.sh (CONFLUX_GPU_PREBUILT,
# CONFLUX_GPU_MPS, NCCL_LIB_DIR, MPI_HOME, NVCC_GENCODE). Prints one line per variant:
# runs, passed, hung, failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
[[ $# -ge 1 ]] || { echo "usage: $0 <nccl-tests source> [runs] [variant...]" >&2; exit 2; }
SRC=$(realpath "$1")
RUNS=${2:-5}
shift $(( $# >= 2 ? 2 : 1 ))
VARIANTS=("$@")
((${#VARIANTS[@]})) || VARIANTS=(default NCCL_PROTO=Simple
  "NCCL_NET=Socket NCCL_NET_PLUGIN=none NCCL_PROTO=LL" NCCL_ALGO=Ring
  "CONFLUX_NET_CALLER_PROGRESS=0 CONFLUX_INLINE_BYTES=0")
STALL=${CONFLUX_HUNT_STALL_S:-15}
BUDGET=${CONFLUX_HUNT_BUDGET_S:-400}
read -r -a ARGS <<<"${CONFLUX_HUNT_ARGS:--b 4 -e 1M -f 4 -w 2 -n 5}"
source bench/gpu/common.sh
gpu_setup || exit 1
work=$(mktemp -d)
LOGS=${CONFLUX_HUNT_LOGDIR:-$work/logs}
mkdir -p "$LOGS" "$work/nccl/lib"
echo "logs: $LOGS"
gpu_start_mps "$work"
trap 'pkill -9 -f "$work/tests/all_reduce_perf" 2>/dev/null; gpu_stop_mps; [[ $LOGS == $work/* ]] || rm -rf "$work"' EXIT
ln -s "$(realpath "$NCCL_INC_DIR")" "$work/nccl/include"
ln -s "$(realpath "$NCCL_LIB_DIR")/libnccl.so.2" "$work/nccl/lib/libnccl.so"
make -s -C "$SRC/src" -j"$(nproc)" MPI=1 MPI_HOME="${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}" \
  NCCL_HOME="$work/nccl" BUILDDIR="$work/tests" CUDA_HOME="$CUDA" \
  NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" \
  "$work/tests/all_reduce_perf" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; }

# Saves every thread's state of every rank of a hung run.
thread_states() {
  local p t
  for p in $(pgrep -f "$work/tests/all_reduce_perf"); do
    echo "=== pid $p $(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep '^OMPI_COMM_WORLD_RANK=')"
    for t in /proc/"$p"/task/*; do
      echo "$(cat "$t/comm") state=$(awk '{print $3}' "$t/stat") wchan=$(cat "$t/wchan")" \
        "syscall=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
    done
  done
}

hangs=0 failures=0
summary=()
for v in "${VARIANTS[@]}"; do
  env_v=()
  [[ $v == default ]] || read -r -a env_v <<<"$v"
  ok=0 hung=0 bad=0 n=0
  for ((i = 1; i <= RUNS; i++)); do
    ((SECONDS < BUDGET)) || break
    # The base settings, then the variant's over them (each variable passed once).
    declare -A kvs=([NCCL_NET_PLUGIN]=conflux [NCCL_NET]=Conflux [NCCL_COLLNET_ENABLE]=0
      [CONFLUX_NET_STALL_WARN_S]=5 [NCCL_DEBUG]="${NCCL_DEBUG:-INFO}"
      [NCCL_DEBUG_SUBSYS]="${NCCL_DEBUG_SUBSYS:-INIT,NET,TUNING}")
    for kv in "${env_v[@]}"; do kvs[${kv%%=*}]=${kv#*=}; done
    xs=(-x LD_LIBRARY_PATH -x NCCL_TESTS_DEVICE=0)
    [[ -n ${CUDA_MPS_PIPE_DIRECTORY:-} ]] && xs+=(-x CUDA_MPS_PIPE_DIRECTORY)
    for k in "${!kvs[@]}"; do xs+=(-x "$k=${kvs[$k]}"); done
    unset kvs
    out=$work/run.log
    # shellcheck disable=SC2016  # $OMPI_COMM_WORLD_RANK is the rank's, expanded by sh -c
    mpirun --allow-run-as-root --oversubscribe -np 4 --bind-to none --tag-output "${xs[@]}" \
      sh -c 'NCCL_HOSTID=conflux-node$OMPI_COMM_WORLD_RANK exec "$0" "$@"' \
      "$work/tests/all_reduce_perf" -g 1 -c 1 "${ARGS[@]}" >"$out" 2>&1 &
    m=$! last=0 quiet=0
    while kill -0 "$m" 2>/dev/null && ((quiet < STALL)); do
      sleep 1
      size=$(stat -c %s "$out")
      if ((size == last)); then quiet=$((quiet + 1)); else quiet=0 last=$size; fi
    done
    n=$((n + 1))
    if kill -0 "$m" 2>/dev/null; then
      hung=$((hung + 1)) hangs=$((hangs + 1))
      thread_states >"$LOGS/hang$hangs.threads"
      { echo "# variant: $v"; cat "$out"; } >"$LOGS/hang$hangs.log"
      echo "[$v] run $i: HUNG (no output for $STALL s): $LOGS/hang$hangs.{log,threads}"
      pkill -9 -f "$work/tests/all_reduce_perf"
      kill -9 "$m" 2>/dev/null
      wait "$m" 2>/dev/null
      # Killed ranks can leave the GPU busy for the next run: a fresh MPS daemon.
      gpu_stop_mps
      sleep 2
      gpu_start_mps "$work" >/dev/null
    elif wait "$m" && grep -q "Out of bounds values : 0 OK" "$out"; then
      ok=$((ok + 1))
      echo "[$v] run $i: ok ($SECONDS s)"
    else
      bad=$((bad + 1))
      cp "$out" "$LOGS/fail-${i}-${v//[^A-Za-z0-9_=]/_}.log"
      echo "[$v] run $i: FAILED: $(grep -v 'NCCL INFO' "$out" | grep -m2 -iE 'fail|error|warn' | tr '\n' ' ')"
    fi
  done
  failures=$((failures + bad))
  summary+=("$(printf '%-55s runs %2d  passed %2d  hung %2d  failed %2d' "$v" "$n" "$ok" "$hung" "$bad")")
done
printf '%s\n' "${summary[@]}"
((hangs == 0 && failures == 0))
