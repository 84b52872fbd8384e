// SPDX-License-Identifier: Apache-2.0
#include "aggregator/control/multicast_flood.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace conflux::agg {
namespace {

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

}  // namespace

bool MulticastFlood::sample(std::optional<uint64_t> ip_in_octets, uint64_t asked_bytes,
                            double seconds, double line_mbps) {
  const std::optional<uint64_t> last = last_octets_;
  last_octets_ = ip_in_octets;
  if (!last.has_value() || !ip_in_octets.has_value() || *ip_in_octets < *last || seconds <= 0) {
    unasked_mbps_ = 0;
    in_a_row_ = 0;
    return false;
  }
  const uint64_t arrived = *ip_in_octets - *last;
  const uint64_t unasked = arrived > asked_bytes ? arrived - asked_bytes : 0;
  unasked_mbps_ = static_cast<double>(unasked) * 8 / 1e6 / seconds;
  const double threshold = std::max(1.0, kShareOfLine * line_mbps);
  in_a_row_ = unasked_mbps_ >= threshold ? in_a_row_ + 1 : 0;
  return flooding();
}

bool MulticastFlood::unicast_fits(double egress_mbps, uint32_t members, double job_mbps,
                                  double line_mbps) {
  if (line_mbps <= 0 || members == 0) return false;
  return egress_mbps + (members - 1) * job_mbps <= kEgressHeadroom * line_mbps;
}

std::optional<uint64_t> ip_in_octets(std::string_view netstat) {
  // Pairs of lines: "IpExt: Name1 Name2 ..." then "IpExt: v1 v2 ...".
  std::vector<std::string_view> lines;
  for (size_t i = 0; i < netstat.size();) {
    const size_t end = std::min(netstat.find('\n', i), netstat.size());
    lines.push_back(netstat.substr(i, end - i));
    i = end + 1;
  }
  for (size_t l = 0; l + 1 < lines.size(); ++l) {
    const std::vector<std::string_view> names = words(lines[l]);
    const std::vector<std::string_view> values = words(lines[l + 1]);
    if (names.empty() || names[0] != "IpExt:" || values.empty() || values[0] != "IpExt:" ||
        names.size() != values.size()) {
      continue;
    }
    for (size_t k = 1; k < names.size(); ++k) {
      if (names[k] != "InOctets") continue;
      uint64_t v = 0;
      const std::string_view s = values[k];
      const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> read_ip_in_octets() {
  std::ifstream f("/proc/net/netstat");
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ip_in_octets(ss.str());
}

}  // namespace conflux::agg
