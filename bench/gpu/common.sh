# SPDX-License-Identifier: Apache-2.0
# Sourced by bench/gpu/*.sh: finds or builds the binaries, finds libnccl, starts confluxd.
# After gpu_setup: CONFLUXD, PLUGIN_DIR, CHECK (nccl_allreduce_check), DELEGATE (the test delegate
# net, for the gdr configuration), NCCL_LIB_DIR, NCCL_INC_DIR
# and LD_LIBRARY_PATH (plugin, NCCL, packed libraries) are set.
#   CONFLUX_GPU_PREBUILT=<folder>  use what bench/gpu/pack.sh packed instead of building
#   NCCL_LIB_DIR                   where libnccl.so.2 is (default: CUDA's, else Python's nvidia-nccl)
CUDA=${CUDA_HOME:-/usr/local/cuda}
to_bytes() { numfmt --from=iec "$1"; }

gpu_setup() {
  if [[ -n ${CONFLUX_GPU_PREBUILT:-} ]]; then
    # A GPU node often lacks the build dependencies: pack on a build host, run here.
    local p
    p=$(realpath "$CONFLUX_GPU_PREBUILT")
    CONFLUXD=$p/confluxd CHECK=$p/nccl_allreduce_check PLUGIN_DIR=$p
    DELEGATE=$p/libconflux_test_delegate_v11.so
    local libs=$p/lib
  else
    local b=${CONFLUX_BUILD_DIR:-build}
    CONFLUX_BUILD_TARGETS="confluxd nccl-net-conflux conflux_test_delegate_v11" scripts/build.sh
    mkdir -p "$b/gpu"
    "$CUDA/bin/nvcc" -O2 -std=c++17 -o "$b/gpu/nccl_allreduce_check" \
      bench/gpu/nccl_allreduce_check.cu -I"$CUDA/include" -L"$CUDA/lib64" -L"$CUDA/lib" -lnccl
    CONFLUXD=$PWD/$b/aggregator/confluxd CHECK=$PWD/$b/gpu/nccl_allreduce_check
    PLUGIN_DIR=$PWD/$b/nccl_plugin
    DELEGATE=$PWD/$b/tests/plugin_net/libconflux_test_delegate_v11.so
    local libs=
  fi
  NCCL_LIB_DIR=${NCCL_LIB_DIR:-}
  local d
  if [[ -z $NCCL_LIB_DIR ]]; then
    for d in "$CUDA/lib64" "$CUDA/lib"; do
      [[ -e $d/libnccl.so.2 ]] && NCCL_LIB_DIR=$d && break
    done
  fi
  if [[ -z $NCCL_LIB_DIR ]]; then
    NCCL_LIB_DIR=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' \
      2>/dev/null || true)
  fi
  if [[ ! -e $NCCL_LIB_DIR/libnccl.so.2 ]]; then
    echo "$0: no libnccl.so.2 found (set NCCL_LIB_DIR)" >&2
    return 1
  fi
  NCCL_INC_DIR=$NCCL_LIB_DIR/../include
  [[ -e $NCCL_INC_DIR/nccl.h ]] || NCCL_INC_DIR=$CUDA/include
  export LD_LIBRARY_PATH="$PLUGIN_DIR:$NCCL_LIB_DIR${libs:+:$libs}:${LD_LIBRARY_PATH:-}"
}

# gpu_start_confluxd <workdir> [confluxd options...]: sets AGG (host:control port), METRICS
# and DAEMON (its pid); the caller kills it.
gpu_start_confluxd() {
  local work=$1
  shift
  rm -f "$work/ready"
  "$CONFLUXD" --listen 127.0.0.1 --control-port 0 --data-port 0 --metrics-port 0 \
    --ready-file "$work/ready" --log-level warn "$@" &
  DAEMON=$!
  local _
  for _ in $(seq 1 100); do [[ -s $work/ready ]] && break; sleep 0.05; done
  [[ -s $work/ready ]] || { echo "$0: confluxd did not start" >&2; return 1; }
  AGG=127.0.0.1:$(sed -n 's/^control_port=//p' "$work/ready")
  METRICS=127.0.0.1:$(sed -n 's/^metrics_port=//p' "$work/ready")
}

# Sums over every label set of each named metric family of the aggregator at $METRICS,
# space-separated, in the order asked (whole numbers print without a fraction).
gpu_metric_sums() {
  python3 - "$METRICS" "$@" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=5).read().decode()
def total(name):
    return sum((float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + "{")), 0.0)
print(*(f"{v:.0f}" if v.is_integer() else repr(v) for v in map(total, sys.argv[2:])))
PY
}

# Bytes the aggregator at $METRICS has received so far, over all its dataplane threads.
gpu_bytes_in() { gpu_metric_sums conflux_dataplane_bytes_in_total; }

# "<slot generations completed> <seconds from first to last contribution, summed>" of the
# aggregator at $METRICS so far.
gpu_gather() {
  gpu_metric_sums conflux_dataplane_slots_completed_total conflux_dataplane_gather_seconds_total
}

# With CONFLUX_GPU_MPS=1, starts an MPS control daemon of our own (pipe and log folders under
# <workdir>) so the ranks sharing the one GPU run their kernels side by side: without it the
# GPU time-slices between the processes and every collective takes milliseconds, whatever the
# network does. gpu_stop_mps ends it.
gpu_start_mps() {
  [[ ${CONFLUX_GPU_MPS:-0} == 1 ]] || return 0
  export CUDA_MPS_PIPE_DIRECTORY=$1/mps CUDA_MPS_LOG_DIRECTORY=$1/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  echo "(MPS control daemon started: $CUDA_MPS_PIPE_DIRECTORY)"
}
gpu_stop_mps() {
  [[ -n ${CUDA_MPS_PIPE_DIRECTORY:-} ]] && echo quit | nvidia-cuda-mps-control 2>/dev/null || true
}

# gpu_free_port: prints a TCP port on 127.0.0.1 that nothing is bound to, below the kernel's
# ephemeral range (so no connection of an earlier run can hold it in TIME_WAIT), for
# NCCL_COMM_ID. A port in use made NCCL's bootstrap fail on one rank while the others waited.
gpu_free_port() {
  python3 - <<'PY'
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(100):
    port = random.randrange(10000, lo)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
else:
    raise SystemExit("no free port for NCCL_COMM_ID")
PY
}
