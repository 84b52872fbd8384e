// SPDX-License-Identifier: Apache-2.0
// The window of W outstanding packets a worker keeps per aggregator (protocol/SPEC.md §4,
// "Worker slot state machine"). Packet sequence n uses slot n mod W, generation n / W;
// n may be sent only when slot n mod W is FREE, i.e. packet n - W has its result.
// Owned and used by the progress thread only; no locking.
#pragma once

#include <cstdint>
#include <vector>

#include "conflux/protocol/data.h"

namespace conflux::client {

struct Request;

struct SlotEntry {
  enum class State : uint8_t { kFree, kWaiting };
  State state = State::kFree;
  bool used = false;        // a generation has been sent on this slot
  uint32_t generation = 0;  // in flight (WAITING) or the last one completed (FREE)
  uint64_t seq = 0;         // sequence number of the packet (slot = seq mod W)
  uint64_t offset = 0;      // element offset inside the collective
  uint32_t count = 0;
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;
  Request* req = nullptr;        // owning request while WAITING
  const uint8_t* src = nullptr;  // contribution payload (user send buffer)
  uint32_t rto_us = 0;           // current retransmission timeout
  uint32_t retransmits = 0;
  int64_t first_sent_ns = 0;
  int64_t sent_ns = 0;
  uint64_t first_tx = 0;  // transmission stamps (per aggregator, increasing with every
  uint64_t last_tx = 0;   // datagram sent): a total order of sends, unlike clock readings
  int64_t deadline_ns = 0;
  // Set when a generation that we had resent was completed by the aggregator's broadcast
  // (no RETRANSMIT flag): a later RETRANSMIT-flagged duplicate result for spurious_gen
  // proves that a resend reached an already complete bank, i.e. was not needed.
  bool spurious_check = false;
  uint32_t spurious_gen = 0;
  alignas(8) uint8_t header[proto::kDataHeaderSize] = {};  // encoded CONTRIB header
  uint8_t trailer[proto::kMacTrailerSize] = {};            // its data MAC, when the job has one
};

class SlotWindow {
 public:
  explicit SlotWindow(uint32_t slots) : slots_(slots == 0 ? 1 : slots) {}

  uint32_t size() const { return static_cast<uint32_t>(slots_.size()); }
  uint64_t next_seq() const { return next_seq_; }
  uint32_t outstanding() const { return outstanding_; }
  bool can_send() const;

  // Takes sequence number next_seq() for a new packet: its slot becomes WAITING with the
  // sequence's generation. Precondition: can_send(). Returns the slot index.
  uint32_t claim();

  // Validates a RESULT against the window: kOk (and *slot) when it answers the WAITING
  // packet of its slot with the same generation, offset, count, dtype and op; otherwise
  // kSlotOutOfRange, kDuplicate (that generation's result was already taken),
  // kStaleGeneration (older), or kSlotMismatch (anything else).
  proto::DropReason match(const proto::DataHeader& h, uint32_t* slot) const;

  // WAITING -> FREE after the result was taken.
  void complete(uint32_t slot);

  SlotEntry& entry(uint32_t slot) { return slots_[slot]; }
  const SlotEntry& entry(uint32_t slot) const { return slots_[slot]; }

  // Forgets every WAITING packet (engine failure): all slots FREE, no request pointers.
  void clear();

 private:
  std::vector<SlotEntry> slots_;
  uint64_t next_seq_ = 0;
  uint32_t outstanding_ = 0;
};

}  // namespace conflux::client
