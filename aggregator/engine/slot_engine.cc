#include "aggregator/engine/slot_engine.h"

#include <cstring>

#include "conflux/common/reduce.h"
#include "conflux/protocol/control.h"

namespace conflux::agg {

using proto::DataHeader;
using proto::DropReason;

namespace {

int32_t owner_of(const DataHeader& h) { return h.owned() ? int32_t{h.owner} : -1; }

bool same_shape(const Bank& b, const DataHeader& h) {
  return b.dtype == h.dtype && b.op == h.op && b.count == h.count && b.offset == h.offset &&
         b.owner == owner_of(h);
}

}  // namespace

SlotEngine::SlotEngine(JobTable& jobs, unsigned queue, unsigned n_queues,
                       uint32_t max_payload_bytes, QueueCounters& counters)
    : jobs_(jobs),
      queue_(queue),
      n_queues_(n_queues),
      max_payload_bytes_(max_payload_bytes),
      counters_(counters),
      srcs_(proto::kMaxWorkersPerJob) {}

DropReason SlotEngine::on_datagram(std::span<const uint8_t> datagram, Source src,
                                   ResultBatch& out) {
  counters_.packets_in.inc();
  counters_.bytes_in.add(datagram.size());
  DataHeader h;
  const uint8_t* payload = nullptr;
  DropReason r = proto::parse_data(datagram, max_payload_bytes_, &h, &payload);
  if (r == DropReason::kOk) r = on_contrib(h, payload, src, out);
  if (r != DropReason::kOk) counters_.drop(r);
  return r;
}

DropReason SlotEngine::on_contrib(const DataHeader& h, const uint8_t* payload, Source src,
                                  ResultBatch& out) {
  if (h.type != proto::PacketType::kContrib) return DropReason::kWrongDirection;
  Job* job = jobs_.find(h.job_id);
  if (job == nullptr) return DropReason::kUnknownJob;
  const JobParams& p = job->params();
  if (h.job_token != p.token) return DropReason::kBadToken;
  // Source binding (SPEC.md §4): a sniffed token is not enough to speak for a contributor.
  if (h.contributor < p.n_workers && !src.is(p.workers[h.contributor])) {
    return DropReason::kWrongSource;
  }
  JobQueueCounters& jc = job->counters(queue_);
  jc.packets_in.inc();
  jc.bytes_in.add(proto::kDataHeaderSize + h.payload_bytes());
  if (h.payload_bytes() > p.payload_bytes) return DropReason::kOversized;
  if (h.slot >= p.slots) return DropReason::kSlotOutOfRange;
  if (h.slot % n_queues_ != queue_) return DropReason::kWrongQueue;
  if (h.contributor >= p.n_workers) return DropReason::kBadContributor;
  if (h.owned() && h.owner >= p.n_workers) return DropReason::kBadContributor;

  Bank& b = job->slot(h.slot).banks[h.generation & 1];
  if (b.state == BankState::kEmpty) {
    // A fresh slot starts at generation 0 (bank 0) or 1 (bank 1).
    if (h.generation > 1) return DropReason::kSlotMismatch;
    return start_bank(*job, b, h, payload, out);
  }
  // Same parity, so the distance is even; modular arithmetic handles the 2^32 wrap.
  const auto ahead = static_cast<int32_t>(h.generation - b.generation);
  if (ahead < 0) return DropReason::kStaleGeneration;
  if (ahead == 0) {
    if (!same_shape(b, h)) return DropReason::kSlotMismatch;
    if (b.state == BankState::kComplete) {
      // The contributor lost its result: serve it again, to that rank only (an owned
      // result's other ranks get their acknowledgement again).
      const bool ack = b.owner >= 0 && b.owner != int32_t{h.contributor};
      emit(*job, b, h, h.contributor, proto::kFlagRetransmit | (ack ? proto::kFlagAck : 0), out);
      counters_.retransmits_served.inc();
      job->counters(queue_).unicast_resends.inc();
      return DropReason::kOk;
    }
    if (b.has(h.contributor)) return DropReason::kDuplicate;
    add(*job, b, h, payload, out);
    return DropReason::kOk;
  }
  // g+2 reuses a complete bank: every rank already holds result g (SPEC.md §4).
  if (ahead == 2 && b.state == BankState::kComplete) return start_bank(*job, b, h, payload, out);
  return DropReason::kSlotMismatch;
}

DropReason SlotEngine::start_bank(Job& job, Bank& b, const DataHeader& h, const uint8_t* payload,
                                  ResultBatch& out) {
  b.state = BankState::kCollecting;
  b.generation = h.generation;
  b.dtype = h.dtype;
  b.op = h.op;
  b.count = h.count;
  b.offset = h.offset;
  b.owner = owner_of(h);
  b.arrived = 0;
  b.result_data = nullptr;
  b.clear_bits();
  add(job, b, h, payload, out);
  return DropReason::kOk;
}

void SlotEngine::add(Job& job, Bank& b, const DataHeader& h, const uint8_t* payload,
                     ResultBatch& out) {
  const JobParams& p = job.params();
  const size_t bytes = h.payload_bytes();
  if (p.deterministic) {
    uint8_t* raw = b.raw.ensure(size_t{p.n_workers} * p.payload_bytes);
    std::memcpy(raw + size_t{h.contributor} * p.payload_bytes, payload, bytes);
  } else {
    const size_t max_elems = p.payload_bytes / dtype_size(b.dtype);
    uint8_t* acc = b.accum.ensure(max_elems * accum_size(b.dtype));
    if (b.arrived == 0) {
      reduce::init(b.dtype, acc, payload, b.count);
    } else {
      reduce::accumulate(b.dtype, b.op, acc, payload, b.count);
    }
  }
  b.set(h.contributor);
  if (++b.arrived == p.n_workers) complete(job, b, h, out);
}

void SlotEngine::complete(Job& job, Bank& b, const DataHeader& h, ResultBatch& out) {
  const JobParams& p = job.params();
  const size_t max_elems = p.payload_bytes / dtype_size(b.dtype);
  if (p.deterministic) {
    for (uint32_t r = 0; r < p.n_workers; ++r) {
      srcs_[r] = b.raw.data() + size_t{r} * p.payload_bytes;
    }
    uint8_t* scratch = b.accum.ensure(max_elems * accum_size(b.dtype));
    uint8_t* dst = b.result.ensure(p.payload_bytes);
    reduce::reduce_n(b.dtype, b.op, dst, srcs_.data(), p.n_workers, b.count, scratch);
    b.result_data = dst;
  } else if (dtype_is_narrow_float(b.dtype)) {
    uint8_t* dst = b.result.ensure(p.payload_bytes);
    reduce::finish(b.dtype, dst, b.accum.data(), b.count);  // the single rounding
    b.result_data = dst;
  } else {
    b.result_data = b.accum.data();  // wide types accumulate in place: finish() is a copy
  }
  b.state = BankState::kComplete;
  counters_.slots_completed.inc();
  job.counters(queue_).slots_completed.inc();
  if (b.owner < 0) {
    emit(job, b, h, ResultBatch::kAllRanks, 0, out);
  } else {
    emit(job, b, h, b.owner, 0, out);
    if (p.n_workers > 1) emit(job, b, h, ResultBatch::kAllRanks, proto::kFlagAck, out, b.owner);
  }
}

void SlotEngine::emit(Job& job, const Bank& b, const DataHeader& h, int32_t rank, uint16_t flags,
                      ResultBatch& out, int32_t except) {
  uint8_t* buf = out.reserve();
  if (buf == nullptr) {  // cannot happen with a correctly sized batch; the worker will resend
    counters_.send_errors.inc();
    return;
  }
  DataHeader r;
  r.type = proto::PacketType::kResult;
  r.flags = flags;
  r.job_id = job.id();
  r.contributor = 0;
  r.job_token = job.params().token;
  r.slot = h.slot;
  r.generation = b.generation;
  r.offset = b.offset;
  r.count = b.count;
  r.dtype = b.dtype;
  r.op = b.op;
  proto::encode_data_header(r, buf);
  const size_t bytes = r.wire_payload_bytes();
  if (bytes > 0) std::memcpy(buf + proto::kDataHeaderSize, b.result_data, bytes);
  out.commit(static_cast<uint32_t>(proto::kDataHeaderSize + bytes), &job, rank, except);
}

}  // namespace conflux::agg
