// SPDX-License-Identifier: Apache-2.0
#include "util/size_list.h"

#include <charconv>

namespace conflux::tools {

std::optional<uint64_t> parse_size(std::string_view s) {
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) {
    return std::nullopt;
  }
  std::string_view suffix(p, static_cast<size_t>(s.data() + s.size() - p));
  int shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "Ki") {
    shift = 10;
  } else if (suffix == "M" || suffix == "Mi") {
    shift = 20;
  } else if (suffix == "G" || suffix == "Gi") {
    shift = 30;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) {
    return std::nullopt;
  }
  return v << shift;
}

bool parse_size_list(std::string_view s, std::vector<uint64_t>* out, std::string* error) {
  out->clear();
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string_view item = s.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t c1 = item.find(':');
    if (c1 == std::string_view::npos) {
      const auto v = parse_size(item);
      if (!v) {
        *error = "bad size '" + std::string(item) + "'";
        return false;
      }
      out->push_back(*v);
      continue;
    }
    const size_t c2 = item.find(':', c1 + 1);
    const auto lo = parse_size(item.substr(0, c1));
    const auto hi = parse_size(
        item.substr(c1 + 1, c2 == std::string_view::npos ? std::string_view::npos : c2 - c1 - 1));
    const auto f =
        c2 == std::string_view::npos ? std::optional<uint64_t>(2) : parse_size(item.substr(c2 + 1));
    if (!lo || !hi || !f || *f < 2 || *lo == 0 || *lo > *hi) {
      *error = "bad size range '" + std::string(item) + "' (want MIN:MAX[:FACTOR])";
      return false;
    }
    for (uint64_t v = *lo; v <= *hi; v *= *f) {
      out->push_back(v);
      if (v > UINT64_MAX / *f) {
        break;
      }
    }
  }
  if (out->empty()) {
    *error = "empty size list";
    return false;
  }
  return true;
}

}  // namespace conflux::tools
