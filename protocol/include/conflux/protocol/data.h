// SPDX-License-Identifier: Apache-2.0
// The data-plane wire format: one UDP datagram = a fixed 48-byte header + payload.
// See protocol/SPEC.md for every field, its range and the slot state machines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "conflux/common/dtype.h"

namespace conflux::proto {

inline constexpr uint32_t kDataMagic = 0x43464C58;  // "CFLX"
inline constexpr uint8_t kProtocolVersion = 1;
inline constexpr size_t kDataHeaderSize = 48;
// Largest payload any peer may announce or send (fits a 64 KiB UDP datagram).
inline constexpr uint32_t kMaxPayloadBytes = 61440;
inline constexpr uint32_t kDefaultPayloadBytes = 8192;

// kProbe: aggregator -> a job's multicast group, 48 bytes, only job_id, job_token and offset
// (the probe number) set (SPEC §8).
enum class PacketType : uint8_t { kContrib = 1, kResult = 2, kProbe = 3 };

// Flag bits of DataHeader::flags. Unknown bits are rejected (kBadFlags).
inline constexpr uint16_t kFlagRetransmit = 1u << 0;  // a sender's repeat of this packet
// CONTRIB: only rank `owner` needs this slot's result (a Reduce / a ReduceScatter shard); the
// aggregator sends the result to the owner and an acknowledgement to every other rank.
inline constexpr uint16_t kFlagOwned = 1u << 1;
// RESULT: an acknowledgement without payload (the slot completed; the result went to its
// owner). The header echoes the slot's offset, count, dtype and op; the datagram is 48 bytes.
inline constexpr uint16_t kFlagAck = 1u << 2;
// Either type: a kMacTrailerSize-byte trailer follows the payload (SPEC.md §6 "Data MAC"): the
// sender, its packet sequence number and an AES-128-GMAC tag over header, payload and both.
inline constexpr uint16_t kFlagMac = 1u << 3;
inline constexpr uint16_t kFlagKnownFlags = kFlagRetransmit | kFlagOwned | kFlagAck | kFlagMac;
inline constexpr size_t kMacTrailerSize = 28;  // sender u32 · sequence u64 · tag[16]

// Decoded (host order) view of the header. Field meaning and ranges: SPEC.md.
struct DataHeader {
  PacketType type = PacketType::kContrib;
  uint16_t flags = 0;
  uint32_t job_id = 0;
  uint16_t contributor = 0;
  uint16_t owner = 0;  // CONTRIB with kFlagOwned: the rank that gets the result; else 0
  uint64_t job_token = 0;
  uint32_t slot = 0;
  uint32_t generation = 0;
  uint64_t offset = 0;  // element offset of this payload inside its collective (echoed)
  uint32_t count = 0;   // elements in the payload
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;

  bool owned() const { return (flags & kFlagOwned) != 0; }
  bool ack() const { return (flags & kFlagAck) != 0; }
  bool mac() const { return (flags & kFlagMac) != 0; }
  // Bytes of the elements the header describes (an acknowledgement carries none of them).
  size_t payload_bytes() const { return size_t{count} * dtype_size(dtype); }
  size_t wire_payload_bytes() const { return ack() ? 0 : payload_bytes(); }
  // Bytes after the header: the payload and, with kFlagMac, the trailer.
  size_t wire_body_bytes() const { return wire_payload_bytes() + (mac() ? kMacTrailerSize : 0); }
  std::string to_string() const;
};

// Why a datagram was dropped. Codes 1..11 come from the stateless parser below;
// 12.. are decided by the aggregator or worker against their state. Stable values:
// they appear in metrics and logs and are listed in SPEC.md.
enum class DropReason : uint8_t {
  kOk = 0,
  kTruncated = 1,
  kBadMagic = 2,
  kBadVersion = 3,
  kBadType = 4,
  kBadFlags = 5,
  kReservedNonZero = 6,
  kBadDtype = 7,
  kBadOp = 8,
  kZeroCount = 9,
  kOversized = 10,
  kLengthMismatch = 11,
  kUnknownJob = 12,
  kBadToken = 13,
  kSlotOutOfRange = 14,
  kBadContributor = 15,
  kSlotMismatch = 16,
  kStaleGeneration = 17,
  kWrongDirection = 18,
  kDuplicate = 19,
  kWrongQueue = 20,
  kWrongSource = 21,
  kBadMac = 22,
};
inline constexpr int kNumDropReasons = 23;
std::string_view drop_reason_name(DropReason r);  // "truncated", "bad_magic", ...

// The header of PROBE number `number` of a job (SPEC §8): 48 bytes, nothing else set.
DataHeader probe_header(uint32_t job_id, uint64_t job_token, uint64_t number);

// Writes the 48-byte header for `h` at `out`. The payload follows at out + 48.
void encode_data_header(const DataHeader& h, uint8_t* out);

// Validates a whole datagram (header + payload) against everything that can be
// checked without state: magic, version, type, flags (OWNED on CONTRIB only, ACK on RESULT
// only), reserved bytes (the owner field is reserved without OWNED), dtype, op,
// count in 1..max_payload_bytes/dtype_size, and datagram length == 48 + payload (0 for an
// ACK) + the MAC trailer when kFlagMac is set (the tag itself is checked by DataMac). A PROBE
// must be 48 bytes with every field but job_id, job_token and offset zero.
// On kOk, *out holds the header and *payload points into `datagram`.
DropReason parse_data(std::span<const uint8_t> datagram, uint32_t max_payload_bytes,
                      DataHeader* out, const uint8_t** payload);

}  // namespace conflux::proto
