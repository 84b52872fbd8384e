// The progress thread's packet path: cut and send contributions, take results,
// retransmit on timeout (protocol/SPEC.md §4). No locks, no virtual calls.
#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>

#include "conflux/protocol/byteorder.h"
#include "progress.h"

namespace conflux::client {

static_assert(std::endian::native == std::endian::little,
              "payload elements are little-endian on the wire and copied as is");

namespace {
constexpr size_t kFlagsOffset = 6;  // DataHeader::flags inside the encoded header
constexpr int kMaxRxBatchesPerRound = 8;
}  // namespace

void Progress::rtt_sample(Agg& g, double sample_us) {
  if (g.srtt_us == 0) {
    g.srtt_us = sample_us;
    g.rttvar_us = sample_us / 2;
  } else {
    g.rttvar_us = 0.75 * g.rttvar_us + 0.25 * std::abs(g.srtt_us - sample_us);
    g.srtt_us = 0.875 * g.srtt_us + 0.125 * sample_us;
  }
  // The round trip includes waiting for the slowest rank, so it varies a lot; srtt + 4 var
  // keeps spurious retransmissions rare without delaying real loss recovery much.
  const double lo = static_cast<double>(sh_->cfg.rto_initial.count());
  const double hi = static_cast<double>(sh_->cfg.rto_max.count());
  g.rto_us = static_cast<uint32_t>(std::clamp(g.srtt_us + 4 * g.rttvar_us, lo, hi));
}

bool Progress::send_new(int64_t now) {
  const uint32_t n_aggs = static_cast<uint32_t>(aggs_.size());
  const uint16_t rank = static_cast<uint16_t>(sh_->cfg.rank);
  bool any = false;
  for (uint32_t a = 0; a < n_aggs; ++a) {
    Agg& g = aggs_[a];
    const uint32_t rto = g.rto_us;
    while (!g.send_queue.empty() && g.window.can_send()) {
      Request* r = g.send_queue.front();
      const uint64_t k = aggregator_packet(a, r->next_j[a], n_aggs);
      const size_t esize = dtype_size(r->dtype);
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
      e.deadline_ns = now + int64_t{rto} * 1000;
      next_timer_ns_ = std::min(next_timer_ns_, e.deadline_ns);
      proto::DataHeader h;
      h.type = proto::PacketType::kContrib;
      h.job_id = g.j.info.job_id;
      h.contributor = rank;
      h.job_token = g.j.job_token;
      h.slot = slot;
      h.generation = e.generation;
      h.offset = e.offset;
      h.count = e.count;
      h.dtype = e.dtype;
      h.op = e.op;
      proto::encode_data_header(h, e.header);
      tx_.push_back({g.port_addrs[slot % g.port_addrs.size()], e.header, e.src,
                     static_cast<uint32_t>(e.count * esize)});
      ++r->next_j[a];
      if (aggregator_packet(a, r->next_j[a], n_aggs) >= r->plan.n_packets) {
        g.send_queue.pop_front();
      }
      any = true;
      if (tx_.size() >= 64) {
        flush_tx();
      }
    }
  }
  return any;
}

void Progress::flush_tx() {
  if (tx_.empty()) {
    return;
  }
  udp_->send(tx_);
  tx_.clear();
}

bool Progress::receive(int64_t now) {
  bool any = false;
  for (int i = 0; i < kMaxRxBatchesPerRound && !failed_; ++i) {
    const std::span<const InDatagram> batch = udp_->receive();
    if (batch.empty()) {
      break;
    }
    any = true;
    for (const InDatagram& d : batch) {
      on_result(d.data, d.len, d.truncated, now);
      if (failed_) {
        break;
      }
    }
    if (batch.size() < 32) {
      break;  // the socket is probably drained
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
  if (h.type != proto::PacketType::kResult) {
    c.drop(proto::DropReason::kWrongDirection);
    return;
  }
  Agg* g = nullptr;
  bool job_seen = false;
  for (Agg& cand : aggs_) {
    if (cand.j.info.job_id != h.job_id) {
      continue;
    }
    job_seen = true;
    if (cand.j.job_token == h.job_token) {
      g = &cand;
      break;
    }
  }
  if (g == nullptr) {
    c.drop(job_seen ? proto::DropReason::kBadToken : proto::DropReason::kUnknownJob);
    return;
  }
  uint32_t slot = 0;
  const proto::DropReason mr = g->window.match(h, &slot);
  if (mr != proto::DropReason::kOk) {
    c.drop(mr);
    return;
  }
  SlotEntry& e = g->window.entry(slot);
  Request* r = e.req;
  std::memcpy(r->recv + e.offset * dtype_size(e.dtype), payload, h.payload_bytes());
  // Round-trip sample from the first send. A result without the RETRANSMIT flag is the
  // aggregator's completion broadcast, not an answer to one of our resends, so it is a
  // valid sample even if we resent meanwhile (skipping those, as Karn's rule would, biases
  // the estimate low when resends were premature, which feeds more premature resends).
  if ((h.flags & proto::kFlagRetransmit) == 0) {
    rtt_sample(*g, static_cast<double>(now - e.first_sent_ns) / 1000.0);
  }
  g->last_heard_ns = now;
  int64_t& delivered = g->delivered_sent_ns[slot % g->port_addrs.size()];
  delivered = std::max(delivered, e.first_sent_ns);
  g->delivered_since_scan = true;
  g->window.complete(slot);
  Counters::add(c.results_accepted);
  if (--r->results_pending == 0) {
    finish(r, Status::kDone, "");
  }
}

void Progress::fast_retransmit(Agg& g, int64_t now) {
  // Loss detection by overtaking (in the spirit of TCP RACK): one aggregator port is one
  // dataplane thread, which handles its datagrams in order, and every rank sends in
  // sequence order; so when a packet first sent after packet X's latest transmission has
  // its result and X has not, X (some rank's contribution, or our result) was lost. Resend
  // it now instead of waiting for its timer; it is resent again only if a packet sent
  // after this resend overtakes it too. A needless resend costs one duplicate.
  const uint32_t w = g.window.size();
  const size_t ports = g.port_addrs.size();
  for (uint32_t slot = 0; slot < w; ++slot) {
    SlotEntry& e = g.window.entry(slot);
    if (e.state != SlotEntry::State::kWaiting) {
      continue;
    }
    if (e.sent_ns < g.delivered_sent_ns[slot % ports]) {
      Counters::add(sh_->ctr.fast_retransmits);
      retransmit(g, slot, now);
    }
  }
}

void Progress::retransmit(Agg& g, uint32_t slot, int64_t now) {
  SlotEntry& e = g.window.entry(slot);
  proto::store_be<uint16_t>(e.header + kFlagsOffset, proto::kFlagRetransmit);
  ++e.retransmits;
  e.sent_ns = now;
  e.deadline_ns = now + int64_t{e.rto_us} * 1000;
  next_timer_ns_ = std::min(next_timer_ns_, e.deadline_ns);
  tx_.push_back({g.port_addrs[slot % g.port_addrs.size()], e.header, e.src,
                 static_cast<uint32_t>(e.count * dtype_size(e.dtype))});
  Counters::add(sh_->ctr.retransmits);
  if (tx_.size() >= 64) {
    flush_tx();
  }
}

void Progress::check_timers(int64_t now) {
  const ClientConfig& cfg = sh_->cfg;
  const int64_t stall_ns = std::chrono::nanoseconds(cfg.stall_timeout).count();
  const uint32_t rto_max = static_cast<uint32_t>(cfg.rto_max.count());
  int64_t next = INT64_MAX;
  for (size_t gi = 0; gi < aggs_.size(); ++gi) {
    Agg& g = aggs_[gi];
    if (g.window.outstanding() == 0) {
      continue;
    }
    for (uint32_t s = 0; s < g.window.size(); ++s) {
      SlotEntry& e = g.window.entry(s);
      if (e.state != SlotEntry::State::kWaiting) {
        continue;
      }
      if (stall_ns > 0 && now - e.first_sent_ns > stall_ns) {
        fail_engine("aggregator " + g.j.info.endpoint.to_string() + " returned no result for " +
                        std::to_string((now - e.first_sent_ns) / 1'000'000) + " ms (slot " +
                        std::to_string(s) + ", generation " + std::to_string(e.generation) + ")",
                    static_cast<int>(gi));
        return;
      }
      if (now >= e.deadline_ns) {
        e.rto_us = std::min(rto_max, e.rto_us * 2);
        g.rto_us = std::max(g.rto_us, e.rto_us);  // keep the backoff for new packets
        retransmit(g, s, now);
      }
      next = std::min(next, e.deadline_ns);
    }
  }
  next_timer_ns_ = next;
}

}  // namespace conflux::client
