// SPDX-License-Identifier: Apache-2.0
#include "conflux/protocol/data.h"

#include <cstdio>

#include "conflux/protocol/byteorder.h"

namespace conflux::proto {
namespace {

// Byte offsets of the header fields (SPEC.md, "Data header").
enum : size_t {
  kOffMagic = 0,
  kOffVersion = 4,
  kOffType = 5,
  kOffFlags = 6,
  kOffJobId = 8,
  kOffContributor = 12,
  kOffOwner = 14,  // reserved (0) unless the CONTRIB carries kFlagOwned
  kOffToken = 16,
  kOffSlot = 24,
  kOffGeneration = 28,
  kOffOffset = 32,
  kOffCount = 40,
  kOffDtype = 44,
  kOffOp = 45,
  kOffReserved1 = 46,
};
static_assert(kOffReserved1 + 2 == kDataHeaderSize, "data header layout");
static_assert(kDataHeaderSize + kMaxPayloadBytes <= 65507, "must fit one UDP datagram");

// The rest of a PROBE after magic, version and type: 48 bytes, only job_id, token and offset.
DropReason parse_probe(std::span<const uint8_t> d, DataHeader* out, const uint8_t** payload) {
  const uint8_t* p = d.data();
  if (load_be<uint16_t>(p + kOffFlags) != 0) return DropReason::kBadFlags;
  for (size_t i = kOffContributor; i < kDataHeaderSize; ++i) {
    const bool field = (i >= kOffToken && i < kOffSlot) || (i >= kOffOffset && i < kOffCount);
    if (!field && p[i] != 0) return DropReason::kReservedNonZero;
  }
  if (d.size() != kDataHeaderSize) return DropReason::kLengthMismatch;
  *out = probe_header(load_be<uint32_t>(p + kOffJobId), load_be<uint64_t>(p + kOffToken),
                      load_be<uint64_t>(p + kOffOffset));
  *payload = p + kDataHeaderSize;
  return DropReason::kOk;
}

}  // namespace

std::string_view drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kOk:
      return "ok";
    case DropReason::kTruncated:
      return "truncated";
    case DropReason::kBadMagic:
      return "bad_magic";
    case DropReason::kBadVersion:
      return "bad_version";
    case DropReason::kBadType:
      return "bad_type";
    case DropReason::kBadFlags:
      return "bad_flags";
    case DropReason::kReservedNonZero:
      return "reserved_nonzero";
    case DropReason::kBadDtype:
      return "bad_dtype";
    case DropReason::kBadOp:
      return "bad_op";
    case DropReason::kZeroCount:
      return "zero_count";
    case DropReason::kOversized:
      return "oversized";
    case DropReason::kLengthMismatch:
      return "length_mismatch";
    case DropReason::kUnknownJob:
      return "unknown_job";
    case DropReason::kBadToken:
      return "bad_token";
    case DropReason::kSlotOutOfRange:
      return "slot_out_of_range";
    case DropReason::kBadContributor:
      return "bad_contributor";
    case DropReason::kSlotMismatch:
      return "slot_mismatch";
    case DropReason::kStaleGeneration:
      return "stale_generation";
    case DropReason::kWrongDirection:
      return "wrong_direction";
    case DropReason::kDuplicate:
      return "duplicate";
    case DropReason::kWrongQueue:
      return "wrong_queue";
    case DropReason::kWrongSource:
      return "wrong_source";
    case DropReason::kBadMac:
      return "bad_mac";
  }
  return "unknown";
}

DataHeader probe_header(uint32_t job_id, uint64_t job_token, uint64_t number) {
  DataHeader h;
  h.type = PacketType::kProbe;
  h.job_id = job_id;
  h.job_token = job_token;
  h.offset = number;
  h.count = 0;
  h.dtype = static_cast<DType>(0);
  return h;
}

void encode_data_header(const DataHeader& h, uint8_t* out) {
  store_be<uint32_t>(out + kOffMagic, kDataMagic);
  out[kOffVersion] = kProtocolVersion;
  out[kOffType] = static_cast<uint8_t>(h.type);
  store_be<uint16_t>(out + kOffFlags, h.flags);
  store_be<uint32_t>(out + kOffJobId, h.job_id);
  store_be<uint16_t>(out + kOffContributor, h.contributor);
  store_be<uint16_t>(out + kOffOwner, h.owner);
  store_be<uint64_t>(out + kOffToken, h.job_token);
  store_be<uint32_t>(out + kOffSlot, h.slot);
  store_be<uint32_t>(out + kOffGeneration, h.generation);
  store_be<uint64_t>(out + kOffOffset, h.offset);
  store_be<uint32_t>(out + kOffCount, h.count);
  out[kOffDtype] = static_cast<uint8_t>(h.dtype);
  out[kOffOp] = static_cast<uint8_t>(h.op);
  store_be<uint16_t>(out + kOffReserved1, 0);
}

DropReason parse_data(std::span<const uint8_t> d, uint32_t max_payload_bytes, DataHeader* out,
                      const uint8_t** payload) {
  if (d.size() < kDataHeaderSize) return DropReason::kTruncated;
  const uint8_t* p = d.data();
  if (load_be<uint32_t>(p + kOffMagic) != kDataMagic) return DropReason::kBadMagic;
  if (p[kOffVersion] != kProtocolVersion) return DropReason::kBadVersion;
  const uint8_t type = p[kOffType];
  if (type == static_cast<uint8_t>(PacketType::kProbe)) return parse_probe(d, out, payload);
  if (type != static_cast<uint8_t>(PacketType::kContrib) &&
      type != static_cast<uint8_t>(PacketType::kResult)) {
    return DropReason::kBadType;
  }
  const uint16_t flags = load_be<uint16_t>(p + kOffFlags);
  if ((flags & ~kFlagKnownFlags) != 0) return DropReason::kBadFlags;
  const bool contrib = type == static_cast<uint8_t>(PacketType::kContrib);
  if ((flags & (contrib ? kFlagAck : kFlagOwned)) != 0) return DropReason::kBadFlags;
  const uint16_t owner = load_be<uint16_t>(p + kOffOwner);
  if ((owner != 0 && (flags & kFlagOwned) == 0) || load_be<uint16_t>(p + kOffReserved1) != 0) {
    return DropReason::kReservedNonZero;
  }
  if (!valid_dtype(p[kOffDtype])) return DropReason::kBadDtype;
  if (!valid_op(p[kOffOp])) return DropReason::kBadOp;
  const auto dtype = static_cast<DType>(p[kOffDtype]);
  const uint32_t count = load_be<uint32_t>(p + kOffCount);
  if (count == 0) return DropReason::kZeroCount;
  const uint64_t bytes = uint64_t{count} * dtype_size(dtype);
  if (bytes > max_payload_bytes || bytes > kMaxPayloadBytes) return DropReason::kOversized;
  if (d.size() != kDataHeaderSize + ((flags & kFlagAck) != 0 ? 0 : bytes) +
                      ((flags & kFlagMac) != 0 ? kMacTrailerSize : 0)) {
    return DropReason::kLengthMismatch;
  }

  out->type = static_cast<PacketType>(type);
  out->flags = flags;
  out->job_id = load_be<uint32_t>(p + kOffJobId);
  out->contributor = load_be<uint16_t>(p + kOffContributor);
  out->owner = owner;
  out->job_token = load_be<uint64_t>(p + kOffToken);
  out->slot = load_be<uint32_t>(p + kOffSlot);
  out->generation = load_be<uint32_t>(p + kOffGeneration);
  out->offset = load_be<uint64_t>(p + kOffOffset);
  out->count = count;
  out->dtype = dtype;
  out->op = static_cast<Op>(p[kOffOp]);
  *payload = p + kDataHeaderSize;
  return DropReason::kOk;
}

std::string DataHeader::to_string() const {
  char buf[256];
  std::snprintf(
      buf, sizeof(buf),
      "%s job=%u contrib=%u owner=%u slot=%u gen=%u off=%llu count=%u %.*s/%.*s flags=0x%x",
      type == PacketType::kContrib  ? "CONTRIB"
      : type == PacketType::kResult ? "RESULT"
                                    : "PROBE",
      job_id, contributor, owner, slot, generation, static_cast<unsigned long long>(offset), count,
      static_cast<int>(dtype_name(dtype).size()), dtype_name(dtype).data(),
      static_cast<int>(op_name(op).size()), op_name(op).data(), flags);
  return buf;
}

}  // namespace conflux::proto
