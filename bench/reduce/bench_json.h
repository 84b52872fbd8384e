// A minimal JSON writer for bench_reduce results (flat records of strings and numbers).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace conflux::bench {

struct Field {
  std::string key;
  std::string value;  // already JSON-encoded
};

inline std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "\"";
}

inline std::string json_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

inline std::string json_object(const std::vector<Field>& fields, const char* indent = "") {
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    out += (i ? ", " : "") + json_str(fields[i].key) + ": " + fields[i].value;
  }
  (void)indent;
  return out + "}";
}

inline std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i ? ",\n    " : "\n    ") + items[i];
  }
  return out + (items.empty() ? "]" : "\n  ]");
}

}  // namespace conflux::bench
