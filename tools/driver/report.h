// SPDX-License-Identifier: Apache-2.0
// Result rows, the nccl-tests-style tables (printed by rank 0) and the --json file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "conflux/common/dtype.h"
#include "driver/options.h"
#include "driver/status.h"

namespace conflux::driver {

struct Row {
  Mode mode;
  size_t bytes;
  size_t count;
  DType dtype;
  Op op;
  bool inplace;
  double time_us;  // slowest rank's mean time per iteration
  double algbw;    // GB/s = bytes / time
  double busbw;    // algbw * 2(n-1)/n
  uint64_t wrong;  // wrong elements, summed over ranks
  // Busy CPU seconds of the whole host per GB AllReduced in rank 0's timed iterations (all
  // ranks, confluxd and the kernel when they share the host, as with --nranks); -1 when
  // /proc/stat is unreadable or the window (host_cpu_window_s) was too short for its ticks.
  double host_cpu_s_per_gb = -1;
  double host_cpu_window_s = 0;
};

// What the run was made of, for the report header and the JSON "environment".
struct RunInfo {
  std::vector<std::pair<std::string, std::string>> items;  // key -> value (strings)
  void add(const std::string& k, const std::string& v) { items.emplace_back(k, v); }
};

void print_table_header(Mode mode, const std::string& description);
void print_row(const Row& r);
void print_note(const std::string& line);  // "# " + line, flushed

// --timeline FILE: one line per timed iteration of rank 0, "MODE BYTES END US", END being
// the iteration's end in seconds since the epoch (so that other programs' events, such as a
// throttle, line up) and US its duration. start_timeline truncates the file and writes the
// header; append_timeline adds one row's iterations.
struct TimelinePoint {
  double end_unix_s;
  double us;
};
Status start_timeline(const std::string& path);
Status append_timeline(const std::string& path, const Row& row,
                       const std::vector<TimelinePoint>& points);

// The --json report ({"format": "conflux-nccl-driver/1", "environment", "notes", "rows"}), and
// the file holding it.
std::string report_json(const RunInfo& info, const std::vector<Row>& rows,
                        const std::vector<std::string>& notes);
Status write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
                  const std::vector<std::string>& notes);

}  // namespace conflux::driver
