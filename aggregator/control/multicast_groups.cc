#include "aggregator/control/multicast_groups.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

#include "fmt/format.h"

namespace conflux::agg {
namespace {

// Far more groups than jobs a daemon can hold (max_jobs <= 4096); keeps the bitmap small.
constexpr uint32_t kMaxGroups = 1u << 16;

}  // namespace

std::string ipv4_text(uint32_t addr) {
  return fmt::format("{}.{}.{}.{}", addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff,
                     addr & 0xff);
}

std::string parse_multicast_range(std::string_view text, MulticastRange* out) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return "expected a CIDR range such as 239.77.0.0/16";
  const std::string addr_text(text.substr(0, slash));
  in_addr a{};
  if (inet_pton(AF_INET, addr_text.c_str(), &a) != 1) {
    return fmt::format("'{}' is not an IPv4 address", addr_text);
  }
  const std::string_view len_text = text.substr(slash + 1);
  unsigned len = 0;
  const auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  if (ec != std::errc() || end != len_text.data() + len_text.size() || len < 4 || len > 32) {
    return fmt::format("prefix length '{}' is not in 4..32", len_text);
  }
  const uint32_t mask = len == 32 ? ~0u : ~(~0u >> len);
  const uint32_t base = ntohl(a.s_addr) & mask;
  if ((base >> 28) != 0xE) return "not inside the multicast range 224.0.0.0/4";
  const uint64_t size = uint64_t{1} << (32 - len);
  if (base <= 0xE00000FFu && base + size - 1 >= 0xE0000000u) {
    return "overlaps 224.0.0.0/24 (link-local control groups)";
  }
  out->base = base;
  out->size = static_cast<uint32_t>(std::min<uint64_t>(size, kMaxGroups));
  return "";
}

std::string check_multicast_config(const Config& cfg) {
  if (!cfg.multicast_range.empty()) {
    MulticastRange r;
    if (std::string why = parse_multicast_range(cfg.multicast_range, &r); !why.empty()) {
      return fmt::format("invalid value '{}' for 'multicast_range': {}", cfg.multicast_range, why);
    }
  }
  in_addr a{};
  if (!cfg.multicast_interface.empty() &&
      inet_pton(AF_INET, cfg.multicast_interface.c_str(), &a) != 1) {
    return fmt::format("invalid value '{}' for 'multicast_interface': expected an IPv4 address",
                       cfg.multicast_interface);
  }
  return "";
}

MulticastGroups::MulticastGroups(MulticastRange range) : range_(range), used_(range.size) {}

std::optional<uint32_t> MulticastGroups::acquire() {
  for (uint32_t k = 0; k < range_.size; ++k) {
    const uint32_t i = (next_ + k) % range_.size;
    if (used_[i]) continue;
    used_[i] = true;
    next_ = (i + 1) % range_.size;
    ++in_use_;
    return range_.base + i;
  }
  return std::nullopt;
}

void MulticastGroups::release(uint32_t group) {
  const uint32_t i = group - range_.base;
  if (group < range_.base || i >= range_.size || !used_[i]) return;
  used_[i] = false;
  --in_use_;
}

}  // namespace conflux::agg
