// SPDX-License-Identifier: Apache-2.0
// The control-plane wire format: framed binary messages over TCP.
// Frame = 12-byte header (magic, version, type, length) + body; all fields big-endian.
// See protocol/SPEC.md for every message, field and status code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace conflux::proto {

inline constexpr uint32_t kControlMagic = 0x43465843;  // "CFXC"
inline constexpr size_t kControlHeaderSize = 12;
inline constexpr uint32_t kMaxControlBody = 4096;
inline constexpr size_t kMaxErrorText = 1024;
inline constexpr size_t kMaxPorts = 256;
// The deepest reduction tree a Join can describe: levels above the receiving aggregator.
inline constexpr size_t kMaxTreeLevelsUp = 8;
inline constexpr uint32_t kMaxWorkersPerJob = 1024;

enum class MsgType : uint8_t {
  kServerHello = 1,
  kJoin = 2,
  kJoinAck = 3,
  kLeave = 4,
  kHeartbeat = 5,
  kHeartbeatAck = 6,
  kError = 7,
  kShutdown = 8,
  kMulticastAck = 9,
  kMulticastMode = 10,
  kCapacity = 11,
  kResultSource = 12,
  kDirectDown = 13,
};

// Status carried by JoinAck and Error. Stable values (SPEC.md).
enum class Status : uint32_t {
  kOk = 0,
  kAuthFailed = 1,
  kBadMessage = 2,
  kVersionMismatch = 3,
  kJobMismatch = 4,
  kRankInUse = 5,
  kBadRank = 6,
  kNoCapacity = 7,
  kShuttingDown = 8,
  kJoinTimeout = 9,
  kUnsupported = 10,
  kInternal = 11,
};
std::string_view status_name(Status s);

// Sent by the aggregator right after accepting a control connection.
struct ServerHello {
  uint64_t nonce = 0;         // fresh per connection; input to the Join MAC
  uint64_t support_mask = 0;  // bit (dtype * 4 + op) set = supported
  uint32_t max_payload_bytes = 0;
  uint32_t max_slots_per_job = 0;
  uint8_t auth_required = 0;
};

inline constexpr uint8_t kJoinFlagDeterministic = 1u << 0;
// Join: this rank can take results from a multicast group and answers the probe (SPEC §8).
inline constexpr uint8_t kJoinFlagMulticast = 1u << 1;
// Join (with kJoinFlagMulticast): multicast forced by the rank's operator, no probe.
inline constexpr uint8_t kJoinFlagMulticastNoProbe = 1u << 2;
// Join only: the worker takes Capacity messages (the aggregator sends one after JoinAck).
inline constexpr uint8_t kJoinFlagCapacity = 1u << 3;
// Join: results straight down (SPEC.md §7). From a worker (per rank): it takes ResultSource
// and accepts its group's results from the source it names. From a child aggregator: it may
// send DirectDown once its members agreed on a group.
inline constexpr uint8_t kJoinFlagDirectResults = 1u << 4;
// Join: the versions extension closes the body (SPEC.md §1 "Negotiation"): the range of
// protocol versions the worker speaks. An aggregator older than it answers Error{bad_message};
// the worker then joins again without it (and speaks version 1).
inline constexpr uint8_t kJoinFlagVersions = 1u << 5;
inline constexpr uint8_t kJoinKnownFlags = kJoinFlagDeterministic | kJoinFlagMulticast |
                                           kJoinFlagMulticastNoProbe | kJoinFlagCapacity |
                                           kJoinFlagDirectResults | kJoinFlagVersions;
// JoinAck, to a Join with kJoinFlagVersions: the version extension closes the body, the version
// the job speaks on this aggregator (the highest both sides speak).
inline constexpr uint8_t kJoinAckFlagVersion = 1u << 5;
// The protocol versions this build speaks (a range: an aggregator and a plugin of different
// builds agree at Join on the highest version both speak).
inline constexpr uint8_t kMinProtocolVersion = 1;
inline constexpr uint8_t kMaxProtocolVersion = 1;
// JoinAck: the job has a multicast group on this aggregator (JoinAck::group, group_port).
inline constexpr uint8_t kJoinAckFlagMulticast = 1u << 1;
// JoinAck only: the job's data packets carry the data MAC (data.h kFlagMac, SPEC.md §6).
inline constexpr uint8_t kJoinFlagDataMac = 1u << 2;
// JoinAck only, to a child aggregator whose Join set kJoinFlagDirectResults: this parent takes
// DirectDown from it (SPEC.md §7 "Results straight down").
inline constexpr uint8_t kJoinAckFlagDirectResults = 1u << 4;  // the Join's bit

// Worker asks to join job `job_key` as `rank` of `n_workers`.
struct Join {
  uint64_t job_key = 0;          // chosen by the workers (e.g. NCCL commId); same on all ranks
  uint32_t n_workers = 0;        // 1..kMaxWorkersPerJob
  uint32_t rank = 0;             // 0..n_workers-1, becomes the contributor id
  uint32_t udp_addr = 0;         // IPv4 (host order) for results; 0 = the TCP peer's address
  uint16_t udp_port = 0;         // UDP port the worker receives results on, != 0
  uint8_t flags = 0;             // kJoinFlag*
  uint32_t requested_slots = 0;  // window the worker wants, 1..
  uint32_t payload_bytes = 0;    // payload per packet, 1..kMaxPayloadBytes
  uint32_t join_timeout_ms = 0;  // how long the daemon waits for the other ranks
  uint64_t auth_mac = 0;         // join_mac(secret, hello.nonce, *this); 0 when no auth
  // Tree extension (SPEC.md §7), sent only when a field differs from its default.
  uint16_t weight = 1;  // ranks of the job this member contributes for (a child aggregator: k)
  uint16_t served = 0;  // ranks of the job that join this aggregator in all; 0 = n_workers
  std::vector<uint16_t> data_ports{};  // a child aggregator: its data ports (slot s on [s % n])
  // Trees deeper than 2 (SPEC.md §7): `served` of each aggregator above this one that the
  // member's ranks reach, nearest first; the receiver passes it on, less its first entry, as
  // its own Join's `served` and `served_up` when it joins its parent. Empty below a root.
  std::vector<uint16_t> served_up{};
  // With kJoinFlagVersions: the versions the worker speaks, min_version <= max_version.
  uint8_t min_version = 1;
  uint8_t max_version = 1;

  bool has_tree_extension() const {
    return weight != 1 || served != 0 || !data_ports.empty() || !served_up.empty();
  }
};

// Answer to Join, sent to every rank once all n_workers have joined (or at once on error).
struct JoinAck {
  Status status = Status::kOk;
  uint32_t job_id = 0;
  uint64_t job_token = 0;
  uint32_t granted_slots = 0;   // window per worker on this aggregator (<= requested)
  uint32_t payload_bytes = 0;   // payload per packet (<= requested)
  uint8_t flags = 0;            // kJoinFlagDeterministic if the job runs deterministic
  std::vector<uint16_t> ports;  // UDP ports; slot s is served by ports[s % ports.size()]
  // With kJoinAckFlagMulticast (appended after the ports on the wire, SPEC §8):
  uint32_t group = 0;  // IPv4 multicast group (host order), in 224.0.0.0/4
  uint16_t group_port = 0;
  // With kJoinAckFlagVersion (the last 4 bytes on the wire): the version the job speaks.
  uint8_t version = 1;
};

struct Leave {};
struct Heartbeat {
  uint64_t time_ns = 0;
};
struct HeartbeatAck {
  uint64_t time_ns = 0;
};  // echoes Heartbeat::time_ns
struct Error {
  Status status = Status::kInternal;
  std::string text;  // <= kMaxErrorText bytes, UTF-8, for logs
};
struct Shutdown {
  uint32_t reason = 0;
};  // 0 = daemon stopping, 1 = drain
// Why a Capacity was sent (SPEC.md §3). Stable values.
enum class CapacityReason : uint8_t {
  kJoined = 0,      // right after this job's JoinAck
  kJobJoined = 1,   // an update: another job joined the aggregator
  kJobLeft = 2,     // an update: another job left it
  kCapChanged = 3,  // an update: the operator changed the daemon's max_mbps (conflux throttle)
};
std::string_view capacity_reason_name(CapacityReason r);

// What the aggregator can carry (SPEC.md §3), sent after an ok JoinAck to a worker that
// set kJoinFlagCapacity, and again (an update of share_mbps) whenever the job's grant
// changes while it runs. 0 in a rate field = unknown (line) or none (cap).
struct Capacity {
  uint32_t line_mbps = 0;   // NIC line rate
  uint32_t max_mbps = 0;    // configured cap on the result bytes it sends
  uint32_t share_mbps = 0;  // what this job may use now (its grant)
  uint16_t threads = 0;     // dataplane threads, >= 1
  CapacityReason reason = CapacityReason::kJoined;
};

// Worker -> aggregator: this rank received the job's multicast probe (SPEC §8).
struct MulticastAck {};

// Aggregator -> worker: the job's result delivery on this aggregator, decided once (SPEC §8).
enum class MulticastReason : uint8_t {
  kConfirmed = 0,   // every rank received the probe (mode multicast)
  kForced = 1,      // no probe: forced by configuration (mode multicast)
  kNoConfirm = 2,   // `rank` did not confirm within the deadline (mode unicast)
  kSendFailed = 3,  // the aggregator could not send to the group (mode unicast)
};
struct MulticastMode {
  bool multicast = false;
  MulticastReason reason = MulticastReason::kConfirmed;
  uint32_t rank = 0;  // kNoConfirm: the lowest rank that did not confirm; else 0
};
std::string_view multicast_reason_name(MulticastReason r);

// Leaf -> worker (SPEC.md §7 "Results straight down"), before a MulticastMode of mode 1:
// results of this job may also reach the group from this address and ports (the parent's).
struct ResultSource {
  uint32_t addr = 0;            // IPv4, host order, != 0
  std::vector<uint16_t> ports;  // 1..kMaxPorts, each != 0
};

// Child aggregator -> parent (SPEC.md §7 "Results straight down"): send this job's shared
// results for me to `group`:`group_port`, carrying my job's id and token, instead of to me.
// DirectDown flags: the child's job carries the data MAC, so the parent signs what it sends
// to the group with the child's job key (derived from the tree's shared secret, SPEC.md §7).
inline constexpr uint16_t kDirectDownSigned = 1u << 0;
struct DirectDown {
  uint32_t group = 0;  // IPv4 multicast group, host order
  uint16_t group_port = 0;
  uint32_t job_id = 0;  // the child's job (what its members' RESULTs carry)
  uint64_t job_token = 0;
  uint16_t flags = 0;  // kDirectDownSigned
};

using ControlMsg =
    std::variant<ServerHello, Join, JoinAck, Leave, Heartbeat, HeartbeatAck, Error, Shutdown,
                 MulticastAck, MulticastMode, Capacity, ResultSource, DirectDown>;

MsgType msg_type(const ControlMsg& m);
std::string_view msg_type_name(MsgType t);
std::string to_string(const ControlMsg& m);

// Appends one complete frame for `m` to `out`.
void encode_control(const ControlMsg& m, std::vector<uint8_t>& out);

enum class ControlParse : uint8_t {
  kOk = 0,
  kNeedMore = 1,  // not a whole frame yet: read more bytes and call again
  kBadMagic = 2,
  kBadVersion = 3,
  kBadType = 4,
  kTooLong = 5,    // body length > kMaxControlBody
  kBadLength = 6,  // body length inconsistent with the message type
  kBadField = 7,   // a field outside its valid range
  kReservedNonZero = 8,
};
std::string_view control_parse_name(ControlParse p);

// Parses the frame at the start of `buf`. On kOk, *out holds the message and *consumed
// the frame's length. On kNeedMore nothing is consumed. Any other result means the
// stream is unusable (the peer is answered with Error and disconnected); *consumed is 0.
ControlParse parse_control(std::span<const uint8_t> buf, ControlMsg* out, size_t* consumed);

// Shared-secret authentication of Join: SipHash-2-4 keyed by the secret, over the
// server's nonce and the Join's identity fields. Returns 0 if the secret is empty.
uint64_t join_mac(std::string_view secret, uint64_t nonce, const Join& j);

// SipHash-2-4 (exposed for tests).
uint64_t siphash24(uint64_t k0, uint64_t k1, std::span<const uint8_t> data);

}  // namespace conflux::proto
