// Table printing and JSON output (see report.h and README.md for the field list).
#include "driver/report.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "util/proc.h"

namespace conflux::driver {
namespace {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

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
    return Status::Error("cannot write --timeline file " + path + ": " + std::strerror(errno));
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return Status::Error("short write to --timeline file " + path);
  return Status::Ok();
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

Status write_json(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
                  const std::vector<std::string>& notes) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return Status::Error("cannot write --json file " + path + ": " + std::strerror(errno));
  }
  std::fprintf(f, "{\n  \"format\": \"conflux-nccl-driver/1\",\n  \"environment\": {");
  for (size_t i = 0; i < info.items.size(); ++i) {
    std::fprintf(f, "%s\n    \"%s\": \"%s\"", i ? "," : "",
                 json_escape(info.items[i].first).c_str(),
                 json_escape(info.items[i].second).c_str());
  }
  std::fprintf(f, "\n  },\n  \"notes\": [");
  for (size_t i = 0; i < notes.size(); ++i) {
    std::fprintf(f, "%s\n    \"%s\"", i ? "," : "", json_escape(notes[i]).c_str());
  }
  std::fprintf(f, "\n  ],\n  \"rows\": [");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "%s\n    {\"mode\": \"%s\", \"bytes\": %zu, \"count\": %zu, \"dtype\": \"%s\", "
                 "\"op\": \"%s\", \"inplace\": %s, \"time_us\": %s, \"algbw\": %s, "
                 "\"busbw\": %s, \"wrong\": %llu, \"host_cpu_s_per_gb\": %s}",
                 i ? "," : "", mode_name(r.mode), r.bytes, r.count,
                 std::string(dtype_name(r.dtype)).c_str(), std::string(op_name(r.op)).c_str(),
                 r.inplace ? "true" : "false", num(r.time_us).c_str(), num(r.algbw).c_str(),
                 num(r.busbw).c_str(), static_cast<unsigned long long>(r.wrong),
                 num(r.host_cpu_s_per_gb).c_str());
  }
  std::fprintf(f, "\n  ]\n}\n");
  if (std::fclose(f) != 0) return Status::Error("error writing --json file " + path);
  return Status::Ok();
}

}  // namespace conflux::driver
