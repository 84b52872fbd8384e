// SPDX-License-Identifier: Apache-2.0
#include "conflux/client/config.h"

#include <arpa/inet.h>

#include <charconv>

#include "conflux/protocol/control.h"
#include "conflux/protocol/data.h"
#include "fault.h"
#include "striping.h"

namespace conflux::client {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

bool parse_endpoints(std::string_view list, std::vector<Endpoint>* out, std::string* error) {
  out->clear();
  auto fail = [&](std::string msg) {
    if (error != nullptr) {
      *error = std::move(msg);
    }
    out->clear();
    return false;
  };
  if (trim(list).empty()) {
    return fail("empty aggregator list");
  }
  // One "host:port" into *ep (host and port only), or what is wrong with it.
  auto one = [](std::string_view item, Endpoint* ep) -> Status {
    if (item.empty()) {
      return invalid_argument("empty endpoint");
    }
    const size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return invalid_argument("aggregator '" + std::string(item) + "' is not host:port");
    }
    const std::string_view port_s = item.substr(colon + 1);
    unsigned port = 0;
    const auto [p, ec] = std::from_chars(port_s.data(), port_s.data() + port_s.size(), port);
    if (ec != std::errc() || p != port_s.data() + port_s.size() || port == 0 || port > 65535) {
      return invalid_argument("aggregator '" + std::string(item) + "' has an invalid port");
    }
    *ep = Endpoint{std::string(item.substr(0, colon)), static_cast<uint16_t>(port)};
    if (ep->host.find(':') != std::string::npos) {
      return invalid_argument("aggregator '" + std::string(item) + "': IPv6 is not supported");
    }
    return {};
  };
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string_view item = trim(list.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) {
      return fail("empty entry in aggregator list '" + std::string(list) + "'");
    }
    // "leaf>mid>...": the chain up a reduction tree.
    std::vector<std::string_view> chain;
    for (size_t from = 0;;) {
      const size_t gt = std::min(item.find('>', from), item.size());
      chain.push_back(trim(item.substr(from, gt - from)));
      if (gt == item.size()) {
        break;
      }
      from = gt + 1;
    }
    if (chain.size() > 1 + proto::kMaxTreeLevelsUp) {
      return fail("aggregator '" + std::string(item) + "' names more than " +
                  std::to_string(proto::kMaxTreeLevelsUp) + " levels above it");
    }
    Endpoint ep;
    for (size_t level = 0; level < chain.size(); ++level) {
      Endpoint e;
      if (Status st = one(chain[level], &e); !st.ok()) {
        return fail(st.message() + (chain.size() > 1 ? " (in '" + std::string(item) + "')" : ""));
      }
      if (level == 0) {
        ep = std::move(e);
      } else {
        ep.above.push_back(e.to_string());
      }
    }
    for (const Endpoint& e : *out) {
      if (e.host == ep.host && e.port == ep.port) {
        return fail("aggregator '" + ep.to_string() + "' is listed twice");
      }
    }
    out->push_back(std::move(ep));
  }
  return true;
}

namespace {

// The stripes' weights: one per aggregator, each at least 1, a pattern of at most
// Striping::kMaxPeriod.
Status validate_weights(const ClientConfig& c) {
  if (c.stripe_weights.empty()) return {};
  if (c.stripe_weights.size() != c.aggregators.size()) {
    return invalid_argument("stripe_weights must name one weight per aggregator (" +
                            std::to_string(c.stripe_weights.size()) + " for " +
                            std::to_string(c.aggregators.size()) + ")");
  }
  uint64_t sum = 0;
  for (uint32_t w : c.stripe_weights) {
    if (w == 0) return invalid_argument("stripe_weights must be >= 1 (0 would drop an aggregator)");
    sum += w;
  }
  if (sum > Striping::kMaxPeriod) {
    return invalid_argument("stripe_weights add up to " + std::to_string(sum) + ", over " +
                            std::to_string(Striping::kMaxPeriod));
  }
  return {};
}

// The job's shape: aggregators, versions, ranks and the tree counts.
Status validate_job(const ClientConfig& c) {
  if (c.aggregators.empty()) {
    return invalid_argument("no aggregators configured");
  }
  if (c.min_version == 0 || c.min_version > c.max_version) {
    return invalid_argument("invalid protocol version range " + std::to_string(c.min_version) +
                            ".." + std::to_string(c.max_version));
  }
  if (c.aggregators.size() > 64) {
    return invalid_argument("more than 64 aggregators");
  }
  if (c.n_workers == 0 || c.n_workers > proto::kMaxWorkersPerJob) {
    return invalid_argument("n_workers must be 1.." + std::to_string(proto::kMaxWorkersPerJob));
  }
  if (c.rank >= c.n_workers) {
    return invalid_argument("rank must be < n_workers");
  }
  if (!c.served_ranks.empty() && c.served_ranks.size() != c.aggregators.size()) {
    return invalid_argument("served_ranks must name one count per aggregator");
  }
  for (uint32_t s : c.served_ranks) {
    if (s == 0 || s > c.n_workers) return invalid_argument("served_ranks must be 1..n_workers");
  }
  if (!c.served_up_ranks.empty() && (c.served_up_ranks.size() != c.aggregators.size() ||
                                     c.served_ranks.size() != c.aggregators.size())) {
    return invalid_argument("served_up_ranks needs served_ranks and one list per aggregator");
  }
  for (size_t i = 0; i < c.served_up_ranks.size(); ++i) {
    const std::vector<uint32_t>& up = c.served_up_ranks[i];
    if (up.size() > proto::kMaxTreeLevelsUp) {
      return invalid_argument("served_up_ranks: at most " +
                              std::to_string(proto::kMaxTreeLevelsUp) + " levels");
    }
    uint32_t below = c.served_ranks[i];
    for (uint32_t s : up) {
      if (s < below || s > c.n_workers) {
        return invalid_argument(
            "served_up_ranks must grow level by level, from served_ranks to n_workers");
      }
      below = s;
    }
  }
  return validate_weights(c);
}

}  // namespace

Status validate(const ClientConfig& c) {
  CFX_TRY(validate_job(c));
  if (c.window_slots == 0 || c.window_slots > (1u << 20)) {
    return invalid_argument("window_slots must be 1..2^20");
  }
  if (c.payload_bytes == 0 || c.payload_bytes > proto::kMaxPayloadBytes) {
    return invalid_argument("payload_bytes must be 1.." + std::to_string(proto::kMaxPayloadBytes));
  }
  if (c.rto_initial.count() <= 0 || c.rto_max < c.rto_initial) {
    return invalid_argument("need 0 < rto_initial <= rto_max");
  }
  if (c.rto_min.count() <= 0) {
    return invalid_argument("rto_min must be > 0");
  }
  const CongestionConfig& cc = c.congestion;
  if (cc.initial_window == 0 || cc.min_window == 0) {
    return invalid_argument("congestion initial_window and min_window must be >= 1");
  }
  if (!(cc.decrease > 0 && cc.decrease < 1)) {
    return invalid_argument("congestion decrease must be in (0, 1)");
  }
  if (c.rto_max.count() > 60'000'000) {
    return invalid_argument("rto_max must be <= 60 s");
  }
  if (c.aggregator_timeout.count() <= 0) {
    return invalid_argument("aggregator_timeout must be > 0");
  }
  if (c.heartbeat_interval.count() <= 0) {
    return invalid_argument("heartbeat_interval must be > 0");
  }
  if (c.join_timeout.count() <= 0 || c.join_timeout.count() > 0xFFFFFFFFll) {
    return invalid_argument("join_timeout must be 1 ms .. 2^32 ms");
  }
  if (c.connect_timeout.count() <= 0) {
    return invalid_argument("connect_timeout must be > 0");
  }
  if (c.stall_timeout.count() < 0) {
    return invalid_argument("stall_timeout must be >= 0");
  }
  in_addr a{};
  if (::inet_pton(AF_INET, c.bind_addr.c_str(), &a) != 1) {
    return invalid_argument("bind_addr '" + c.bind_addr + "' is not an IPv4 address");
  }
  return check_faults(c);
}

}  // namespace conflux::client
