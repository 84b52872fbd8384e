// SPDX-License-Identifier: Apache-2.0
#include "aggregator/util/ipv4.h"

#include <arpa/inet.h>
#include <ifaddrs.h>

#include <algorithm>
#include <charconv>

#include "fmt/format.h"

namespace conflux::agg {
namespace {

// Far more groups than jobs a daemon can hold (max_jobs <= 4096); keeps the bitmap small.
constexpr uint32_t kMaxGroups = 1u << 16;

}  // namespace

bool parse_ipv4_endpoint(std::string_view text, sockaddr_in* out) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string host(text.substr(0, colon));
  const std::string_view port = text.substr(colon + 1);
  unsigned p = 0;
  if (port.empty() || port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
    p = p * 10 + static_cast<unsigned>(c - '0');
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (p == 0 || p > 65535 || inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) return false;
  a.sin_port = htons(static_cast<uint16_t>(p));
  *out = a;
  return true;
}

std::string ipv4_text(uint32_t addr) {
  return fmt::format("{}.{}.{}.{}", addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
                     addr & 0xff);
}

Status parse_multicast_range(std::string_view text, MulticastRange* out) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    return invalid_argument("expected a CIDR range such as 239.77.0.0/16");
  }
  const std::string addr_text(text.substr(0, slash));
  in_addr a{};
  if (inet_pton(AF_INET, addr_text.c_str(), &a) != 1) {
    return invalid_argument(fmt::format("'{}' is not an IPv4 address", addr_text));
  }
  const std::string_view len_text = text.substr(slash + 1);
  unsigned len = 0;
  const auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  if (ec != std::errc() || end != len_text.data() + len_text.size() || len < 4 || len > 32) {
    return invalid_argument(fmt::format("prefix length '{}' is not in 4..32", len_text));
  }
  const uint32_t mask = len == 32 ? ~0u : ~(~0u >> len);
  const uint32_t base = ntohl(a.s_addr) & mask;
  if ((base >> 28) != 0xE) return invalid_argument("not inside the multicast range 224.0.0.0/4");
  const uint64_t size = uint64_t{1} << (32 - len);
  if (base <= 0xE00000FFu && base + size - 1 >= 0xE0000000u) {
    return invalid_argument("overlaps 224.0.0.0/24 (link-local control groups)");
  }
  out->base = base;
  out->size = static_cast<uint32_t>(std::min<uint64_t>(size, kMaxGroups));
  return {};
}

MulticastRange multicast_slice(MulticastRange range, uint32_t slice, uint32_t address,
                               uint32_t* index, uint32_t* slices) {
  const uint32_t count = slice == 0 || slice >= range.size ? 1 : range.size / slice;
  const uint32_t at = address % count;
  if (index != nullptr) *index = at;
  if (slices != nullptr) *slices = count;
  if (count == 1) return range;
  return {range.base + at * slice, slice};
}

uint32_t daemon_address(const std::string& listen, const std::string& multicast_interface) {
  for (const std::string& text : {multicast_interface, listen}) {
    in_addr a{};
    if (!text.empty() && inet_pton(AF_INET, text.c_str(), &a) == 1 && a.s_addr != INADDR_ANY) {
      return ntohl(a.s_addr);
    }
  }
  ifaddrs* list = nullptr;
  uint32_t found = INADDR_LOOPBACK;
  if (getifaddrs(&list) == 0) {
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
      if ((a >> 24) == 127) continue;
      found = a;
      break;
    }
    freeifaddrs(list);
  }
  return found;
}

}  // namespace conflux::agg
