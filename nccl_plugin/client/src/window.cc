// SPDX-License-Identifier: Apache-2.0
#include "window.h"

#include "packetizer.h"

namespace conflux::client {

using proto::DropReason;

bool SlotWindow::can_send() const {
  return slots_[slot_of(next_seq_, size())].state == SlotEntry::State::kFree;
}

uint32_t SlotWindow::claim() {
  const uint32_t slot = slot_of(next_seq_, size());
  SlotEntry& e = slots_[slot];
  e.state = SlotEntry::State::kWaiting;
  e.used = true;
  e.generation = generation_of(next_seq_, size());
  e.retransmits = 0;
  e.seq = next_seq_;
  ++next_seq_;
  ++outstanding_;
  return slot;
}

DropReason SlotWindow::match(const proto::DataHeader& h, uint32_t* slot) const {
  if (h.slot >= size()) {
    return DropReason::kSlotOutOfRange;
  }
  const SlotEntry& e = slots_[h.slot];
  if (!e.used) {
    return DropReason::kSlotMismatch;  // nothing was ever sent on this slot
  }
  const int32_t d = generation_diff(h.generation, e.generation);
  if (e.state == SlotEntry::State::kFree) {
    if (d == 0) {
      return DropReason::kDuplicate;
    }
    return d < 0 ? DropReason::kStaleGeneration : DropReason::kSlotMismatch;
  }
  if (d == -1) {
    return DropReason::kDuplicate;  // repeat of the result that freed it
  }
  if (d < 0) {
    return DropReason::kStaleGeneration;
  }
  if (d > 0) {
    return DropReason::kSlotMismatch;
  }
  if (h.offset != e.offset || h.count != e.count || h.dtype != e.dtype || h.op != e.op) {
    return DropReason::kSlotMismatch;
  }
  *slot = h.slot;
  return DropReason::kOk;
}

void SlotWindow::complete(uint32_t slot) {
  SlotEntry& e = slots_[slot];
  if (e.state != SlotEntry::State::kWaiting) {
    return;
  }
  e.state = SlotEntry::State::kFree;
  e.req = nullptr;
  e.src = nullptr;
  --outstanding_;
}

void SlotWindow::clear() {
  for (uint32_t s = 0; s < size(); ++s) {
    complete(s);
  }
}

}  // namespace conflux::client
