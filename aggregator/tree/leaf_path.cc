// SPDX-License-Identifier: Apache-2.0
// Reduction tree, leaf datapath (SPEC.md §7): a leaf's complete bank goes up to the parent
// aggregator as one CONTRIB of the leaf's weight; the parent's RESULT comes back on the data
// port that owns the slot and is fanned out to the leaf's members. Runs on the slot's owner
// thread like the rest of SlotEngine; no locks, no timers (the workers' resends drive recovery
// at every level).
#include <cstring>

#include "aggregator/engine/slot_engine.h"

namespace conflux::agg {

using proto::DataHeader;
using proto::DropReason;

void SlotEngine::forward_up(Job& job, const Bank& b, const DataHeader& h, uint16_t flags,
                            ResultBatch& out) {
  const JobParams::Uplink& up = *job.params().uplink;
  DataHeader c;
  c.type = proto::PacketType::kContrib;
  c.flags = flags;  // never OWNED: the parent sends the whole result to every child
  c.job_id = up.job_id;
  c.contributor = up.contributor;
  c.job_token = up.token;
  append(job, b, c, h.slot, ResultBatch::kParent, -1, out);
  if (flags != 0) counters_.uplink_resends.inc();
}

DropReason SlotEngine::on_parent_result(const DataHeader& h, const uint8_t* payload, Source src,
                                        ResultBatch& out) {
  Job* job = jobs_.find_by_parent(h.job_id);
  // Not a leaf of any job with this parent job id: a RESULT has no business here.
  if (job == nullptr) return DropReason::kWrongDirection;
  const JobParams& p = job->params();
  const JobParams::Uplink& up = *p.uplink;
  if (h.job_token != up.token) return DropReason::kBadToken;
  // Data MAC across levels (SPEC.md §7): as a worker checks its aggregator's RESULTs.
  if (up.mac_key ? !parent_mac_ok(*job, h, payload) : h.mac()) return DropReason::kBadMac;
  // Only the parent's data port for this slot may answer (SPEC.md §4 "Source binding").
  if (!src.is(up.ports[h.slot % up.ports.size()])) return DropReason::kWrongSource;
  JobQueueCounters& jc = job->counters(queue_);
  jc.packets_in.inc();
  jc.bytes_in.add(proto::kDataHeaderSize + h.wire_payload_bytes());
  if (h.slot >= p.slots) return DropReason::kSlotOutOfRange;
  if (h.slot % n_queues_ != queue_) return DropReason::kWrongQueue;
  if (h.ack()) return DropReason::kSlotMismatch;  // leaves never send OWNED up
  Bank& b = job->slot(h.slot).banks[h.generation & 1];
  if (b.state == BankState::kEmpty) return DropReason::kSlotMismatch;
  const auto ahead = static_cast<int32_t>(h.generation - b.generation);
  if (ahead < 0) return DropReason::kStaleGeneration;
  if (ahead > 0 || b.dtype != h.dtype || b.op != h.op || b.count != h.count ||
      b.offset != h.offset) {
    return DropReason::kSlotMismatch;
  }
  if (b.state != BankState::kForwarded) return DropReason::kDuplicate;  // served again
  take_back(b, out);  // the partial sent up again may wait in the batch, lent from b.result
  uint8_t* dst = b.result.ensure(p.payload_bytes);
  std::memcpy(dst, payload, h.payload_bytes());
  b.result_data = dst;
  b.state = BankState::kComplete;
  emit_result(*job, b, h, out);
  return DropReason::kOk;
}

}  // namespace conflux::agg
