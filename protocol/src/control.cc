// SPDX-License-Identifier: Apache-2.0
#include "conflux/protocol/control.h"

#include <algorithm>
#include <cstdio>

#include "conflux/protocol/data.h"
#include "wire_cursor.h"

namespace conflux::proto {
namespace {

void encode_body(const ServerHello& m, Writer& w) {
  w.put<uint64_t>(m.nonce);
  w.put<uint64_t>(m.support_mask);
  w.put<uint32_t>(m.max_payload_bytes);
  w.put<uint32_t>(m.max_slots_per_job);
  w.put<uint8_t>(m.auth_required);
  w.put<uint8_t>(0);
  w.put<uint16_t>(0);
}
// served_up (SPEC.md §7): only below a counted level (served != 0), and each level above
// serves at least the ranks of the one below it and at most the job.
bool served_up_ok(const Join& m) {
  if (m.served_up.empty()) return true;
  if (m.served == 0) return false;
  uint32_t below = m.served;
  for (uint16_t s : m.served_up) {
    if (s < below || s > m.n_workers) return false;
    below = s;
  }
  return true;
}

void encode_body(const Join& m, Writer& w) {
  w.put<uint64_t>(m.job_key);
  w.put<uint32_t>(m.n_workers);
  w.put<uint32_t>(m.rank);
  w.put<uint32_t>(m.udp_addr);
  w.put<uint16_t>(m.udp_port);
  w.put<uint8_t>(m.flags);
  w.put<uint8_t>(0);
  w.put<uint32_t>(m.requested_slots);
  w.put<uint32_t>(m.payload_bytes);
  w.put<uint32_t>(m.join_timeout_ms);
  w.put<uint64_t>(m.auth_mac);
  if (m.has_tree_extension()) {
    w.put<uint16_t>(m.weight);
    w.put<uint16_t>(m.served);
    w.put<uint16_t>(static_cast<uint16_t>(m.data_ports.size()));
    for (uint16_t p : m.data_ports) w.put<uint16_t>(p);
    if (!m.served_up.empty()) {  // absent (not 0) when empty: depth-2 Joins keep their length
      w.put<uint16_t>(static_cast<uint16_t>(m.served_up.size()));
      for (uint16_t s : m.served_up) w.put<uint16_t>(s);
    }
  }
  if ((m.flags & kJoinFlagVersions) != 0) {
    w.put<uint8_t>(m.min_version);
    w.put<uint8_t>(m.max_version);
    w.put<uint16_t>(0);
  }
}
void encode_body(const JoinAck& m, Writer& w) {
  w.put<uint32_t>(static_cast<uint32_t>(m.status));
  w.put<uint32_t>(m.job_id);
  w.put<uint64_t>(m.job_token);
  w.put<uint32_t>(m.granted_slots);
  w.put<uint32_t>(m.payload_bytes);
  w.put<uint8_t>(m.flags);
  w.put<uint8_t>(0);
  w.put<uint16_t>(static_cast<uint16_t>(m.ports.size()));
  for (uint16_t p : m.ports) w.put<uint16_t>(p);
  if ((m.flags & kJoinAckFlagMulticast) != 0) {
    w.put<uint32_t>(m.group);
    w.put<uint16_t>(m.group_port);
    w.put<uint16_t>(0);
  }
  if ((m.flags & kJoinAckFlagVersion) != 0) {
    w.put<uint8_t>(m.version);
    w.put<uint8_t>(0);
    w.put<uint16_t>(0);
  }
}
void encode_body(const Leave&, Writer&) {}
void encode_body(const Heartbeat& m, Writer& w) { w.put<uint64_t>(m.time_ns); }
void encode_body(const HeartbeatAck& m, Writer& w) { w.put<uint64_t>(m.time_ns); }
void encode_body(const Error& m, Writer& w) {
  const size_t n = m.text.size() < kMaxErrorText ? m.text.size() : kMaxErrorText;
  w.put<uint32_t>(static_cast<uint32_t>(m.status));
  w.put<uint16_t>(static_cast<uint16_t>(n));
  w.bytes(m.text.data(), n);
}
void encode_body(const Shutdown& m, Writer& w) { w.put<uint32_t>(m.reason); }
void encode_body(const Capacity& m, Writer& w) {
  w.put<uint32_t>(m.line_mbps);
  w.put<uint32_t>(m.max_mbps);
  w.put<uint32_t>(m.share_mbps);
  w.put<uint16_t>(m.threads);
  w.put<uint8_t>(static_cast<uint8_t>(m.reason));
  w.put<uint8_t>(0);
}
void encode_body(const MulticastAck&, Writer&) {}
void encode_body(const MulticastMode& m, Writer& w) {
  w.put<uint8_t>(m.multicast ? 1 : 0);
  w.put<uint8_t>(static_cast<uint8_t>(m.reason));
  w.put<uint16_t>(0);
  w.put<uint32_t>(m.rank);
}

void encode_body(const ResultSource& m, Writer& w) {
  w.put<uint32_t>(m.addr);
  w.put<uint16_t>(static_cast<uint16_t>(m.ports.size()));
  for (uint16_t p : m.ports) w.put<uint16_t>(p);
}
void encode_body(const DirectDown& m, Writer& w) {
  w.put<uint32_t>(m.group);
  w.put<uint16_t>(m.group_port);
  w.put<uint16_t>(m.flags);
  w.put<uint32_t>(m.job_id);
  w.put<uint64_t>(m.job_token);
}

bool is_multicast_group(uint32_t a) { return (a >> 28) == 0xE; }

// A multicast mode needs a multicast reason and a unicast one a unicast reason.
bool valid_multicast_mode(uint8_t mode, uint8_t reason) {
  if (mode == 1) {
    return reason == static_cast<uint8_t>(MulticastReason::kConfirmed) ||
           reason == static_cast<uint8_t>(MulticastReason::kForced);
  }
  return mode == 0 && (reason == static_cast<uint8_t>(MulticastReason::kNoConfirm) ||
                       reason == static_cast<uint8_t>(MulticastReason::kSendFailed));
}

bool valid_status(uint32_t s) { return s <= static_cast<uint32_t>(Status::kInternal); }

ControlParse decode_body(MsgType t, Reader& whole, ControlMsg* out) {
  Reader& r = whole;
  switch (t) {
    case MsgType::kServerHello: {
      ServerHello m;
      m.nonce = r.get<uint64_t>();
      m.support_mask = r.get<uint64_t>();
      m.max_payload_bytes = r.get<uint32_t>();
      m.max_slots_per_job = r.get<uint32_t>();
      m.auth_required = r.get<uint8_t>();
      const uint32_t reserved = r.get<uint8_t>() | r.get<uint16_t>();
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (reserved != 0) return ControlParse::kReservedNonZero;
      if (m.auth_required > 1 || m.max_payload_bytes == 0 ||
          m.max_payload_bytes > kMaxPayloadBytes ||
          (m.support_mask >> (kNumDTypes * kNumOps)) != 0) {
        return ControlParse::kBadField;
      }
      *out = m;
      return ControlParse::kOk;
    }
    case MsgType::kJoin: {
      Join m;
      // The versions extension (kJoinFlagVersions) closes the body: taken off first, so that
      // the tree extension before it keeps its length rule. flags is byte 22 of the body.
      const std::span<const uint8_t> body = whole.rest();
      std::span<const uint8_t> rest = body;
      uint16_t versions_reserved = 0;
      if (body.size() > 22 && (body[22] & kJoinFlagVersions) != 0) {
        if (body.size() < 48) return ControlParse::kBadLength;
        Reader v(body.subspan(body.size() - 4));
        m.min_version = v.get<uint8_t>();
        m.max_version = v.get<uint8_t>();
        versions_reserved = v.get<uint16_t>();
        rest = body.first(body.size() - 4);
      }
      Reader r(rest);  // shadows the whole body's reader
      m.job_key = r.get<uint64_t>();
      m.n_workers = r.get<uint32_t>();
      m.rank = r.get<uint32_t>();
      m.udp_addr = r.get<uint32_t>();
      m.udp_port = r.get<uint16_t>();
      m.flags = r.get<uint8_t>();
      const uint8_t reserved = r.get<uint8_t>();
      m.requested_slots = r.get<uint32_t>();
      m.payload_bytes = r.get<uint32_t>();
      m.join_timeout_ms = r.get<uint32_t>();
      m.auth_mac = r.get<uint64_t>();
      if (!r.ok_and_done()) {  // the tree extension (SPEC.md §7)
        m.weight = r.get<uint16_t>();
        m.served = r.get<uint16_t>();
        const uint16_t n_ports = r.get<uint16_t>();
        if (n_ports > kMaxPorts) return ControlParse::kBadField;
        for (uint16_t i = 0; i < n_ports; ++i) m.data_ports.push_back(r.get<uint16_t>());
        if (r.more()) {  // served_up: the levels above (SPEC.md §7), never empty here
          const uint16_t n_up = r.get<uint16_t>();
          if (n_up == 0 || n_up > kMaxTreeLevelsUp) return ControlParse::kBadField;
          for (uint16_t i = 0; i < n_up; ++i) m.served_up.push_back(r.get<uint16_t>());
        }
        if (!r.ok_and_done()) return ControlParse::kBadLength;
        if (!m.has_tree_extension()) return ControlParse::kBadField;  // defaults: must be absent
      }
      if (reserved != 0 || versions_reserved != 0) return ControlParse::kReservedNonZero;
      if ((m.flags & kJoinFlagVersions) != 0 &&
          (m.min_version == 0 || m.min_version > m.max_version)) {
        return ControlParse::kBadField;
      }
      if (m.n_workers == 0 || m.n_workers > kMaxWorkersPerJob || m.rank >= m.n_workers ||
          m.udp_port == 0 || (m.flags & ~kJoinKnownFlags) != 0 ||
          ((m.flags & kJoinFlagMulticastNoProbe) != 0 && (m.flags & kJoinFlagMulticast) == 0) ||
          m.requested_slots == 0 || m.payload_bytes == 0 || m.payload_bytes > kMaxPayloadBytes ||
          m.weight == 0 || m.weight > m.n_workers || m.served > m.n_workers ||
          (m.served != 0 && m.weight > m.served) ||
          std::find(m.data_ports.begin(), m.data_ports.end(), 0) != m.data_ports.end() ||
          !served_up_ok(m)) {
        return ControlParse::kBadField;
      }
      *out = m;
      return ControlParse::kOk;
    }
    case MsgType::kJoinAck: {
      JoinAck m;
      const uint32_t status = r.get<uint32_t>();
      m.job_id = r.get<uint32_t>();
      m.job_token = r.get<uint64_t>();
      m.granted_slots = r.get<uint32_t>();
      m.payload_bytes = r.get<uint32_t>();
      m.flags = r.get<uint8_t>();
      const uint8_t reserved = r.get<uint8_t>();
      const uint16_t n_ports = r.get<uint16_t>();
      if (n_ports > kMaxPorts) return ControlParse::kBadField;
      m.ports.reserve(n_ports);
      for (uint16_t i = 0; i < n_ports; ++i) m.ports.push_back(r.get<uint16_t>());
      uint16_t reserved2 = 0, reserved3 = 0;
      if ((m.flags & kJoinAckFlagMulticast) != 0) {
        m.group = r.get<uint32_t>();
        m.group_port = r.get<uint16_t>();
        reserved2 = r.get<uint16_t>();
      }
      if ((m.flags & kJoinAckFlagVersion) != 0) {
        m.version = r.get<uint8_t>();
        reserved3 = r.get<uint8_t>();
        reserved3 |= r.get<uint16_t>();
      }
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (reserved != 0 || reserved2 != 0 || reserved3 != 0) return ControlParse::kReservedNonZero;
      if (!valid_status(status) ||
          (m.flags & ~(kJoinFlagDeterministic | kJoinAckFlagMulticast | kJoinFlagDataMac |
                       kJoinAckFlagDirectResults | kJoinAckFlagVersion)) != 0 ||
          m.version == 0) {
        return ControlParse::kBadField;
      }
      if ((m.flags & kJoinAckFlagMulticast) != 0 &&
          (!is_multicast_group(m.group) || m.group_port == 0)) {
        return ControlParse::kBadField;
      }
      m.status = static_cast<Status>(status);
      if (m.status == Status::kOk) {
        if (m.granted_slots == 0 || m.payload_bytes == 0 || m.payload_bytes > kMaxPayloadBytes ||
            m.ports.empty()) {
          return ControlParse::kBadField;
        }
        for (uint16_t p : m.ports) {
          if (p == 0) return ControlParse::kBadField;
        }
      }
      *out = std::move(m);
      return ControlParse::kOk;
    }
    case MsgType::kLeave:
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      *out = Leave{};
      return ControlParse::kOk;
    case MsgType::kHeartbeat:
    case MsgType::kHeartbeatAck: {
      const uint64_t t_ns = r.get<uint64_t>();
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (t == MsgType::kHeartbeat) {
        *out = Heartbeat{t_ns};
      } else {
        *out = HeartbeatAck{t_ns};
      }
      return ControlParse::kOk;
    }
    case MsgType::kError: {
      Error m;
      const uint32_t status = r.get<uint32_t>();
      const uint16_t n = r.get<uint16_t>();
      if (n > kMaxErrorText) return ControlParse::kBadField;
      auto text = r.bytes(n);
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (!valid_status(status)) return ControlParse::kBadField;
      m.status = static_cast<Status>(status);
      m.text.assign(text.begin(), text.end());
      *out = std::move(m);
      return ControlParse::kOk;
    }
    case MsgType::kShutdown: {
      Shutdown m;
      m.reason = r.get<uint32_t>();
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (m.reason > 1) return ControlParse::kBadField;
      *out = m;
      return ControlParse::kOk;
    }
    case MsgType::kCapacity: {
      Capacity m;
      m.line_mbps = r.get<uint32_t>();
      m.max_mbps = r.get<uint32_t>();
      m.share_mbps = r.get<uint32_t>();
      m.threads = r.get<uint16_t>();
      const uint8_t reason = r.get<uint8_t>();
      const uint8_t reserved = r.get<uint8_t>();
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (reserved != 0) return ControlParse::kReservedNonZero;
      if (m.threads == 0 || reason > static_cast<uint8_t>(CapacityReason::kCapChanged)) {
        return ControlParse::kBadField;
      }
      m.reason = static_cast<CapacityReason>(reason);
      *out = m;
      return ControlParse::kOk;
    }
    case MsgType::kMulticastAck:
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      *out = MulticastAck{};
      return ControlParse::kOk;
    case MsgType::kMulticastMode: {
      const uint8_t mode = r.get<uint8_t>();
      const uint8_t reason = r.get<uint8_t>();
      const uint16_t reserved = r.get<uint16_t>();
      MulticastMode m;
      m.rank = r.get<uint32_t>();
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (reserved != 0) return ControlParse::kReservedNonZero;
      if (!valid_multicast_mode(mode, reason) || m.rank >= kMaxWorkersPerJob ||
          (reason != static_cast<uint8_t>(MulticastReason::kNoConfirm) && m.rank != 0)) {
        return ControlParse::kBadField;
      }
      m.multicast = mode == 1;
      m.reason = static_cast<MulticastReason>(reason);
      *out = m;
      return ControlParse::kOk;
    }
    case MsgType::kResultSource: {
      ResultSource m;
      m.addr = r.get<uint32_t>();
      const uint16_t n_ports = r.get<uint16_t>();
      if (n_ports > kMaxPorts) return ControlParse::kBadField;
      for (uint16_t i = 0; i < n_ports; ++i) m.ports.push_back(r.get<uint16_t>());
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (m.addr == 0 || is_multicast_group(m.addr) || m.ports.empty() ||
          std::find(m.ports.begin(), m.ports.end(), 0) != m.ports.end()) {
        return ControlParse::kBadField;
      }
      *out = std::move(m);
      return ControlParse::kOk;
    }
    case MsgType::kDirectDown: {
      DirectDown m;
      m.group = r.get<uint32_t>();
      m.group_port = r.get<uint16_t>();
      m.flags = r.get<uint16_t>();
      m.job_id = r.get<uint32_t>();
      m.job_token = r.get<uint64_t>();
      if (!r.ok_and_done()) return ControlParse::kBadLength;
      if (!is_multicast_group(m.group) || m.group_port == 0 ||
          (m.flags & ~kDirectDownSigned) != 0) {
        return ControlParse::kBadField;
      }
      *out = m;
      return ControlParse::kOk;
    }
  }
  return ControlParse::kBadType;
}

}  // namespace

MsgType msg_type(const ControlMsg& m) {
  // Types 1..13 follow the variant's order.
  return static_cast<MsgType>(m.index() + 1);
}

std::string_view msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::kServerHello:
      return "ServerHello";
    case MsgType::kJoin:
      return "Join";
    case MsgType::kJoinAck:
      return "JoinAck";
    case MsgType::kLeave:
      return "Leave";
    case MsgType::kHeartbeat:
      return "Heartbeat";
    case MsgType::kHeartbeatAck:
      return "HeartbeatAck";
    case MsgType::kError:
      return "Error";
    case MsgType::kShutdown:
      return "Shutdown";
    case MsgType::kMulticastAck:
      return "MulticastAck";
    case MsgType::kMulticastMode:
      return "MulticastMode";
    case MsgType::kCapacity:
      return "Capacity";
    case MsgType::kResultSource:
      return "ResultSource";
    case MsgType::kDirectDown:
      return "DirectDown";
  }
  return "Unknown";
}

std::string_view capacity_reason_name(CapacityReason r) {
  switch (r) {
    case CapacityReason::kJoined:
      return "joined";
    case CapacityReason::kJobJoined:
      return "job joined";
    case CapacityReason::kJobLeft:
      return "job left";
    case CapacityReason::kCapChanged:
      return "cap changed";
  }
  return "unknown";
}

std::string_view multicast_reason_name(MulticastReason r) {
  switch (r) {
    case MulticastReason::kConfirmed:
      return "every rank received the probe";
    case MulticastReason::kForced:
      return "forced by configuration, no probe";
    case MulticastReason::kNoConfirm:
      return "a rank did not receive the probe in time";
    case MulticastReason::kSendFailed:
      return "the aggregator could not send to the group";
  }
  return "unknown";
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kAuthFailed:
      return "auth_failed";
    case Status::kBadMessage:
      return "bad_message";
    case Status::kVersionMismatch:
      return "version_mismatch";
    case Status::kJobMismatch:
      return "job_mismatch";
    case Status::kRankInUse:
      return "rank_in_use";
    case Status::kBadRank:
      return "bad_rank";
    case Status::kNoCapacity:
      return "no_capacity";
    case Status::kShuttingDown:
      return "shutting_down";
    case Status::kJoinTimeout:
      return "join_timeout";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string_view control_parse_name(ControlParse p) {
  switch (p) {
    case ControlParse::kOk:
      return "ok";
    case ControlParse::kNeedMore:
      return "need_more";
    case ControlParse::kBadMagic:
      return "bad_magic";
    case ControlParse::kBadVersion:
      return "bad_version";
    case ControlParse::kBadType:
      return "bad_type";
    case ControlParse::kTooLong:
      return "too_long";
    case ControlParse::kBadLength:
      return "bad_length";
    case ControlParse::kBadField:
      return "bad_field";
    case ControlParse::kReservedNonZero:
      return "reserved_nonzero";
  }
  return "unknown";
}

void encode_control(const ControlMsg& m, std::vector<uint8_t>& out) {
  const size_t start = out.size();
  Writer w(out);
  w.put<uint32_t>(kControlMagic);
  w.put<uint8_t>(kProtocolVersion);
  w.put<uint8_t>(static_cast<uint8_t>(msg_type(m)));
  w.put<uint16_t>(0);
  w.put<uint32_t>(0);  // length, patched below
  std::visit([&w](const auto& body) { encode_body(body, w); }, m);
  const auto body_len = static_cast<uint32_t>(out.size() - start - kControlHeaderSize);
  store_be<uint32_t>(out.data() + start + 8, body_len);
}

ControlParse parse_control(std::span<const uint8_t> buf, ControlMsg* out, size_t* consumed) {
  *consumed = 0;
  // Reject a bad magic as soon as its bytes are in, not only once a whole header is.
  for (size_t i = 0; i < 4 && i < buf.size(); ++i) {
    if (buf[i] != static_cast<uint8_t>(kControlMagic >> (24 - 8 * i))) {
      return ControlParse::kBadMagic;
    }
  }
  if (buf.size() < kControlHeaderSize) return ControlParse::kNeedMore;
  if (buf[4] != kProtocolVersion) return ControlParse::kBadVersion;
  const uint8_t type = buf[5];
  if (type < static_cast<uint8_t>(MsgType::kServerHello) ||
      type > static_cast<uint8_t>(MsgType::kDirectDown)) {
    return ControlParse::kBadType;
  }
  if (load_be<uint16_t>(buf.data() + 6) != 0) return ControlParse::kReservedNonZero;
  const uint32_t len = load_be<uint32_t>(buf.data() + 8);
  if (len > kMaxControlBody) return ControlParse::kTooLong;
  if (buf.size() < kControlHeaderSize + len) return ControlParse::kNeedMore;
  Reader r(buf.subspan(kControlHeaderSize, len));
  const ControlParse p = decode_body(static_cast<MsgType>(type), r, out);
  if (p == ControlParse::kOk) *consumed = kControlHeaderSize + len;
  return p;
}

std::string to_string(const ControlMsg& m) {
  char buf[256];
  const auto name = msg_type_name(msg_type(m));
  if (const auto* j = std::get_if<Join>(&m)) {
    std::snprintf(buf, sizeof(buf),
                  "Join{key=%016llx rank=%u/%u port=%u slots=%u payload=%u weight=%u served=%u "
                  "ports=%zu}",
                  static_cast<unsigned long long>(j->job_key), j->rank, j->n_workers, j->udp_port,
                  j->requested_slots, j->payload_bytes, j->weight, j->served, j->data_ports.size());
  } else if (const auto* a = std::get_if<JoinAck>(&m)) {
    std::snprintf(buf, sizeof(buf), "JoinAck{status=%.*s job=%u slots=%u payload=%u ports=%zu}",
                  static_cast<int>(status_name(a->status).size()), status_name(a->status).data(),
                  a->job_id, a->granted_slots, a->payload_bytes, a->ports.size());
  } else if (const auto* c = std::get_if<Capacity>(&m)) {
    // An update names its reason; the first Capacity of a job reads as it always did.
    const std::string why = c->reason == CapacityReason::kJoined
                                ? std::string()
                                : " (" + std::string(capacity_reason_name(c->reason)) + ")";
    std::snprintf(buf, sizeof(buf), "Capacity{line=%u max=%u share=%u Mbit/s threads=%u%s}",
                  c->line_mbps, c->max_mbps, c->share_mbps, c->threads, why.c_str());
  } else if (const auto* e = std::get_if<Error>(&m)) {
    std::snprintf(buf, sizeof(buf), "Error{%.*s: %.200s}",
                  static_cast<int>(status_name(e->status).size()), status_name(e->status).data(),
                  e->text.c_str());
  } else {
    std::snprintf(buf, sizeof(buf), "%.*s", static_cast<int>(name.size()), name.data());
  }
  return buf;
}

}  // namespace conflux::proto
