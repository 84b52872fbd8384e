// SPDX-License-Identifier: Apache-2.0
// Table printing and JSON output (see report.h and README.md for the field list).
#include "driver/report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "conflux/common/json_text.h"
#include "util/proc.h"

namespace conflux::driver {

void print_table_header(Mode mode, const std::string& description) {
  std::printf("#\n# mode: %s  (%s)\n", mode_name(mode), description.c_str());
  std::printf("# %10s %12s %9s %6s %10s %12s %12s %7s\n", "size", "count", "type", "redop",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  std::fflush(stdout);
}

void print_row(const Row& r) {
  std::printf("  %10zu %12zu %9s %6s %10.2f %12.3f %12.3f %7llu\n", r.bytes, r.count,
              std::string(dtype_name(r.dtype)).c_str(), std::string(op_name(r.op)).c_str(),
              r.time_us, r.algbw, r.busbw, static_cast<unsigned long long>(r.wrong));
  std::printf("%s\n", tools::host_cpu_line(r.host_cpu_s_per_gb, r.host_cpu_window_s).c_str());
  std::fflush(stdout);
}

void print_note(const std::string& line) {
  std::istringstream in(line);
  std::string l;
  while (std::getline(in, l)) std::printf("# %s\n", l.c_str());
  std::fflush(stdout);
}

namespace {

Status write_timeline(const std::string& path, const char* how, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), how);
  if (f == nullptr) {
    return internal_error("cannot write --timeline file " + path + ": " + std::strerror(errno));
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return internal_error("short write to --timeline file " + path);
  return Status();
}

}  // namespace

Status start_timeline(const std::string& path) {
  return write_timeline(path, "w", "# mode bytes end_unix_s us\n");
}

Status append_timeline(const std::string& path, const Row& row,
                       const std::vector<TimelinePoint>& points) {
  std::string text;
  char line[128];
  for (const TimelinePoint& p : points) {
    std::snprintf(line, sizeof line, "%s %zu %.6f %.1f\n", mode_name(row.mode), row.bytes,
                  p.end_unix_s, p.us);
    text += line;
  }
  return write_timeline(path, "a", text);
}

std::string report_json(const RunInfo& info, const std::vector<Row>& rows,
                        const std::vector<std::string>& notes) {
  json::Json environment = json::Json::object(), row_list = json::Json::array();
  for (const auto& [key, value] : info.items) environment[key] = value;
  for (const Row& r : rows) {
    row_list.push_back({{"mode", mode_name(r.mode)},
                        {"bytes", r.bytes},
                        {"count", r.count},
                        {"dtype", dtype_name(r.dtype)},
                        {"op", op_name(r.op)},
                        {"inplace", r.inplace},
                        {"time_us", json::sig6(r.time_us)},
                        {"algbw", json::sig6(r.algbw)},
                        {"busbw", json::sig6(r.busbw)},
                        {"wrong", r.wrong},
                        {"host_cpu_s_per_gb", json::sig6(r.host_cpu_s_per_gb)}});
  }
  const json::Json report = {{"format", "conflux-nccl-driver/1"},
                             {"environment", std::move(environment)},
                             {"notes", notes},
                             {"rows", std::move(row_list)}};
  return json::lines(report, true) + "\n";
}

Status write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
                  const std::vector<std::string>& notes) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return internal_error("cannot write --json file " + path + ": " + std::strerror(errno));
  }
  const std::string text = report_json(info, rows, notes);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return internal_error("error writing --json file " + path);
  return Status();
}

}  // namespace conflux::driver
