// SPDX-License-Identifier: Apache-2.0
// One rank of an NCCL AllReduce check on a GPU: rank, size and the bootstrap come from the
// environment (CONFLUX_GPU_RANK, CONFLUX_GPU_NRANKS, NCCL_COMM_ID=host:port, no MPI). Every
// rank fills its buffer with (rank + 1 + i % 7), runs AllReduce (float sum) for each size,
// checks every element against n(n+1)/2 + n*(i % 7), and prints algbw per size.
//   nccl_allreduce_check <min_bytes> <max_bytes> <iters>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CHECK_NCCL(x)                                                                          \
  do {                                                                                         \
    ncclResult_t r_ = (x);                                                                     \
    if (r_ != ncclSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

__global__ void fill(float* p, size_t n, int rank) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    p[i] = float(rank + 1 + int(i % 7));
  }
}

int main(int argc, char** argv) {
  const char* r = std::getenv("CONFLUX_GPU_RANK");
  const char* n = std::getenv("CONFLUX_GPU_NRANKS");
  if (argc != 4 || r == nullptr || n == nullptr || std::getenv("NCCL_COMM_ID") == nullptr) {
    std::fprintf(stderr,
                 "usage: CONFLUX_GPU_RANK=r CONFLUX_GPU_NRANKS=n NCCL_COMM_ID=h:p %s <min_bytes> "
                 "<max_bytes> <iters>\n",
                 argv[0]);
    return 2;
  }
  const int rank = std::atoi(r), nranks = std::atoi(n);
  const size_t min_bytes = std::strtoull(argv[1], nullptr, 10);
  const size_t max_bytes = std::strtoull(argv[2], nullptr, 10);
  const int iters = std::atoi(argv[3]);
  CHECK_CUDA(cudaSetDevice(0));  // every rank shares GPU 0, each is its own "node"
  ncclUniqueId id;               // with NCCL_COMM_ID set, NCCL bootstraps from that address
  CHECK_NCCL(ncclGetUniqueId(&id));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  float *send, *recv;
  CHECK_CUDA(cudaMalloc(&send, max_bytes));
  CHECK_CUDA(cudaMalloc(&recv, max_bytes));
  std::vector<float> host(max_bytes / sizeof(float));
  long wrong_total = 0;
  if (rank == 0) std::printf("#  size(B)      count  time(us)  algbw(GB/s)  #wrong\n");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    fill<<<256, 256, 0, stream>>>(send, count, rank);
    CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));  // warm-up
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) {
      CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        iters;
    CHECK_CUDA(cudaMemcpy(host.data(), recv, bytes, cudaMemcpyDeviceToHost));
    long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      const float expect = float(nranks * (nranks + 1) / 2 + nranks * int(i % 7));
      if (host[i] != expect) ++wrong;
    }
    wrong_total += wrong;
    if (rank == 0) {
      std::printf("%10zu %10zu %9.1f %12.3f %7ld\n", bytes, count, us, bytes / us / 1e3, wrong);
    }
  }
  CHECK_NCCL(ncclCommDestroy(comm));
  if (rank == 0) {
    std::printf(wrong_total == 0 ? "verified: all results correct\n" : "WRONG RESULTS\n");
  }
  return wrong_total == 0 ? 0 : 1;
}
