// SPDX-License-Identifier: Apache-2.0
#include "collnet/connect_join.h"

#include <strings.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <vector>

#include "collnet/ring_exchange.h"
#include "collnet/test_hooks.h"
#include "net/log.h"

namespace conflux::plugin::connect {

using net::kLogColl;
using net::kLogInit;

namespace {

// "3,1" -> {3, 1}; empty -> none. Each an integer 1..Striping's period limit (4096).
conflux::Status parse_weights(const std::string& text, std::vector<uint32_t>* out) {
  out->clear();
  if (text.empty()) return {};
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    uint32_t w = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), w);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || w == 0 ||
        w > 4096) {
      return invalid_argument("'" + item + "' is not a weight (an integer 1..4096)");
    }
    out->push_back(w);
    at = comma + 1;
  }
  return {};
}

}  // namespace

conflux::Status engine_config(const Config& c, uint64_t key, int nranks, int rank,
                              const collnet::TreeCounts& tree, client::ClientConfig* out) {
  client::ClientConfig& cfg = *out;
  cfg = client::ClientConfig();
  std::string error;
  if (!client::parse_endpoints(c.aggregators, &cfg.aggregators, &error)) {
    return invalid_argument("CONFLUX_AGGREGATORS: " + error);
  }
  CFX_TRY(parse_weights(c.stripeWeights, &cfg.stripe_weights)
              .prefixed("CONFLUX_STRIPE_WEIGHTS=" + c.stripeWeights + ": "));
  if (!cfg.stripe_weights.empty() && cfg.stripe_weights.size() != cfg.aggregators.size()) {
    return invalid_argument("CONFLUX_STRIPE_WEIGHTS names " +
                            std::to_string(cfg.stripe_weights.size()) + " weights for " +
                            std::to_string(cfg.aggregators.size()) + " aggregators");
  }
  cfg.job_key = key;
  cfg.n_workers = static_cast<uint32_t>(nranks);
  cfg.rank = static_cast<uint32_t>(rank);
  // A reduction tree (SPEC.md §7): ranks under each leaf, and under each level above it.
  cfg.served_ranks = tree.served;
  cfg.served_up_ranks = tree.served_up;
  cfg.window_slots = static_cast<uint32_t>(c.windowSlots);
  cfg.payload_bytes = static_cast<uint32_t>(c.payloadBytes);
  cfg.deterministic = c.deterministic;
  cfg.secret = c.secret;
  cfg.aggregator_timeout = std::chrono::milliseconds(c.aggregatorTimeoutMs);
  cfg.congestion.enabled = c.congestionControl;
  cfg.udp_offload = c.udpOffload;
  cfg.spin_us = static_cast<uint32_t>(c.busyPollUs);
  cfg.spin_max_bytes = c.busyPollMaxBytes;
  cfg.bulk_wake = std::chrono::microseconds(c.bulkWakeUs);
  cfg.caller_progress = c.callerProgress;
  cfg.multicast = strcasecmp(c.multicast.c_str(), "on") == 0    ? client::MulticastMode::kOn
                  : strcasecmp(c.multicast.c_str(), "off") == 0 ? client::MulticastMode::kOff
                                                                : client::MulticastMode::kAuto;
  // A request without results for this long fails the engine too, so a rank that stops
  // hearing the aggregator (while its control channel lives) starts the failover.
  cfg.stall_timeout = 4 * cfg.aggregator_timeout;
  cfg.join_timeout = std::chrono::milliseconds(c.joinTimeoutMs);
  collnet::hooks::engineFaults(c, rank, &cfg);
  cfg.log = [](client::LogLevel level, std::string_view msg) {
    if (level >= client::LogLevel::kWarn) {
      CFX_WARN(kLogColl, "%.*s", static_cast<int>(msg.size()), msg.data());
    } else if (level == client::LogLevel::kInfo) {
      CFX_INFO(kLogColl, "%.*s", static_cast<int>(msg.size()), msg.data());
    }
  };
  return {};
}

conflux::Status create_engine(const client::ClientConfig& cfg,
                              std::unique_ptr<client::Engine>* out) {
  std::string error;
  *out = client::Engine::create(cfg, &error);
  if (*out == nullptr) return unavailable(std::move(error));
  return {};
}

namespace {

// What each rank tells the others once every aggregator of its list answered its Join or was
// given up (ClientConfig::join_agree): the entries it joined, and why not the others.
struct JoinOutcome {
  uint64_t joined = 0;  // bit i: entry i of CONFLUX_AGGREGATORS (stripe i)
  char why[184] = {};
};

// The agreement on the aggregators a job keeps, over connect's own ring: every rank keeps the
// entries every rank joined (the AND of the JoinOutcomes), so a striped job goes on without an
// aggregator that refused it (a draining daemon). While its joins wait, a rank looks at rank-1's
// outcome (the allgather's first step, received early): an entry rank-1 did not join will be
// left out anyway, so the join stops waiting for it. That carries a refusal around the ring in
// one hop per rank, instead of every rank waiting for the join timeout of an aggregator whose
// job can no longer form (a tree whose other leaf refused the job: the leaf's Join at the root
// waits for a subtree that never comes).
class JoinExchange {
 public:
  JoinExchange(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
               std::chrono::milliseconds timeout)
      : next_(next),
        prev_(prev),
        rank_(rank),
        nranks_(nranks),
        timeout_(timeout),
        all_(static_cast<size_t>(nranks)) {}

  // ClientConfig::join_peers.
  bool peek(uint64_t* alive) {
    if (nranks_ < 2 || ran_ || failed_) return false;
    bool arrived = false;
    if (collnet::ring_allgather_post_first(prev_, rank_, nranks_, all_.data(), sizeof(JoinOutcome),
                                           &early_) != Status::kOk ||
        collnet::ring_allgather_test_first(&early_, &arrived) != Status::kOk) {
      failed_ = true;  // the allgather below reports it
      return false;
    }
    if (!arrived) return false;
    *alive = all_[static_cast<size_t>((rank_ + nranks_ - 1) % nranks_)].joined;
    return true;
  }

  // ClientConfig::join_agree; also run with joined = 0 by a rank whose engine failed before it
  // joined anything, so that every rank takes part exactly once.
  conflux::Status agree(uint64_t joined, const std::string& why, uint64_t* agreed) {
    ran_ = true;
    JoinOutcome mine;
    mine.joined = joined;
    std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
    *agreed = joined;
    // Ranks come here up to one join timeout apart, as to the verdicts.
    const Status st = collnet::ring_agree(next_, prev_, rank_, nranks_, mine, &all_, 2 * timeout_,
                                          failed_ ? nullptr : &early_);
    if (st != Status::kOk) {
      return unavailable("agreeing on the aggregators joined failed (" +
                         std::string(net::toString(st)) + ")");
    }
    for (const JoinOutcome& o : all_) *agreed &= o.joined;
    agreed_ = *agreed;
    if (*agreed == 0) {
      const int r = cause(~uint64_t{0});
      if (r >= 0) {
        return unavailable("no aggregator joined on every rank (rank " + std::to_string(r) + ": " +
                           all_[static_cast<size_t>(r)].why + ")");
      }
      return unavailable("no aggregator joined on every rank" +
                         (why.empty() ? "" : " (" + why + ")"));
    }
    return {};
  }

  bool ran() const { return ran_; }

  // Rank 0: one line per entry of its list left out on every rank, with the first reason a rank
  // gave (an aggregator that refused: a draining daemon, no capacity; or one not reached).
  void log_left_out(const Config& cfg) const {
    if (rank_ != 0 || agreed_ == 0) return;
    std::vector<client::Endpoint> eps;
    std::string unused;
    if (!client::parse_endpoints(cfg.aggregators, &eps, &unused)) return;
    const int kept = std::popcount(agreed_);
    for (size_t i = 0; i < eps.size() && i < 64; ++i) {
      if ((agreed_ >> i) & 1) continue;
      const int r = cause(uint64_t{1} << i);
      const std::string why =
          r < 0 ? "not joined by every rank"
                : "rank " + std::to_string(r) + ": " + all_[static_cast<size_t>(r)].why;
      CFX_WARN(kLogColl | kLogInit,
               "CollNet connect: aggregator %s (entry %zu of CONFLUX_AGGREGATORS) left out on "
               "every rank (%s); the job is striped over the other %d",
               eps[i].to_string().c_str(), i, why.c_str(), kept);
    }
  }

 private:
  // The rank whose reason best explains why an entry of `entries` was left out: first a rank
  // refused outright (e.g. shutting_down, no_capacity), then one whose rendezvous ended
  // (join_timeout: its aggregator gave up when a rank that had given up left), never one that
  // only gave up because another rank could not join; -1: none said why.
  int cause(uint64_t entries) const {
    for (int pass = 0; pass < 2; ++pass) {
      for (int r = 0; r < nranks_; ++r) {
        const JoinOutcome& o = all_[static_cast<size_t>(r)];
        if ((~o.joined & entries) == 0 || o.why[0] == '\0' ||
            std::strstr(o.why, "another rank could not") != nullptr) {
          continue;
        }
        if (pass == 0 && (std::strstr(o.why, "join_timeout") != nullptr ||
                          std::strstr(o.why, "no JoinAck within") != nullptr)) {
          continue;
        }
        return r;
      }
    }
    return -1;
  }

  net::SendComm* next_;
  net::RecvComm* prev_;
  int rank_, nranks_;
  std::chrono::milliseconds timeout_;
  std::vector<JoinOutcome> all_;
  collnet::EarlyFirstRecv early_;
  bool failed_ = false;
  bool ran_ = false;
  uint64_t agreed_ = 0;
};

conflux::Status join_aggregators(const Config& c, uint64_t key, int nranks, int rank,
                                 const collnet::TreeCounts& tree, JoinExchange* exchange,
                                 std::unique_ptr<client::Engine>* out) {
  if (c.aggregators.empty()) return invalid_argument("CONFLUX_AGGREGATORS is not set");
  client::ClientConfig cfg;
  CFX_TRY(engine_config(c, key, nranks, rank, tree, &cfg));
  cfg.join_agree = [exchange](uint64_t joined, const std::string& w, uint64_t* agreed) {
    return exchange->agree(joined, w, agreed);
  };
  cfg.join_peers = [exchange](uint64_t* alive) { return exchange->peek(alive); };
  return create_engine(cfg, out);
}

}  // namespace

conflux::Status join(const Config& cfg, Rendezvous& rv, int rank, int nranks,
                     std::chrono::milliseconds timeout, std::unique_ptr<client::Engine>* out) {
  JoinExchange exchange(rv.next.get(), rv.prev.get(), rank, nranks, timeout);
  out->reset();
  // A discovery error leaves nothing to join: the agreement below declines everywhere.
  conflux::Status st = rv.discovery;
  if (st.ok()) st = join_aggregators(cfg, rv.key, nranks, rank, rv.tree, &exchange, out);
  if (!exchange.ran()) {
    uint64_t unused = 0;  // failed before it joined: the others still hear from this rank
    static_cast<void>(exchange.agree(0, st.message(), &unused));  // the decline is st already
  } else if (*out != nullptr) {
    exchange.log_left_out(cfg);
  }
  return st;
}

}  // namespace conflux::plugin::connect
