// SPDX-License-Identifier: Apache-2.0
#include "aggregator/cli/prom_text.h"

#include <cstdlib>

#include "fmt/format.h"

namespace conflux::cli {
namespace {

// Parses `{a="x",b="y"}` at text[*pos] (just after the name); false if malformed.
bool parse_labels(std::string_view t, size_t* pos, std::map<std::string, std::string>* out) {
  size_t i = *pos + 1;
  while (i < t.size() && t[i] != '}') {
    const size_t eq = t.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= t.size() || t[eq + 1] != '"') return false;
    std::string key(t.substr(i, eq - i)), value;
    size_t j = eq + 2;
    for (; j < t.size() && t[j] != '"'; ++j) {
      if (t[j] == '\\' && j + 1 < t.size()) ++j;
      value += t[j];
    }
    if (j >= t.size()) return false;
    (*out)[key] = value;
    i = j + 1;
    if (i < t.size() && t[i] == ',') ++i;
  }
  if (i >= t.size()) return false;
  *pos = i + 1;
  return true;
}

}  // namespace

std::optional<std::vector<Sample>> parse_prom_text(std::string_view text, std::string* err) {
  std::vector<Sample> out;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t pos = line.find_first_of("{ ");
    if (pos == std::string_view::npos || pos == 0) {
      *err = fmt::format("line {}: no name and value: '{}'", line_no, line);
      return std::nullopt;
    }
    s.name = std::string(line.substr(0, pos));
    if (line[pos] == '{' && !parse_labels(line, &pos, &s.labels)) {
      *err = fmt::format("line {}: malformed labels: '{}'", line_no, line);
      return std::nullopt;
    }
    const std::string value(line.substr(pos));
    char* end = nullptr;
    s.value = std::strtod(value.c_str(), &end);
    if (end == value.c_str() || *end != '\0') {
      *err = fmt::format("line {}: bad value: '{}'", line_no, line);
      return std::nullopt;
    }
    out.push_back(std::move(s));
  }
  return out;
}

double sum(const std::vector<Sample>& s, std::string_view name) {
  double total = 0;
  for (const Sample& x : s) {
    if (x.name == name) total += x.value;
  }
  return total;
}

}  // namespace conflux::cli
