// SPDX-License-Identifier: Apache-2.0
// Control plane, protocol half: framing, message handlers, Join authentication, answers.
#include <algorithm>

#include "aggregator/control/control_plane.h"
#include "conflux/protocol/data.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

constexpr auto kCloseGrace = std::chrono::seconds(1);

ControlErrorReason reason_of(proto::ControlParse p) {
  using P = proto::ControlParse;
  switch (p) {
    case P::kBadMagic:
      return ControlErrorReason::kBadMagic;
    case P::kBadVersion:
      return ControlErrorReason::kBadVersion;
    case P::kBadType:
      return ControlErrorReason::kBadType;
    case P::kTooLong:
      return ControlErrorReason::kTooLong;
    case P::kBadLength:
      return ControlErrorReason::kBadLength;
    case P::kBadField:
      return ControlErrorReason::kBadField;
    case P::kReservedNonZero:
      return ControlErrorReason::kReservedNonZero;
    default:
      return ControlErrorReason::kUnexpectedMessage;
  }
}

// Compares MACs without an early exit.
bool same_mac(uint64_t a, uint64_t b) { return (a ^ b) == 0; }

}  // namespace

std::string_view control_error_name(ControlErrorReason r) {
  switch (r) {
    case ControlErrorReason::kBadMagic:
      return "bad_magic";
    case ControlErrorReason::kBadVersion:
      return "bad_version";
    case ControlErrorReason::kBadType:
      return "bad_type";
    case ControlErrorReason::kTooLong:
      return "too_long";
    case ControlErrorReason::kBadLength:
      return "bad_length";
    case ControlErrorReason::kBadField:
      return "bad_field";
    case ControlErrorReason::kReservedNonZero:
      return "reserved_nonzero";
    case ControlErrorReason::kUnexpectedMessage:
      return "unexpected_message";
    case ControlErrorReason::kCount:
      break;
  }
  return "unknown";
}

std::string_view refuse_reason_name(RefuseReason r) {
  switch (r) {
    case RefuseReason::kTotalLimit:
      return "total_limit";
    case RefuseReason::kAddrLimit:
      return "addr_limit";
    case RefuseReason::kNoFds:
      return "no_fds";
    case RefuseReason::kCount:
      break;
  }
  return "unknown";
}

void ControlPlane::parse_frames(Connection& c) {
  size_t pos = 0;
  while (c.state != Connection::State::kClosing && !c.dead) {
    proto::ControlMsg m;
    size_t used = 0;
    const auto r = proto::parse_control(std::span(c.rbuf).subspan(pos), &m, &used);
    if (r == proto::ControlParse::kNeedMore) break;
    if (r != proto::ControlParse::kOk) {
      const auto status = r == proto::ControlParse::kBadVersion ? proto::Status::kVersionMismatch
                                                                : proto::Status::kBadMessage;
      fail(c, status, reason_of(r),
           fmt::format("malformed control frame: {}", proto::control_parse_name(r)));
      break;
    }
    pos += used;
    handle(c, m);
  }
  if (c.state == Connection::State::kClosing) {
    c.rbuf.clear();
  } else {
    c.rbuf.erase(c.rbuf.begin(), c.rbuf.begin() + static_cast<ptrdiff_t>(pos));
  }
}

void ControlPlane::handle(Connection& c, proto::ControlMsg& m) {
  using S = Connection::State;
  if (auto* j = std::get_if<proto::Join>(&m)) {
    if (c.state != S::kHello) {
      fail(c, proto::Status::kBadMessage, ControlErrorReason::kUnexpectedMessage,
           "Join on a connection that already joined");
      return;
    }
    handle_join(c, *j);
  } else if (auto* hb = std::get_if<proto::Heartbeat>(&m)) {
    send(c, proto::HeartbeatAck{hb->time_ns});
  } else if (std::holds_alternative<proto::MulticastAck>(m) && c.state == S::kMember) {
    multicast_.on_ack(c.job_id, c.rank, *this);
  } else if (auto* dd = std::get_if<proto::DirectDown>(&m);
             dd != nullptr && c.state == S::kMember) {
    // A child aggregator's members agreed on their group (SPEC.md §7, results straight down).
    if (const Status st = manager_.on_direct_down(c.job_key, c.rank, *dd); !st.ok()) {
      fail(c, proto::Status::kBadMessage, ControlErrorReason::kUnexpectedMessage, st.message());
    }
  } else if (std::holds_alternative<proto::HeartbeatAck>(m)) {
    // Answer to our Heartbeat: last_rx was refreshed on receipt; nothing else to do.
  } else if (std::holds_alternative<proto::Leave>(m)) {
    if (c.state == S::kMember) spdlog::info("job {} rank {} left", c.job_id, c.rank);
    c.left = true;
    forget_membership(c);
    c.state = S::kClosing;
    c.close_deadline = Clock::now() + kCloseGrace;
    flush(c);
  } else {
    fail(c, proto::Status::kBadMessage, ControlErrorReason::kUnexpectedMessage,
         fmt::format("unexpected {} from a worker", proto::msg_type_name(proto::msg_type(m))));
  }
}

void ControlPlane::handle_join(Connection& c, const proto::Join& j) {
  counters_.joins_total.inc();
  c.job_key = j.job_key;
  c.rank = j.rank;
  c.wants_capacity = (j.flags & proto::kJoinFlagCapacity) != 0;
  // Version negotiation (SPEC.md §1): the highest version both speak; a Join without the
  // versions extension speaks version 1.
  const bool told = (j.flags & proto::kJoinFlagVersions) != 0;
  const uint8_t lo = told ? j.min_version : 1, hi = told ? j.max_version : 1;
  const uint8_t common_lo = std::max(lo, proto::kMinProtocolVersion);
  const uint8_t common_hi = std::min(hi, proto::kMaxProtocolVersion);
  if (common_lo > common_hi) {
    fail(c, proto::Status::kVersionMismatch, ControlErrorReason::kBadVersion,
         fmt::format("no common protocol version: the worker speaks {}..{}, this confluxd {}..{}",
                     lo, hi, proto::kMinProtocolVersion, proto::kMaxProtocolVersion));
    return;
  }
  c.told_versions = told;
  c.version = common_hi;
  if (stopping_.load(std::memory_order_relaxed) || draining_) {
    proto::JoinAck ack;
    ack.status = proto::Status::kShuttingDown;
    deliver(c.id, ack);
    return;
  }
  const std::optional<uint32_t> tenant = authenticate(c, j);
  if (!tenant) {
    if (uint64_t s = 0; may_log(LogKind::kJoin, &s)) {
      spdlog::warn(
          "control connection {}: Join for job key {:016x} rank {} failed authentication ({} "
          "similar suppressed)",
          c.id, j.job_key, j.rank, s);
    }
    proto::JoinAck ack;
    ack.status = proto::Status::kAuthFailed;
    deliver(c.id, ack);
    return;
  }
  c.state = Connection::State::kPending;
  mark_joined(c);
  manager_.on_join(c.id, j, *tenant, c.peer, Clock::now(), *this);
}

std::optional<uint32_t> ControlPlane::authenticate(const Connection& c,
                                                   const proto::Join& j) const {
  if (!cfg_.auth_required()) return kSharedTenant;
  // The shared secret, then each tenant's; within secret_overlap_s of a reload that changed
  // them, the ones before it the same way.
  const auto n = static_cast<uint32_t>(cfg_.tenants.size());
  for (const uint32_t generation : {0u, kPreviousSecret}) {
    if (generation != 0 && !previous_secrets_valid()) break;
    for (uint32_t t = kSharedTenant; t <= n; ++t) {
      const std::string& secret = manager_.tenant_secret(t | generation);
      if (!secret.empty() && same_mac(j.auth_mac, proto::join_mac(secret, c.nonce, j))) {
        return t | generation;
      }
    }
  }
  return std::nullopt;
}

void ControlPlane::deliver(ConnId conn, const proto::JoinAck& ack) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  Connection& c = it->second;
  counters_.join_acks[static_cast<int>(ack.status)].inc();
  if (ack.status == proto::Status::kOk) {
    c.state = Connection::State::kMember;
    c.job_id = ack.job_id;
    c.last_heartbeat = Clock::now();
    if (c.told_versions) {
      proto::JoinAck versioned = ack;
      versioned.flags |= proto::kJoinAckFlagVersion;
      versioned.version = c.version;
      send(c, versioned);
    } else {
      send(c, ack);
    }
    if (c.wants_capacity) {
      proto::Capacity cap = capacity_;
      cap.share_mbps = manager_.share_mbps(c.job_key);
      send(c, cap);
    }
    return;
  }
  if (uint64_t s = 0; may_log(LogKind::kJoin, &s)) {
    spdlog::info(
        "control connection {}: Join (job key {:016x} rank {}) answered {} ({} similar "
        "suppressed)",
        conn, c.job_key, c.rank, proto::status_name(ack.status), s);
  }
  // The JobManager no longer tracks this connection: close without telling it.
  c.state = Connection::State::kClosing;
  c.close_deadline = Clock::now() + kCloseGrace;
  send(c, ack);
}

void ControlPlane::end_member(ConnId conn, proto::Status status, const std::string& text) {
  auto it = conns_.find(conn);
  if (it == conns_.end() || it->second.state != Connection::State::kMember) return;
  Connection& c = it->second;
  forget_membership(c);
  c.state = Connection::State::kClosing;
  c.close_deadline = Clock::now() + kCloseGrace;
  send(c, proto::Error{status, text});
}

void ControlPlane::send_to(ConnId conn, const proto::ControlMsg& m) {
  auto it = conns_.find(conn);
  if (it != conns_.end() && it->second.state == Connection::State::kMember) send(it->second, m);
}

void ControlPlane::send_grant(ConnId conn, uint32_t share_mbps, proto::CapacityReason why) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  Connection& c = it->second;
  if (c.state != Connection::State::kMember || !c.wants_capacity || c.dead || c.write_shut) return;
  proto::Capacity cap = capacity_;
  cap.share_mbps = share_mbps;
  cap.reason = why;
  // Queued, flushed by the event loop: called while the JobManager walks its jobs, so no
  // write error may come back into it from here.
  proto::encode_control(cap, c.wbuf);
  watch_write(c, true);
}

void ControlPlane::send(Connection& c, const proto::ControlMsg& m) {
  if (c.dead || c.write_shut) return;
  proto::encode_control(m, c.wbuf);
  flush(c);
}

void ControlPlane::fail(Connection& c, proto::Status s, ControlErrorReason why,
                        const std::string& text) {
  counters_.errors[static_cast<int>(why)].inc();
  if (uint64_t s = 0; may_log(LogKind::kProtocol, &s)) {
    spdlog::warn("control connection {}: {}; closing ({} similar suppressed)", c.id, text, s);
  }
  forget_membership(c);
  c.state = Connection::State::kClosing;
  c.close_deadline = Clock::now() + kCloseGrace;
  send(c, proto::Error{s, text});
}

size_t ControlPlane::set_max_mbps(uint32_t mbps) {
  const uint32_t was = capacity_.max_mbps;
  capacity_.max_mbps = mbps;
  derive_share();
  counters_.max_mbps.set(mbps);
  manager_.set_capacity(capacity_.share_mbps);
  apply_egress_cap();
  const size_t told = manager_.regrant_all(proto::CapacityReason::kCapChanged, *this);
  spdlog::info("max_mbps {} -> {} Mbit/s (capacity now {} Mbit/s); {} job(s) told", was, mbps,
               capacity_.share_mbps, told);
  return told;
}

void ControlPlane::apply_egress_cap() {
  const int64_t cap = capacity_.max_mbps != 0      ? capacity_.max_mbps
                      : manager_.active_jobs() > 1 ? capacity_.line_mbps
                                                   : 0;
  if (cap == egress_cap_mbps_) return;
  dataplane_.set_max_mbps(cap);
  if (capacity_.max_mbps == 0) {
    spdlog::info(
        "{} live jobs: result egress {}", manager_.active_jobs(),
        cap == 0 ? std::string("unpaced") : fmt::format("paced to the line rate, {} Mbit/s", cap));
  }
  egress_cap_mbps_ = cap;
}

size_t ControlPlane::set_draining(bool on) {
  const bool was = draining_;
  draining_ = on;
  counters_.draining.set(on ? 1 : 0);
  if (!on) {
    if (was) spdlog::info("undrained: taking Joins again");
    return 0;
  }
  manager_.cancel_pending(proto::Status::kShuttingDown, *this);
  size_t told = 0;
  for (auto& [id, c] : conns_) {
    if (c.dead || c.kind != Connection::Kind::kControl || c.state != Connection::State::kMember) {
      continue;
    }
    forget_membership(c);
    c.state = Connection::State::kClosing;
    c.close_deadline = Clock::now() + kCloseGrace;
    send(c, proto::Shutdown{1});
    ++told;
  }
  spdlog::info("drained: refusing Joins; Shutdown{{drain}} to {} member(s)", told);
  return told;
}

void ControlPlane::forget_membership(Connection& c) {
  using S = Connection::State;
  if (c.state == S::kPending || c.state == S::kMember) {
    manager_.on_gone(c.id, c.job_key, c.rank, c.state == S::kMember, !c.left, *this);
  }
}

}  // namespace conflux::agg
