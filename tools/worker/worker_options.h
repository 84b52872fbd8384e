// SPDX-License-Identifier: Apache-2.0
// Command line of conflux-allreduce-worker (see --help and bench/allreduce/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conflux/client/config.h"
#include "conflux/common/dtype.h"
#include "worker/worker_data.h"

namespace conflux::tools {

struct WorkerOptions {
  client::ClientConfig client;
  std::vector<DType> dtypes{DType::kFloat32};  // every (dtype, op) pair is run
  std::vector<Op> ops{Op::kSum};
  std::vector<uint64_t> counts;  // elements (or bytes if sizes_in_bytes), one run per entry
  bool sizes_in_bytes = false;
  int iters = 20;
  int warmup = 2;
  uint64_t iter_bytes = 0;  // > 0: iterations per size = clamp(iter_bytes / size, 1, iters)
  bool check = true;
  InputKind inputs = InputKind::kExact;  // kRandom applies to float dtypes only
  uint64_t seed = 1;
  bool in_place = false;
  int root = -1;  // >= 0: Reduce to this rank (owned results) instead of AllReduce
  std::vector<uint32_t> tree_leaves;  // reduction tree: ranks per leaf, in rank order
  std::vector<int> tree_mid_of;       // depth 3: each leaf's middle aggregator, -1 = none
  std::string json_path;
  bool table = true;  // print the table (default: rank 0 only)
  double timeout_s = 300;
  int pause_ms = 0;  // after each timed iteration, idle this long (a step's compute), untimed
  std::string log_level = "warn";
};

// Parses argv. Returns -1 to go on, or an exit code (0 after --help, 2 on a usage error,
// with the text in *message).
int parse_worker_options(int argc, char** argv, WorkerOptions* o, std::string* message);

}  // namespace conflux::tools
