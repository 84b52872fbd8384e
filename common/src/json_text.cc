// SPDX-License-Identifier: Apache-2.0
#include "conflux/common/json_text.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace conflux::json {
namespace {

// Whole numbers that print the same as integers (nlohmann writes 100.0 for a double 100).
Json whole_as_integer(double v, double limit) {
  if (v == std::trunc(v) && std::fabs(v) < limit) return static_cast<int64_t>(v);
  return v;
}

// v as printf prints it with `format`, read back.
double printed(const char* format, int precision, double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, precision, v);
  return std::strtod(buf, nullptr);
}

// j's items one a line at `indent` + 2 spaces, each written by `item`.
template <typename Item>
std::string item_per_line(const Json& j, const std::string& indent, bool open_empty,
                          const Item& item) {
  if (j.empty() && !open_empty) return j.is_object() ? "{}" : "[]";
  std::string out = j.is_object() ? "{" : "[";
  for (auto it = j.begin(); it != j.end(); ++it) {
    out += (it == j.begin() ? "\n  " : ",\n  ") + indent;
    if (j.is_object()) out += compact(it.key()) + ": ";
    out += item(*it);
  }
  return out + "\n" + indent + (j.is_object() ? "}" : "]");
}

}  // namespace

std::string compact(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string one_line(const Json& j) {
  // With an indent of 0, dump() puts every item on a line of its own and a space after each
  // key's colon. A raw newline is never inside a string (dump escapes it), so each one is
  // layout: after a comma it becomes the space between items, elsewhere it goes.
  const std::string lines = j.dump(0, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(lines.size());
  for (char c : lines) {
    if (c != '\n') {
      out += c;
    } else if (!out.empty() && out.back() == ',') {
      out += ' ';
    }
  }
  return out;
}

std::string lines(const Json& j, bool open_empty) {
  if (!j.is_structured()) return one_line(j);
  return item_per_line(j, "", open_empty, [open_empty](const Json& member) {
    if (!member.is_structured()) return one_line(member);
    return item_per_line(member, "  ", open_empty, one_line);
  });
}

Json fixed(double v, int decimals) { return printed("%.*f", decimals, v); }

Json sig6(double v) { return whole_as_integer(printed("%.*g", 6, v), 1e15); }

Json shortest(double v) { return whole_as_integer(v, 1e16); }

}  // namespace conflux::json
