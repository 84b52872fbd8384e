// SPDX-License-Identifier: Apache-2.0
// The per-packet MAC of the data channel (SPEC.md §6 "Data MAC"): AES-128-GMAC through
// OpenSSL EVP (AES-NI and carry-less multiply where the CPU has them), keyed per job from the
// shared secret, over the datagram's header and payload. The 12-byte IV is the sender id and
// the sender's packet sequence number, both carried in the trailer, so an IV is never used
// twice under one key as long as every sender numbers its packets (SPEC.md says how).
// One DataMac per thread: it holds an EVP context and is not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "conflux/protocol/data.h"

namespace conflux::proto {

using DataKey = std::array<uint8_t, 16>;

// With the MAC a worker must ask for at least this payload per packet (Join.payload_bytes): the
// grant is the request less the trailer, rounded down to 8 bytes.
inline constexpr uint32_t kMinMacPayloadBytes = 64;

// Sender ids (SPEC.md §6): a worker signs with its rank, aggregator thread q with kAggSender | q.
inline constexpr uint32_t kAggSender = 0x80000000u;
// With kAggSender: a parent aggregator's thread signing a child's results that it sends
// straight to the child's members (SPEC.md §7), with the child's job key: kAggSender |
// kParentSender | q, never equal to a sender of the child itself.
inline constexpr uint32_t kParentSender = 0x40000000u;

// The job's data key: the first 16 bytes of HMAC-SHA256(secret, "conflux data mac v1" ·
// job_id u32 · job_token u64, big-endian). Fresh for every job (the token is random).
DataKey derive_data_key(std::string_view secret, uint32_t job_id, uint64_t job_token);

class DataMac {
 public:
  DataMac();
  ~DataMac();
  DataMac(const DataMac&) = delete;
  DataMac& operator=(const DataMac&) = delete;

  // Keys the context (an AES key schedule and the GHASH key: call once per job, not per
  // packet). False (and unkeyed) for an all-zero key or when libcrypto fails.
  bool set_key(const DataKey& key);
  bool keyed() const { return keyed_; }

  // Writes the trailer at `trailer` for the datagram [header (48 bytes, kFlagMac set), body).
  // False when unkeyed or libcrypto fails (the datagram must not be sent).
  bool sign(const uint8_t* header, const uint8_t* body, size_t body_len, uint32_t sender,
            uint64_t seq, uint8_t* trailer);
  // True when `trailer` holds a tag this key made for [header, body) and sender `sender`.
  bool verify(const uint8_t* header, const uint8_t* body, size_t body_len, const uint8_t* trailer);

  // The sender id a trailer names.
  static uint32_t sender_of(const uint8_t* trailer);

 private:
  bool tag(const uint8_t* iv, const uint8_t* header, const uint8_t* body, size_t body_len,
           uint8_t* out);

  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  bool keyed_ = false;
};

}  // namespace conflux::proto
