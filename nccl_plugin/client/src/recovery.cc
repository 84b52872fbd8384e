// SPDX-License-Identifier: Apache-2.0
// Loss recovery on the progress thread: round-trip estimation, retransmission timers
// with exponential backoff, probing, and early ("fast") retransmission of overtaken
// packets (protocol/SPEC.md §4, "Loss, duplication, reordering").
#include <algorithm>
#include <climits>
#include <cmath>

#include "conflux/protocol/byteorder.h"
#include "progress.h"

namespace conflux::client {
namespace {
constexpr size_t kFlagsOffset = 6;  // DataHeader::flags inside the encoded header
}  // namespace

void Progress::rtt_sample(Agg& g, double sample_us) {
  if (g.min_rtt_us == 0 || sample_us < g.min_rtt_us) {
    g.min_rtt_us = sample_us;
    apply_grant_ceiling(g);
  }
  if (g.srtt_us == 0) {
    g.srtt_us = sample_us;
    g.rttvar_us = sample_us / 2;
  } else {
    g.rttvar_us = 0.75 * g.rttvar_us + 0.25 * std::abs(g.srtt_us - sample_us);
    g.srtt_us = 0.875 * g.srtt_us + 0.125 * sample_us;
  }
  // The round trip includes waiting for the slowest rank, so it varies a lot; srtt + 4 var
  // keeps spurious retransmissions rare without delaying real loss recovery much. The
  // variance term has a floor (rto_min): on a busy host a thread that is descheduled for
  // a few ms stretches one round trip far beyond 4 var of an otherwise steady path.
  const double hi = static_cast<double>(sh_->cfg.rto_max.count());
  const double lo = std::min(static_cast<double>(sh_->cfg.rto_min.count()), hi);
  g.rto_us = static_cast<uint32_t>(std::clamp(g.srtt_us + std::max(4 * g.rttvar_us, lo), lo, hi));
}

void Progress::apply_grant_ceiling(Agg& g) {
  const uint32_t before = g.cwnd.window();
  g.cwnd.set_ceiling(g.pacing.window_limit(
      g.j.info.payload_bytes, static_cast<double>(sh_->cfg.rto_min.count()), g.min_rtt_us));
  if (g.cwnd.window() != before) {
    publish_cwnd();
  }
}

int64_t Progress::first_deadline(const Agg& g, uint64_t ahead, uint32_t payload_bytes, bool owned,
                                 int64_t now) const {
  const double measured_us = g.rate.queue_us(ahead * payload_bytes);
  const double grant_us = g.pacing.queue_us(ahead, payload_bytes, owned);
  const double timeout_us = first_timeout_us(static_cast<double>(g.rto_us), measured_us, grant_us,
                                             static_cast<double>(sh_->cfg.rto_min.count()),
                                             static_cast<double>(sh_->cfg.rto_max.count()));
  return now + static_cast<int64_t>(timeout_us * 1000);
}

void Progress::rate_sample(Agg& g, uint64_t bytes, int64_t now) {
  // Samples of at least half a round trip (and 1 ms): long enough to span a batch of results
  // taken in one wake-up, short enough to see a bulk transfer's rate within a collective.
  const auto interval_ns = static_cast<int64_t>(std::max(1000.0, g.srtt_us / 2) * 1000);
  g.rate.on_delivered(bytes, now, interval_ns);
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
    if (e.last_tx < g.delivered_tx[slot % ports]) {
      Counters::add(sh_->ctr.fast_retransmits);
      congestion_event(g, e.seq);
      retransmit(g, slot, now);
    }
  }
}

void Progress::retransmit(Agg& g, uint32_t slot, int64_t now) {
  SlotEntry& e = g.window.entry(slot);
  const uint16_t flags = proto::load_be<uint16_t>(e.header + kFlagsOffset);  // keeps OWNED
  proto::store_be<uint16_t>(e.header + kFlagsOffset, flags | proto::kFlagRetransmit);
  ++e.retransmits;
  e.sent_ns = now;
  e.last_tx = ++g.tx_stamp;
  e.deadline_ns = now + int64_t{e.rto_us} * 1000;
  next_timer_ns_ = std::min(next_timer_ns_, e.deadline_ns);
  if (!queue_tx(g, static_cast<uint32_t>(&g - aggs_.data()), slot)) return;
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
    // Pass 1: stalls, and which packets are due.
    uint32_t expired = 0, oldest_slot = 0;
    uint64_t oldest_seq = UINT64_MAX;
    int64_t earliest_sent = INT64_MAX;
    for (uint32_t s = 0; s < g.window.size(); ++s) {
      const SlotEntry& e = g.window.entry(s);
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
        ++expired;
        earliest_sent = std::min(earliest_sent, e.sent_ns);
        if (e.seq < oldest_seq) {
          oldest_seq = e.seq;
          oldest_slot = s;
        }
      }
    }
    // No result at all since the due packets were sent: most likely some rank has not
    // reached this collective yet (or everything was lost). Probe with the oldest packet
    // only and back the others off; when the probe's answer comes, the overtaking rule
    // (fast_retransmit) resends the rest if they were really lost.
    const bool probe_only = expired > 1 && g.last_result_ns < earliest_sent;
    // Pass 2: back off every due packet; resend all of them, or the probe.
    for (uint32_t s = 0; s < g.window.size(); ++s) {
      SlotEntry& e = g.window.entry(s);
      if (e.state != SlotEntry::State::kWaiting) {
        continue;
      }
      if (now >= e.deadline_ns) {
        e.rto_us = std::min(rto_max, e.rto_us * 2);
        g.rto_us = std::max(g.rto_us, e.rto_us);  // keep the backoff for new packets
        if (!probe_only || s == oldest_slot) {
          // A probe (nothing answered since these were sent: a late rank, most likely)
          // says nothing about congestion; a timeout while others are answered does.
          if (!probe_only) {
            congestion_event(g, e.seq);
          }
          retransmit(g, s, now);
        } else {
          e.deadline_ns = now + int64_t{e.rto_us} * 1000;
        }
      }
      next = std::min(next, e.deadline_ns);
    }
  }
  next_timer_ns_ = next;
}

void Progress::congestion_event(Agg& g, uint64_t seq) {
  if (g.cwnd.on_loss(seq, g.window.next_seq())) {
    Counters::add(sh_->ctr.cwnd_decreases);
    publish_cwnd();
  }
}

void Progress::publish_cwnd() {
  uint64_t sum = 0;
  for (const Agg& g : aggs_) {
    sum += g.cwnd.window();
  }
  sh_->ctr.congestion_window.store(sum, std::memory_order_relaxed);
}

}  // namespace conflux::client
