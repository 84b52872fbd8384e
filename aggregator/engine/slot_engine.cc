// SPDX-License-Identifier: Apache-2.0
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
  if (h.type != proto::PacketType::kContrib) return on_parent_result(h, payload, src, out);
  Job* job = jobs_.find(h.job_id);
  if (job == nullptr) return DropReason::kUnknownJob;
  const JobParams& p = job->params();
  if (h.job_token != p.token) return DropReason::kBadToken;
  // Data MAC (SPEC.md §6): a job with a key takes only packets its contributor signed; a
  // packet with a trailer for a job without one is a mismatch just the same.
  if (p.mac_key.has_value() ? !mac_ok(*job, h, payload) : h.mac()) return DropReason::kBadMac;
  // Source binding (SPEC.md §4): a sniffed token is not enough to speak for a contributor.
  // A rank that did not join here (SPEC.md §7) has no address: every source is wrong.
  if (h.contributor < p.n_workers && !src.is(p.addr(h.contributor, h.slot))) {
    return DropReason::kWrongSource;
  }
  JobQueueCounters& jc = job->counters(queue_);
  jc.packets_in.inc();
  jc.bytes_in.add(proto::kDataHeaderSize + h.payload_bytes());
  const DropReason r = on_job_contrib(*job, h, payload, out);
  if (r != DropReason::kOk) jc.drops.inc();
  return r;
}

DropReason SlotEngine::on_job_contrib(Job& job, const DataHeader& h, const uint8_t* payload,
                                      ResultBatch& out) {
  const JobParams& p = job.params();
  if (h.payload_bytes() > p.payload_bytes) return DropReason::kOversized;
  if (h.slot >= p.slots) return DropReason::kSlotOutOfRange;
  if (h.slot % n_queues_ != queue_) return DropReason::kWrongQueue;
  if (h.contributor >= p.n_workers) return DropReason::kBadContributor;
  if (h.owned() && h.owner >= p.n_workers) return DropReason::kBadContributor;

  Bank& b = job.slot(h.slot).banks[h.generation & 1];
  if (b.state == BankState::kEmpty) {
    // A fresh slot starts at generation 0 (bank 0) or 1 (bank 1).
    if (h.generation > 1) return DropReason::kSlotMismatch;
    return start_bank(job, b, h, payload, out);
  }
  // Same parity, so the distance is even; modular arithmetic handles the 2^32 wrap.
  const auto ahead = static_cast<int32_t>(h.generation - b.generation);
  if (ahead < 0) return DropReason::kStaleGeneration;
  if (ahead == 0) {
    if (!same_shape(b, h)) return DropReason::kSlotMismatch;
    if (b.state == BankState::kForwarded) {
      // A leaf whose partial went up: a member's resend means a result is missing below or
      // above; ask the parent again (it re-serves a complete slot, SPEC.md §7). The result
      // then goes to every member, so one request up answers them all: the members that time
      // out together on one lost (or late) result ask once. A member asking a second time
      // means that request or its answer was lost too: ask again.
      if ((h.flags & proto::kFlagRetransmit) == 0) return DropReason::kDuplicate;
      if (b.any_bit() && !b.has(h.contributor)) {
        b.set(h.contributor);
        counters_.uplink_resends_held.inc();
        return DropReason::kOk;
      }
      b.clear_bits();
      b.set(h.contributor);
      forward_up(job, b, h, proto::kFlagRetransmit, out);
      return DropReason::kOk;
    }
    if (b.state == BankState::kComplete) {
      // The contributor lost its result: serve it again, to that rank only (an owned
      // result's other ranks get their acknowledgement again).
      const bool ack = b.owner >= 0 && b.owner != int32_t{h.contributor};  // (owner elsewhere too)
      emit(job, b, h, h.contributor, proto::kFlagRetransmit | (ack ? proto::kFlagAck : 0), out);
      counters_.retransmits_served.inc();
      job.counters(queue_).unicast_resends.inc();
      return DropReason::kOk;
    }
    if (b.has(h.contributor)) return DropReason::kDuplicate;
    add(job, b, h, payload, out);
    return DropReason::kOk;
  }
  // g+2 reuses a complete bank: every rank already holds result g (SPEC.md §4). On a leaf
  // whose results come straight from the parent, the bank may still be FORWARDED: g+2 proves
  // every rank holds result g all the same (SPEC.md §7, "Why slot reuse stays safe"). Through
  // the leaf, g+2 on a FORWARDED bank cannot happen and is refused.
  const bool straight_down = p.uplink != nullptr && p.uplink->direct;
  if (ahead == 2 &&
      (b.state == BankState::kComplete || (straight_down && b.state == BankState::kForwarded))) {
    return start_bank(job, b, h, payload, out);
  }
  return DropReason::kSlotMismatch;
}

proto::DataMac& SlotEngine::KeyedMac::keyed(uint64_t job_id, const proto::DataKey& key) {
  for (size_t i = 0; i < kEntries; ++i) {
    if (jobs[i] == job_id && job_id != 0) return macs[i];
  }
  const size_t i = next;
  next = (next + 1) % kEntries;
  ++rekeys;
  jobs[i] = macs[i].set_key(key) ? job_id : 0;
  return macs[i];
}

namespace {

// True when the datagram [h, payload) carries a trailer whose sender passes `sender_ok` and
// whose tag `mac` verifies.
template <typename SenderOk>
bool signed_by(proto::DataMac& mac, const DataHeader& h, const uint8_t* payload,
               SenderOk sender_ok) {
  if (!h.mac()) return false;
  const uint8_t* trailer = payload + h.wire_payload_bytes();
  if (!sender_ok(proto::DataMac::sender_of(trailer))) return false;
  uint8_t header[proto::kDataHeaderSize];
  proto::encode_data_header(h, header);  // the parser accepts only the canonical encoding
  return mac.verify(header, payload, h.wire_payload_bytes(), trailer);
}

}  // namespace

bool SlotEngine::mac_ok(const Job& job, const DataHeader& h, const uint8_t* payload) {
  return signed_by(mac_.keyed(job.id(), *job.params().mac_key), h, payload,
                   [&](uint32_t sender) { return sender == h.contributor; });
}

bool SlotEngine::parent_mac_ok(const Job& job, const DataHeader& h, const uint8_t* payload) {
  return signed_by(up_mac_.keyed(job.id(), *job.params().uplink->mac_key), h, payload,
                   [](uint32_t sender) { return (sender & proto::kAggSender) != 0; });
}

void SlotEngine::take_back(const Bank& b, ResultBatch& out) {
  if (b.lent_in != out.epoch()) return;
  if (b.accum.data() != nullptr) out.take_back(b.accum.data(), b.accum.capacity());
  if (b.result.data() != nullptr) out.take_back(b.result.data(), b.result.capacity());
  b.lent_in = 0;
}

DropReason SlotEngine::start_bank(Job& job, Bank& b, const DataHeader& h, const uint8_t* payload,
                                  ResultBatch& out) {
  take_back(b, out);  // a result of the generation before may still wait in the batch
  b.state = BankState::kCollecting;
  b.generation = h.generation;
  b.dtype = h.dtype;
  b.op = h.op;
  b.count = h.count;
  b.offset = h.offset;
  b.owner = owner_of(h);
  b.arrived = 0;
  b.result_data = nullptr;
  b.first_ns = steady_ns();
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
  b.arrived += p.weight[h.contributor];
  if (b.arrived == p.served) complete(job, b, h, out);
}

void SlotEngine::complete(Job& job, Bank& b, const DataHeader& h, ResultBatch& out) {
  const JobParams& p = job.params();
  const size_t max_elems = p.payload_bytes / dtype_size(b.dtype);
  if (p.deterministic) {
    // Members in rank order: on a leaf its workers, on a parent its children (SPEC.md §7).
    const size_t n = p.members.size();
    for (size_t i = 0; i < n; ++i) {
      srcs_[i] = b.raw.data() + size_t{p.members[i]} * p.payload_bytes;
    }
    uint8_t* scratch = b.accum.ensure(max_elems * accum_size(b.dtype));
    uint8_t* dst = b.result.ensure(p.payload_bytes);
    reduce::reduce_n(b.dtype, b.op, dst, srcs_.data(), n, b.count, scratch);
    b.result_data = dst;
  } else if (dtype_is_narrow_float(b.dtype)) {
    uint8_t* dst = b.result.ensure(p.payload_bytes);
    reduce::finish(b.dtype, dst, b.accum.data(), b.count);  // the single rounding
    b.result_data = dst;
  } else {
    b.result_data = b.accum.data();  // wide types accumulate in place: finish() is a copy
  }
  const uint64_t gather_ns = steady_ns() - b.first_ns;
  counters_.slots_completed.inc();
  counters_.gather_ns.add(gather_ns);
  JobQueueCounters& jc = job.counters(queue_);
  jc.slots_completed.inc();
  jc.gather_ns.add(gather_ns);
  if (p.uplink != nullptr) {  // a leaf: the partial goes up, the result comes down later
    b.state = BankState::kForwarded;
    b.clear_bits();  // from now on: the members that asked again (on_job_contrib)
    forward_up(job, b, h, 0, out);
    return;
  }
  b.state = BankState::kComplete;
  emit_result(job, b, h, out);
}

void SlotEngine::emit_result(Job& job, const Bank& b, const DataHeader& h, ResultBatch& out) {
  const JobParams& p = job.params();
  // On a leaf the owner may sit under another leaf: then every member gets an ACK.
  const bool owner_here = b.owner >= 0 && p.weight[static_cast<uint32_t>(b.owner)] != 0;
  if (b.owner < 0 && job.n_direct() != 0) {
    emit_direct(job, b, h, out);
  } else if (b.owner < 0) {
    emit(job, b, h, ResultBatch::kAllRanks, 0, out);
  } else if (!owner_here) {
    emit(job, b, h, ResultBatch::kAllRanks, proto::kFlagAck, out);
  } else {
    emit(job, b, h, b.owner, 0, out);
    if (p.members.size() > 1) {
      emit(job, b, h, ResultBatch::kAllRanks, proto::kFlagAck, out, b.owner);
    }
  }
}

void SlotEngine::emit_direct(Job& job, const Bank& b, const DataHeader& h, ResultBatch& out) {
  // The children sent straight down here are left out of the entry for the others by rank,
  // not by asking the job again at transmit: a child that turns direct in between gets its
  // result the old way, never no result.
  std::array<int32_t, Job::kMaxDirectChildren> sent = ResultBatch::kNoSkip;
  size_t n_sent = 0;
  bool others = false;
  for (uint32_t w : job.params().members) {
    const Job::Direct* d = job.direct(w);
    if (d == nullptr || n_sent == sent.size()) {
      others = true;
      continue;
    }
    sent[n_sent++] = static_cast<int32_t>(w);
    DataHeader r;
    r.type = proto::PacketType::kResult;
    r.job_id = d->job_id;  // what the child's members expect from their own aggregator
    r.job_token = d->token;
    append(job, b, r, h.slot, static_cast<int32_t>(w), -1, out, /*direct=*/true);
    counters_.direct_results.inc();
  }
  if (others) {
    const size_t before = out.size();
    emit(job, b, h, ResultBatch::kAllRanks, 0, out);
    if (out.size() > before) out.skip_in_last(sent);
  }
}

void SlotEngine::emit(Job& job, const Bank& b, const DataHeader& h, int32_t rank, uint16_t flags,
                      ResultBatch& out, int32_t except) {
  DataHeader r;
  r.type = proto::PacketType::kResult;
  r.flags = flags;
  r.job_id = job.id();
  r.contributor = 0;
  r.job_token = job.params().token;
  append(job, b, r, h.slot, rank, except, out);
}

void SlotEngine::append(Job& job, const Bank& b, DataHeader d, uint32_t slot, int32_t rank,
                        int32_t except, ResultBatch& out, bool direct) {
  uint8_t* buf = out.reserve();
  if (buf == nullptr) {  // cannot happen with a correctly sized batch; the worker will resend
    counters_.send_errors.inc();
    return;
  }
  d.slot = slot;
  d.generation = b.generation;
  d.offset = b.offset;
  d.count = b.count;
  d.dtype = b.dtype;
  d.op = b.op;
  // Results of a job with a data key are signed by this queue; a leaf's partials going up
  // by the leaf's contributor id, with the key of the job at the parent; results sent straight
  // down to a child's members by this queue as a parent, with the child's key (SPEC.md §7).
  const JobParams& p = job.params();
  const bool up = d.type == proto::PacketType::kContrib;
  const Job::Direct* child = direct ? job.direct(static_cast<uint32_t>(rank)) : nullptr;
  const std::optional<proto::DataKey>& key =
      up ? p.uplink->mac_key : (child != nullptr ? child->key : p.mac_key);
  if (key) d.flags |= proto::kFlagMac;
  proto::encode_data_header(d, buf);
  const size_t bytes = d.wire_payload_bytes();
  // A batch that lends payloads sends the bank's bytes as they are (the trailer then follows
  // the header in the batch); otherwise they are copied behind the header.
  const bool lend = bytes > 0 && out.lends();
  const uint8_t* body = lend ? b.result_data : buf + proto::kDataHeaderSize;
  uint8_t* trailer = lend ? buf + proto::kDataHeaderSize : buf + proto::kDataHeaderSize + bytes;
  if (lend) {
    b.lent_in = out.epoch();
  } else if (bytes > 0) {
    std::memcpy(buf + proto::kDataHeaderSize, b.result_data, bytes);
  }
  if (key) {
    // The MAC objects keep one key each; a child's is named by its rank in this job.
    proto::DataMac& mac =
        child != nullptr
            ? direct_mac_.keyed((uint64_t{job.id()} << 32) | (uint64_t(rank) + 1), *key)
            : (up ? up_mac_ : mac_).keyed(job.id(), *key);
    const uint32_t sender = up                 ? d.contributor
                            : child != nullptr ? proto::kAggSender | proto::kParentSender | queue_
                                               : proto::kAggSender | queue_;
    // One counter per queue for its own key and every child's: still never twice per key.
    const uint64_t seq = up ? job.next_up_mac_seq(queue_) : job.next_mac_seq(queue_);
    if (!mac.sign(buf, body, bytes, sender, seq, trailer)) {
      counters_.send_errors.inc();  // libcrypto failed: send nothing; the worker will ask again
      return;
    }
  }
  out.commit(static_cast<uint32_t>(proto::kDataHeaderSize + d.wire_body_bytes()), &job, slot, rank,
             except, direct, lend ? body : nullptr, lend ? static_cast<uint32_t>(bytes) : 0);
}

}  // namespace conflux::agg
