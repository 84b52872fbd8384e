// SPDX-License-Identifier: Apache-2.0
// The progress thread's packet path: cut and send contributions, take results,
// retransmit on timeout (protocol/SPEC.md §4). No locks, no virtual calls.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>

#include "progress.h"
#include "stream_copy.h"

namespace conflux::client {

static_assert(std::endian::native == std::endian::little,
              "payload elements are little-endian on the wire and copied as is");

namespace {
constexpr int kMaxRxBatchesPerRound = 8;
}  // namespace

bool Progress::send_new(int64_t now) {
  const uint32_t n_aggs = static_cast<uint32_t>(aggs_.size());
  const uint16_t rank = static_cast<uint16_t>(sh_->cfg.rank);
  bool any = false;
  for (uint32_t a = 0; a < n_aggs; ++a) {
    Agg& g = aggs_[a];
    const uint32_t rto = g.rto_us;
    while (!g.send_queue.empty() && g.window.can_send() && g.cwnd.allows(g.window.outstanding())) {
      Request* r = g.send_queue.front();
      const uint64_t k = striping_.packet(a, r->next_j[a], r->stripe_start);
      const size_t esize = dtype_size(r->dtype);
      // Sent behind the packets still outstanding on this path: its timer waits for them.
      const uint64_t ahead = g.window.outstanding();
      const auto payload = static_cast<uint32_t>(packet_count(r->plan, k) * esize);
      const uint32_t slot = g.window.claim();
      SlotEntry& e = g.window.entry(slot);
      e.offset = packet_offset(r->plan, k);
      e.count = packet_count(r->plan, k);
      e.dtype = r->dtype;
      e.op = r->op;
      e.req = r;
      e.src = r->send + e.offset * esize;
      e.rto_us = rto;
      e.first_sent_ns = e.sent_ns = now;
      e.first_tx = e.last_tx = ++g.tx_stamp;
      e.deadline_ns = first_deadline(g, ahead, payload, r->root >= 0, now);
      next_timer_ns_ = std::min(next_timer_ns_, e.deadline_ns);
      proto::DataHeader h;
      h.type = proto::PacketType::kContrib;
      if (r->root >= 0) {
        h.flags = proto::kFlagOwned;
        h.owner = static_cast<uint16_t>(r->root);
      }
      h.job_id = g.j.info.job_id;
      h.contributor = rank;
      h.job_token = g.j.job_token;
      h.slot = slot;
      h.generation = e.generation;
      h.offset = e.offset;
      h.count = e.count;
      h.dtype = e.dtype;
      h.op = e.op;
      if (g.mac != nullptr) h.flags |= proto::kFlagMac;
      proto::encode_data_header(h, e.header);
      if (!queue_tx(g, a, slot)) return any;
      ++r->next_j[a];
      if (striping_.packet(a, r->next_j[a], r->stripe_start) >= r->plan.n_packets) {
        g.send_queue.pop_front();
      }
      any = true;
      if (tx_.size() >= 64) {
        flush_tx();
      }
    }
  }
  const bool waiting =
      std::any_of(aggs_.begin(), aggs_.end(), [](const Agg& g) { return !g.send_queue.empty(); });
  if (waiting) {
    sh_->ctr.window_full.begin(static_cast<uint64_t>(now));
  } else {
    sh_->ctr.window_full.end(static_cast<uint64_t>(now));
  }
  return any;
}

bool Progress::queue_tx(Agg& g, uint32_t a, uint32_t slot) {
  SlotEntry& e = g.window.entry(slot);
  const auto len = static_cast<uint32_t>(e.count * dtype_size(e.dtype));
  const uint8_t* trailer = nullptr;
  if (g.j.mac_key.has_value()) {
    // A fresh sequence number for every transmission, resends included: one IV, one message.
    if (g.mac == nullptr || !g.mac->sign(e.header, e.src, len, static_cast<uint32_t>(sh_->cfg.rank),
                                         ++g.mac_seq, e.trailer)) {
      fail_engine("data MAC: libcrypto could not sign a contribution", static_cast<int>(a));
      return false;
    }
    trailer = e.trailer;
  }
  tx_.push_back({g.port_addrs[slot % g.port_addrs.size()], e.header, e.src, len, trailer});
  return true;
}

void Progress::flush_tx() {
  if (tx_.empty()) {
    return;
  }
  udp_->send(tx_);
  tx_.clear();
}

bool Progress::drain(UdpChannel& ch, const JoinedAggregator* group_of, int64_t now) {
  Counters& c = sh_->ctr;
  const uint64_t accepted = c.results_accepted.load(std::memory_order_relaxed);
  bool any = false;
  for (int i = 0; i < kMaxRxBatchesPerRound && !failed_; ++i) {
    const std::span<const InDatagram> batch = ch.receive();
    if (batch.empty()) {
      break;
    }
    any = true;
    for (const InDatagram& d : batch) {
      if (group_of != nullptr && !from_aggregator(*group_of, d.from)) {
        c.drop(proto::DropReason::kWrongSource);  // sent to the group by someone else
        continue;
      }
      on_result(d.data, d.len, d.truncated, now);
      if (failed_) {
        break;
      }
    }
    if (batch.size() < 32) {
      break;  // the socket is probably drained
    }
  }
  if (group_of != nullptr) {
    Counters::add(c.multicast_results,
                  c.results_accepted.load(std::memory_order_relaxed) - accepted);
  }
  return any;
}

bool Progress::receive(int64_t now) {
  bool any = drain(*udp_, nullptr, now);
  for (Agg& g : aggs_) {
    if (g.j.group_rx && !failed_) {
      any |= drain(*g.j.group_rx, &g.j, now);
    }
  }
  for (Agg& g : aggs_) {
    if (!g.delivered_since_scan || failed_) {
      continue;
    }
    g.delivered_since_scan = false;
    fast_retransmit(g, now);
  }
  // Invariant: tx_ points into window entries (header, payload); send before send_new()
  // can reuse a slot for a new packet.
  flush_tx();
  return any;
}

bool Progress::result_mac_ok(Agg& g, const proto::DataHeader& h, const uint8_t* datagram,
                             const uint8_t* payload) {
  const uint8_t* trailer = payload + h.wire_payload_bytes();
  return h.mac() && g.mac != nullptr &&
         (proto::DataMac::sender_of(trailer) & proto::kAggSender) != 0 &&
         g.mac->verify(datagram, payload, h.wire_payload_bytes(), trailer);
}

Progress::Agg* Progress::result_source(const proto::DataHeader& h) {
  bool job_seen = false;
  for (Agg& cand : aggs_) {
    if (cand.j.info.job_id != h.job_id) {
      continue;
    }
    job_seen = true;
    if (cand.j.job_token == h.job_token) {
      return &cand;
    }
  }
  sh_->ctr.drop(job_seen ? proto::DropReason::kBadToken : proto::DropReason::kUnknownJob);
  return nullptr;
}

void Progress::place_result(Request& r, const SlotEntry& e, const proto::DataHeader& h,
                            const uint8_t* payload) {
  const size_t at = e.offset * dtype_size(e.dtype), n = h.payload_bytes(), end = at + n;
  // The part of this payload that also goes to the failover's copy of the result's end
  // (ResultCopy): [lo, end), written in the same pass while the payload is in cache.
  const size_t lo = r.tail.dst != nullptr ? std::clamp(r.tail.from, at, end) : end;
  uint8_t* kept = lo < end ? r.tail.dst + (lo - r.tail.from) : nullptr;
  // A large result is not read back from this core's cache before it is evicted: it goes
  // to memory with streaming stores (stream_copy.h). A small one stays cached for its reader.
  if (r.bytes() < kStreamedResultBytes) {
    std::memcpy(r.recv + at, payload, n);
    if (kept != nullptr) stream_copy(kept, payload + (lo - at), end - lo);
  } else {
    stream_copy(r.recv + at, payload, lo - at);
    if (kept != nullptr) stream_copy_twice(r.recv + lo, kept, payload + (lo - at), end - lo);
  }
}

void Progress::note_delivery(Agg& g, SlotEntry& e, const proto::DataHeader& h, uint32_t slot,
                             int64_t now) {
  // Round-trip sample from the first send. A result without the RETRANSMIT flag is the
  // aggregator's completion broadcast, not an answer to one of our resends, so it is a
  // valid sample even if we resent meanwhile (skipping those, as Karn's rule would, biases
  // the estimate low when resends were premature, which feeds more premature resends).
  if ((h.flags & proto::kFlagRetransmit) == 0) {
    rtt_sample(g, static_cast<double>(now - e.first_sent_ns) / 1000.0);
  }
  g.last_heard_ns = now;
  // For the overtaking rule: when was the transmission sent that this result answers?
  // A completion broadcast answers the first send; a RETRANSMIT result one of our resends.
  uint64_t& delivered = g.delivered_tx[slot % g.port_addrs.size()];
  delivered = std::max(delivered, (h.flags & proto::kFlagRetransmit) ? e.last_tx : e.first_tx);
  g.last_result_ns = now;
  g.delivered_since_scan = true;
  e.spurious_check = e.retransmits > 0 && (h.flags & proto::kFlagRetransmit) == 0;
  e.spurious_gen = e.generation;
  const uint32_t before = g.cwnd.window();
  g.cwnd.on_delivered();
  if (g.cwnd.window() != before) {
    publish_cwnd();
  }
  rate_sample(g, uint64_t{e.count} * dtype_size(e.dtype), now);
}

void Progress::on_result(const uint8_t* data, size_t len, bool truncated, int64_t now) {
  Counters& c = sh_->ctr;
  if (truncated) {
    c.drop(proto::DropReason::kOversized);
    return;
  }
  proto::DataHeader h;
  const uint8_t* payload = nullptr;
  const proto::DropReason pr =
      proto::parse_data({data, len}, proto::kMaxPayloadBytes, &h, &payload);
  if (pr != proto::DropReason::kOk) {
    c.drop(pr);
    return;
  }
  if (h.type == proto::PacketType::kProbe) {
    return;  // a multicast probe that came after the agreement (SPEC §8): nothing to do
  }
  if (h.type != proto::PacketType::kResult) {
    c.drop(proto::DropReason::kWrongDirection);
    return;
  }
  Agg* g = result_source(h);
  if (g == nullptr) {
    return;
  }
  // Data MAC (SPEC.md §6): from an aggregator that signs, only what its threads signed.
  if (g->j.mac_key.has_value() ? !result_mac_ok(*g, h, data, payload) : h.mac()) {
    c.drop(proto::DropReason::kBadMac);
    return;
  }
  uint32_t slot = 0;
  const proto::DropReason mr = g->window.match(h, &slot);
  if (mr != proto::DropReason::kOk) {
    c.drop(mr);
    if (mr == proto::DropReason::kDuplicate && (h.flags & proto::kFlagRetransmit) != 0) {
      SlotEntry& d = g->window.entry(h.slot);  // match() checked the slot's range
      if (d.spurious_check && d.spurious_gen == h.generation) {
        d.spurious_check = false;  // count each packet once
        Counters::add(c.spurious_retransmits);
      }
    }
    return;
  }
  SlotEntry& e = g->window.entry(slot);
  Request* r = e.req;
  // Only the payload completes a packet whose result this rank receives; a rank that does not
  // receive it takes the acknowledgement (or, from an aggregator that sends every rank the
  // result, ignores the payload).
  const bool receiver = r->receives_result(sh_->cfg.rank);
  if (h.ack() && receiver) {
    c.drop(proto::DropReason::kSlotMismatch);
    return;
  }
  if (receiver) {
    place_result(*r, e, h, payload);
  }
  note_delivery(*g, e, h, slot, now);
  g->window.complete(slot);
  Counters::add(c.results_accepted);
  if (--r->results_pending == 0) {
    finish(r, RequestState::kDone, "");
  }
}

}  // namespace conflux::client
