// SPDX-License-Identifier: Apache-2.0
#include "join.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <variant>

#include "connect_retry.h"

namespace conflux::client {
namespace {

using proto::ControlMsg;

std::string name(const ClientConfig& cfg, size_t i) {
  return "aggregator " + cfg.aggregators[i].to_string();
}

std::string error_text(const proto::Error& e) {
  std::string s(proto::status_name(e.status));
  if (!e.text.empty()) {
    s += " (" + e.text + ")";
  }
  return s;
}

// The join's retries of one aggregator's control connection (connect_retry.h): its backoff and
// whether the first retry was logged.
struct Retry {
  ConnectBackoff backoff;
  int64_t start_ns;
  bool told = false;
};

// One attempt: connect and read ServerHello. *failure says whether another may help.
Status hello_once(const ClientConfig& cfg, size_t i, JoinedAggregator* ja, proto::ServerHello* h,
                  ConnectFailure* failure) {
  *failure = ConnectFailure::kFinal;
  const int64_t connect_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.connect_timeout).count();
  ja->ctl = std::make_unique<ControlChannel>();
  int code = 0;
  if (Status st = ja->ctl->connect(cfg.aggregators[i], now_ns() + connect_ns, &code); !st.ok()) {
    if (code == ECONNREFUSED) {
      *failure = ConnectFailure::kRefused;
    } else if (code == ECONNRESET || code == ECONNABORTED || code == EPIPE) {
      *failure = ConnectFailure::kDropped;
    }
    return st.prefixed(name(cfg, i) + ": cannot connect: ");
  }
  ControlMsg m;
  ControlChannel::Rx how = ControlChannel::Rx::kNone;
  if (Status st = ja->ctl->recv_blocking(&m, now_ns() + connect_ns, &how); !st.ok()) {
    // Closed or reset before a word: shed by a busy aggregator. A timeout or a frame that does
    // not parse (another protocol version) is final.
    if (how == ControlChannel::Rx::kClosed) {
      *failure = ConnectFailure::kDropped;
    }
    return st.prefixed(name(cfg, i) + ": no ServerHello: ");
  }
  if (const auto* e = std::get_if<proto::Error>(&m)) {
    return refused(name(cfg, i) + " refused the connection: " + error_text(*e));
  }
  const auto* sh = std::get_if<proto::ServerHello>(&m);
  if (sh == nullptr) {
    return refused(name(cfg, i) + ": expected ServerHello, got " +
                   std::string(proto::msg_type_name(proto::msg_type(m))));
  }
  if (sh->auth_required != 0 && cfg.secret.empty()) {
    return invalid_argument(name(cfg, i) + " requires authentication but no secret is configured");
  }
  *h = *sh;
  return {};
}

// After an attempt that failed with `err`: waits out the backoff and returns ok when another
// attempt may start, else the final error (with the attempts made). Logs the first retry of
// each aggregator once, as a warning.
Status back_off(const ClientConfig& cfg, ConnectFailure f, const Status& err, Retry* r) {
  const int64_t now = now_ns();
  const int64_t at = r->backoff.next_attempt(f, now);
  if (at < 0) {
    if (r->backoff.failures() <= 1) {
      return err;
    }
    return Status(err.code(), err.message() + " (after " + std::to_string(r->backoff.failures()) +
                                  " attempts in " +
                                  std::to_string((now - r->start_ns) / 1'000'000) + " ms)");
  }
  if (!r->told && cfg.log) {
    r->told = true;
    cfg.log(LogLevel::kWarn,
            err.message() + "; connecting again with backoff (10 ms doubling to 500 ms) until " +
                (f == ConnectFailure::kRefused
                     ? "connect_timeout (" + std::to_string(cfg.connect_timeout.count()) + " ms)"
                     : "the join timeout (" + std::to_string(cfg.join_timeout.count()) + " ms)"));
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(at - now));
  return {};
}

// Connects and reads ServerHello, connecting again while the aggregator refuses or drops the
// connection (connect_retry.h).
Status hello(const ClientConfig& cfg, size_t i, JoinedAggregator* ja, proto::ServerHello* h,
             Retry* r) {
  for (;;) {
    ConnectFailure f = ConnectFailure::kFinal;
    const Status err = hello_once(cfg, i, ja, h, &f);
    if (err.ok()) {
      if (r->told && cfg.log) {
        cfg.log(LogLevel::kInfo, name(cfg, i) + ": connected after " +
                                     std::to_string(r->backoff.failures() + 1) + " attempts in " +
                                     std::to_string((now_ns() - r->start_ns) / 1'000'000) + " ms");
      }
      return {};
    }
    CFX_TRY(back_off(cfg, f, err, r));
  }
}

// multicast: ask for a group (SPEC §8); versions: offer the versions this worker speaks (SPEC
// §1); each false for an aggregator that predates it.
proto::Join make_join(const ClientConfig& cfg, size_t i, uint16_t udp_port, uint64_t nonce,
                      bool multicast, bool versions) {
  proto::Join j;
  j.job_key = cfg.job_key;
  j.n_workers = cfg.n_workers;
  j.rank = cfg.rank;
  in_addr bind{};
  if (::inet_pton(AF_INET, cfg.bind_addr.c_str(), &bind) == 1) {
    j.udp_addr = ntohl(bind.s_addr);
  }
  j.udp_port = udp_port;
  j.flags = static_cast<uint8_t>((cfg.deterministic ? proto::kJoinFlagDeterministic : 0) |
                                 (cfg.capacity ? proto::kJoinFlagCapacity : 0) |
                                 (multicast ? multicast_join_flags(cfg) : 0) |
                                 (versions ? proto::kJoinFlagVersions : 0));
  j.min_version = cfg.min_version;
  j.max_version = cfg.max_version;
  j.requested_slots = cfg.window_slots;
  j.payload_bytes = cfg.payload_bytes;
  j.join_timeout_ms = static_cast<uint32_t>(cfg.join_timeout.count());
  // A leaf of a reduction tree that serves only some ranks (SPEC.md §7).
  if (i < cfg.served_ranks.size() && cfg.served_ranks[i] != cfg.n_workers) {
    j.served = static_cast<uint16_t>(cfg.served_ranks[i]);
    // The levels above that do not serve every rank (one that does is the default, 0).
    if (i < cfg.served_up_ranks.size()) {
      for (uint32_t s : cfg.served_up_ranks[i]) {
        if (s < cfg.n_workers) j.served_up.push_back(static_cast<uint16_t>(s));
      }
    }
  }
  j.auth_mac = proto::join_mac(cfg.secret, nonce, j);
  return j;
}

Status accept_ack(const ClientConfig& cfg, size_t i, const proto::JoinAck& a,
                  JoinedAggregator* ja) {
  if (a.status != proto::Status::kOk) {
    return refused(name(cfg, i) + " refused Join: " + std::string(proto::status_name(a.status)));
  }
  if (a.granted_slots == 0 || a.payload_bytes == 0 || a.payload_bytes > cfg.payload_bytes ||
      a.ports.empty()) {
    return refused(name(cfg, i) + " sent an invalid JoinAck: " + proto::to_string(ControlMsg{a}));
  }
  for (uint16_t p : a.ports) {
    if (p == 0) {
      return refused(name(cfg, i) + " sent an invalid JoinAck (data port 0)");
    }
  }
  const bool det = (a.flags & proto::kJoinFlagDeterministic) != 0;
  if (cfg.deterministic && !det) {
    return refused(name(cfg, i) + " did not grant deterministic mode");
  }
  // The version the job speaks here: named by an aggregator that negotiates, else 1.
  const uint8_t version = (a.flags & proto::kJoinAckFlagVersion) != 0 ? a.version : 1;
  if (version < cfg.min_version || version > cfg.max_version) {
    return refused(name(cfg, i) + " speaks protocol version " + std::to_string(version) +
                   ", this worker " + std::to_string(cfg.min_version) + ".." +
                   std::to_string(cfg.max_version));
  }
  ja->info.protocol_version = version;
  ja->info.job_id = a.job_id;
  ja->info.granted_slots = a.granted_slots;
  ja->info.payload_bytes = a.payload_bytes;
  ja->info.deterministic = det;
  ja->info.data_ports = a.ports;
  ja->job_token = a.job_token;
  ja->data_addr = ja->ctl->peer();
  if ((a.flags & proto::kJoinFlagDataMac) != 0) {
    if (cfg.secret.empty()) {
      return invalid_argument(name(cfg, i) +
                              " signs data packets (data_mac) but this worker has no secret");
    }
    ja->mac_key = proto::derive_data_key(cfg.secret, a.job_id, a.job_token);
    ja->info.data_mac = true;
  }
  if ((a.flags & proto::kJoinAckFlagMulticast) != 0) {
    ja->group.sin_family = AF_INET;
    ja->group.sin_addr.s_addr = htonl(a.group);
    ja->group.sin_port = htons(a.group_port);
  }
  return {};
}

// Connects to aggregator i (again) and sends its Join.
Status send_join(const ClientConfig& cfg, size_t i, uint16_t udp_port, bool multicast,
                 bool versions, JoinedAggregator* ja, Retry* r) {
  proto::ServerHello h;
  CFX_TRY(hello(cfg, i, ja, &h, r));
  ja->info.endpoint = cfg.aggregators[i];
  ja->info.stripe = i;
  ja->info.weight = i < cfg.stripe_weights.size() ? cfg.stripe_weights[i] : 1;
  ja->info.address = ja->ctl->peer_address();
  ja->info.support_mask = h.support_mask;
  if (std::string err;
      !ja->ctl->send(make_join(cfg, i, udp_port, h.nonce, multicast, versions), &err)) {
    return unavailable(name(cfg, i) + ": sending Join failed: " + err);
  }
  return {};
}

// One join_all: every aggregator's connection, Join, JoinAck (and Capacity), retries and
// give-ups. Each step returns ok or the error that ends the join (with cfg.join_agree, an
// aggregator that fails is given up instead, and the join goes on without it).
class JoinRound {
 public:
  JoinRound(const ClientConfig& cfg, uint16_t udp_port, std::vector<JoinedAggregator>* out,
            std::string* refused)
      : cfg_(cfg),
        udp_port_(udp_port),
        out_(*out),
        refused_(*refused),
        n_(cfg.aggregators.size()),
        partial_(static_cast<bool>(cfg.join_agree)),
        settled_(n_, false),
        left_(n_),
        // An aggregator older than multicast (SPEC §8) answers the multicast Join flags with
        // Error{bad_message}; in auto mode such an aggregator is joined again without them.
        retried_(n_, cfg.multicast != MulticastMode::kAuto),
        unicast_(n_, false),
        versions_(n_, true),
        got_ack_(n_, false) {
    out_.clear();
    out_.resize(n_);
    refused_.clear();
    // Every rank's JoinAck (and the Capacity that follows it when asked for) within the join
    // timeout, connections tried again included; the aggregator answers join_timeout itself, we
    // allow 1 s more.
    const int64_t start = now_ns();
    deadline_ = start +
                std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.join_timeout).count() +
                1'000'000'000;
    const int64_t refused_budget =
        std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.connect_timeout).count();
    for (size_t i = 0; i < n_; ++i) {
      const uint64_t seed = (uint64_t{cfg.rank} << 32) ^ (uint64_t{i} << 20) ^
                            static_cast<uint64_t>(start) ^ reinterpret_cast<uintptr_t>(out);
      retry_.push_back(Retry{ConnectBackoff(start, deadline_, refused_budget, seed), start});
    }
  }

  Status run() {
    for (size_t i = 0; i < n_; ++i) {
      CFX_TRY(fail(i, send_join(cfg_, i, udp_port_, true, true, &out_[i], &retry_[i])));
    }
    while (left_ > 0) {
      for (size_t i = 0; i < n_; ++i) CFX_TRY(drain(i));
      give_up_what_peers_left_out();
      if (left_ == 0) break;
      const int64_t wait_ns = deadline_ - now_ns();
      if (wait_ns <= 0) return time_out();
      wait(wait_ns);
    }
    return {};
  }

 private:
  // With partial joins, gives aggregator i up (true); else false: err ends the join.
  bool give_up(size_t i, const std::string& why) {
    if (!partial_) return false;
    out_[i].ctl.reset();
    if (!settled_[i]) {
      settled_[i] = true;
      --left_;
      refused_ += (refused_.empty() ? "" : "; ") + why;
    }
    return true;
  }

  // The outcome of a step for aggregator i: ok when it succeeded or when i was given up for
  // its error (the join goes on), else the error.
  Status fail(size_t i, Status st) {
    if (st.ok() || give_up(i, st.message())) return {};
    return st;
  }

  // Every buffered frame of aggregator i, before the round sleeps in poll().
  Status drain(size_t i) {
    JoinedAggregator& ja = out_[i];
    while (!settled_[i]) {
      ControlMsg m;
      std::string err;
      const ControlChannel::Rx rx = ja.ctl->poll_message(&m, &err);
      if (rx == ControlChannel::Rx::kNone) break;
      if (rx == ControlChannel::Rx::kClosed && !got_ack_[i]) {
        // Closed or reset with no answer to the Join: the aggregator shed the connection
        // before it read the Join (its limits evicted it). Join again on a new one.
        Status st = back_off(cfg_, ConnectFailure::kDropped,
                             unavailable(name(cfg_, i) + " during Join: " + err), &retry_[i]);
        if (st.ok())
          st = send_join(cfg_, i, udp_port_, !unicast_[i], versions_[i], &ja, &retry_[i]);
        if (!st.ok()) return fail(i, std::move(st));
        continue;
      }
      if (rx != ControlChannel::Rx::kMessage) {
        return fail(i, (rx == ControlChannel::Rx::kClosed ? unavailable : refused)(
                           name(cfg_, i) + " during Join: " + err));
      }
      bool joined_again = false;
      if (Status st = handle(i, m, &joined_again); !st.ok()) return fail(i, std::move(st));
      if (joined_again) continue;
      if (got_ack_[i] && (ja.info.capacity_known || !cfg_.capacity)) {
        settled_[i] = true;
        --left_;
      }
    }
    return {};
  }

  // One message from aggregator i during the join; *joined_again: it was joined again for
  // unicast (the message is consumed, nothing settled).
  Status handle(size_t i, const ControlMsg& m, bool* joined_again) {
    JoinedAggregator& ja = out_[i];
    if (const auto* a = std::get_if<proto::JoinAck>(&m)) {
      Status st = accept_ack(cfg_, i, *a, &ja);
      if (st.ok()) got_ack_[i] = true;
      return st;
    }
    if (const auto* c = std::get_if<proto::Capacity>(&m); c && got_ack_[i]) {
      ja.info.capacity_known = true;
      ja.info.line_mbps = c->line_mbps;
      ja.info.max_mbps = c->max_mbps;
      ja.info.share_mbps = c->share_mbps;
      ja.info.threads = c->threads;
      return {};
    }
    if (const auto* e = std::get_if<proto::Error>(&m)) {
      if (e->status == proto::Status::kBadMessage && versions_[i] && cfg_.min_version <= 1) {
        // Older than version negotiation (SPEC §1): join again without the extension (the
        // job then speaks version 1 there).
        versions_[i] = false;
        if (cfg_.log) {
          cfg_.log(LogLevel::kInfo, name(cfg_, i) + " does not negotiate versions (" +
                                        error_text(*e) + "): joining it again for version 1");
        }
        *joined_again = true;
        return send_join(cfg_, i, udp_port_, !unicast_[i], false, &ja, &retry_[i]);
      }
      if (e->status != proto::Status::kBadMessage || retried_[i]) {
        return refused(name(cfg_, i) + " refused Join: " + error_text(*e));
      }
      retried_[i] = true;
      if (cfg_.log) {
        cfg_.log(LogLevel::kInfo, name(cfg_, i) + " does not know multicast (" + error_text(*e) +
                                      "): joining it again for unicast");
      }
      unicast_[i] = true;
      *joined_again = true;
      return send_join(cfg_, i, udp_port_, false, versions_[i], &ja, &retry_[i]);
    }
    if (const auto* hb = std::get_if<proto::Heartbeat>(&m)) {
      std::string unused;  // a failed send shows as the connection closing next
      ja.ctl->send(proto::HeartbeatAck{hb->time_ns}, &unused);
      return {};
    }
    if (const auto* s = std::get_if<proto::Shutdown>(&m)) {
      return unavailable(name(cfg_, i) + " is shutting down (reason " + std::to_string(s->reason) +
                         ")");
    }
    if (!std::holds_alternative<proto::HeartbeatAck>(m)) {
      return refused(name(cfg_, i) + ": unexpected " +
                     std::string(proto::msg_type_name(proto::msg_type(m))) + " during Join");
    }
    return {};
  }

  // Another rank's outcome: an aggregator it could not join is left out on every rank, so
  // waiting for its JoinAck here (which may never come) is pointless.
  void give_up_what_peers_left_out() {
    uint64_t alive = 0;
    if (left_ == 0 || !cfg_.join_peers || !cfg_.join_peers(&alive)) return;
    for (size_t i = 0; i < n_; ++i) {
      if (!settled_[i] && (i >= 64 || ((alive >> i) & 1) == 0)) {
        give_up(i, name(cfg_, i) + ": given up, another rank could not join it");
      }
    }
  }

  Status time_out() {
    for (size_t i = 0; i < n_; ++i) {
      if (settled_[i]) continue;
      CFX_TRY(fail(i, timed_out(name(cfg_, i) + ": no JoinAck within " +
                                std::to_string(cfg_.join_timeout.count()) +
                                " ms (not every rank joined?)")));
    }
    return {};
  }

  void wait(int64_t wait_ns) {
    std::vector<pollfd> fds;
    for (size_t i = 0; i < n_; ++i) {
      if (!settled_[i]) fds.push_back({out_[i].ctl->fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(),
           static_cast<int>(std::min<int64_t>(wait_ns / 1'000'000 + 1, 100)));
  }

  const ClientConfig& cfg_;
  const uint16_t udp_port_;
  std::vector<JoinedAggregator>& out_;
  std::string& refused_;
  const size_t n_;
  const bool partial_;         // cfg.join_agree: give an aggregator up instead of failing the join
  std::vector<bool> settled_;  // answered or given up
  size_t left_;
  std::vector<bool> retried_;
  std::vector<bool> unicast_;   // joined again without the multicast flags
  std::vector<bool> versions_;  // the Join offers the versions extension (not to an old daemon)
  std::vector<bool> got_ack_;
  std::vector<Retry> retry_;
  int64_t deadline_ = 0;
};

}  // namespace

Status join_all(const ClientConfig& cfg, uint16_t udp_port, std::vector<JoinedAggregator>* out,
                std::string* refused) {
  return JoinRound(cfg, udp_port, out, refused).run();
}

}  // namespace conflux::client
