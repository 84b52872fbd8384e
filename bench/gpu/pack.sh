#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs what bench/gpu/gpu_validate.sh runs into one folder, for a GPU node that has CUDA's
# driver and NCCL but not Conflux's build dependencies: confluxd, libnccl-net-conflux.so,
# nccl_allreduce_check, and under lib/ every shared library they need beyond the C and C++
# runtimes (spdlog, fmt, toml++, OpenSSL's libcrypto, DPDK's). On the GPU node:
#   CONFLUX_GPU_PREBUILT=<folder> bench/gpu/gpu_validate.sh 256M 20
#   bench/gpu/pack.sh <folder>
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -eq 1 ]] || { echo "usage: $0 <folder>" >&2; exit 2; }
OUT=$1
B=${CONFLUX_BUILD_DIR:-build}
CUDA=${CUDA_HOME:-/usr/local/cuda}
CONFLUX_BUILD_TARGETS="confluxd nccl-net-conflux conflux_test_delegate_v11" scripts/build.sh
mkdir -p "$OUT/lib"
"$CUDA/bin/nvcc" -O2 -std=c++17 -o "$OUT/nccl_allreduce_check" bench/gpu/nccl_allreduce_check.cu \
  -I"$CUDA/include" -L"$CUDA/lib64" -L"$CUDA/lib" -lnccl
cp "$B/aggregator/confluxd" "$B/nccl_plugin/libnccl-net-conflux.so" \
  "$B/tests/plugin_net/libconflux_test_delegate_v11.so" "$OUT/"
strip --strip-debug "$OUT/confluxd" "$OUT/libnccl-net-conflux.so"  # symbols stay, for perf
# The C library, the C++ runtime and the dynamic loader come from the GPU node (a newer one
# than the build host's is compatible); NCCL and CUDA too.
keep='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64|linux-vdso|libnccl|libcuda|libcudart)\.'
for bin in "$OUT/confluxd" "$OUT/libnccl-net-conflux.so" "$OUT/nccl_allreduce_check"; do
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $keep ]] || cp -L "$path" "$OUT/lib/$name"
  done
done
du -sh "$OUT"
