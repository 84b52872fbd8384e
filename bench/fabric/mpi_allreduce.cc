// SPDX-License-Identifier: Apache-2.0
// conflux-fabric-mpi: Open MPI's ring AllReduce over its TCP BTL, the second third-party
// baseline of the fabric harness (bench/fabric/README.md) and its small-message reference:
// Open MPI progresses by busy polling, the latency a user gets from a tuned CPU ring.
// Started by mpirun (fabric_run.py forces the ring with coll_tuned_allreduce_algorithm=4 and
// the TCP BTL); rank 0 prints the same nccl-tests-style table as conflux-nccl-driver, every
// result is verified, and the last line is `verified: all results correct` (exit 0) or
// `# error: ...` (exit 1). Bad flags: exit 2.
//
// Usage: mpirun ... conflux-fabric-mpi [-b MIN] [-e MAX] [-f STEP] [-n ITERS] [-w WARMUP]
#include <mpi.h>

#include <cstdio>
#include <string>

#include "baseline_sweep.h"

namespace {

double reduce_over_ranks(double v, MPI_Op op) {
  double out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  conflux::bench::Sweep sweep;
  bool ok = true;
  for (int i = 1; i < argc && ok; i += 2) {
    ok = i + 1 < argc && conflux::bench::parse_sweep_flag(argv[i], argv[i + 1], &sweep);
  }
  if (!ok || !sweep.valid()) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "usage: mpirun ... conflux-fabric-mpi [-b MIN] [-e MAX] [-f STEP] [-n ITERS] "
                   "[-w WARMUP]\n");
    }
    MPI_Finalize();
    return 2;
  }
  // MPI's default error handler aborts the whole job on a failure, so every call below
  // either succeeds or ends the run with mpirun's exit code.
  conflux::bench::Collectives c;
  c.allreduce = [](float* in, float* out, size_t count) {
    MPI_Allreduce(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  };
  c.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  c.max_over_ranks = [](double v) { return reduce_over_ranks(v, MPI_MAX); };
  c.sum_over_ranks = [](double v) { return reduce_over_ranks(v, MPI_SUM); };
  const int rc = conflux::bench::run_sweep(
      rank, nranks, sweep, c,
      "conflux-fabric-mpi: " + std::to_string(nranks) + " ranks, Open MPI allreduce",
      "mpi  (MPI_Allreduce, algorithm from mpirun's MCA settings, float sum, out-of-place)");
  MPI_Finalize();
  return rc;
}
