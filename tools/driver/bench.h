// SPDX-License-Identifier: Apache-2.0
// The measurement loop shared by every mode: for each dtype x op x size, warm up, time
// `iters` collectives, then verify a check run (and, with --check-iters, every iteration);
// timings and wrong counts are gathered to rank 0, which prints the row.
#pragma once

#include <functional>
#include <vector>

#include "driver/bootstrap.h"
#include "driver/buffers.h"
#include "driver/data.h"
#include "driver/device_buffers.h"
#include "driver/options.h"
#include "driver/report.h"

namespace conflux::driver {

// AllReduce: count elements in and out. ReduceScatter: nranks * count in, count out.
// AllGather: count in, nranks * count out. The table's size is the larger of the two.
using AllReduceFn = std::function<Status(void* send, void* recv, size_t count, DType t, Op op)>;
using SupportFn = std::function<bool(DType t, Op op)>;

struct ModeRun {
  Mode mode;
  InputKind inputs;  // kExact, or kRandom for bitwise checks in deterministic CollNet modes
  AllReduceFn run;
  SupportFn supported;
};

// Appends one Row per measured (dtype, op, size) to *rows (on every rank; only rank 0's
// rows carry the gathered values). Unsupported (dtype, op) pairs are noted and skipped.
Status run_mode(const Options& o, const ModeRun& m, Bootstrap* bs, HostBuffers* bufs,
                std::vector<Row>* rows, std::vector<std::string>* notes,
                DeviceBuffers* dev = nullptr);

}  // namespace conflux::driver
