// SPDX-License-Identifier: Apache-2.0
// conflux-allreduce-worker's result rows and its --json report (fields: bench/allreduce/README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "conflux/client/engine.h"
#include "conflux/common/dtype.h"
#include "worker/worker_options.h"

namespace conflux::tools {

struct ResultRow {
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;
  uint64_t bytes = 0, count = 0;
  double time_us = 0, algbw = 0, busbw = 0;
  size_t wrong = 0;
  bool checked = false;
};

// One line of compact JSON and a newline; "stats" only when `stats` is not null (the engine
// was created).
std::string worker_report_json(const WorkerOptions& o, const std::vector<ResultRow>& rows,
                               const client::EngineStats* stats, const std::string& error, bool ok);

}  // namespace conflux::tools
