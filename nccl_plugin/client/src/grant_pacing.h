// SPDX-License-Identifier: Apache-2.0
// GrantPacing: the least time an aggregator that holds this job to its grant takes to send the
// results of the packets outstanding ahead of a new one, and the first retransmission timer that
// follows from it.
//
// Why the measured delivery rate is not enough under pacing: the daemon paces a job's result
// bytes with token buckets (max_mbps, Job::pacer) that hold a burst of max(64 KiB, 1 ms). Each
// time the ranks' windows shrink the bucket fills, and the next results leave at memory speed
// until it is empty: DeliveryRate's windowed maximum takes that burst for the path's rate (up to
// 2x the grant at 100 Mbit/s) and the timer of a packet sent behind a window of results fired
// too soon. A cap of 100 Mbit/s on one 2-rank job resent 4-5 % of its results, nearly all of them
// needless, and every timeout halved a rank's congestion window, which delays the other rank's
// results (a slot needs every contribution), whose timers fire next. The grant is what the job
// is paced to in the long run (Capacity share_mbps, SPEC.md §3: a job alone gets the whole
// capacity, max_mbps when capped), so a packet sent behind N results cannot be answered before
// the aggregator has sent N results' datagrams to every rank that gets them at that rate.
// While the daemon lends the job an idle job's share it is faster than this: the timer then only
// waits longer than needed (loss recovery is later, never wrong), as with a slow-start window.
// Pure logic, no clock and no I/O; owned by the progress thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace conflux::client {

// Where the aggregator sends a result: one datagram to a multicast group, or one per rank
// served there (the ranks that take no payload of an OWNED packet get a header-only ACK).
struct ResultFanout {
  uint32_t ranks = 1;          // ranks this aggregator serves (the leaf's members in a tree)
  bool multicast = false;      // the job's results go to its group on this aggregator
  uint32_t header_bytes = 48;  // data header
  uint32_t trailer_bytes = 0;  // data MAC trailer, when the job signs
};

class GrantPacing {
 public:
  explicit GrantPacing(const ResultFanout& f, uint32_t grant_mbps = 0)
      : f_(f), grant_mbps_(grant_mbps) {}

  // The job's grant on this aggregator (a Capacity update); 0 = unknown: no bound.
  void set_grant(uint32_t mbps) { grant_mbps_ = mbps; }
  uint32_t grant_mbps() const { return grant_mbps_; }

  // Bytes the aggregator sends for one packet's result of `payload_bytes`; `owned`: only one
  // rank takes the payload (the others an ACK).
  uint64_t result_bytes(uint32_t payload_bytes, bool owned) const {
    const uint64_t full = uint64_t{f_.header_bytes} + payload_bytes + f_.trailer_bytes;
    if (f_.multicast) {
      return full;
    }
    const uint64_t ranks = std::max<uint32_t>(1, f_.ranks);
    const uint64_t ack = uint64_t{f_.header_bytes} + f_.trailer_bytes;
    return owned ? full + (ranks - 1) * ack : ranks * full;
  }

  // Microseconds the aggregator needs at the grant to send the results of `ahead` packets of
  // `payload_bytes` each; 0 without a grant.
  double queue_us(uint64_t ahead, uint32_t payload_bytes, bool owned) const {
    if (grant_mbps_ == 0) {
      return 0;
    }
    const double bytes_per_us = static_cast<double>(grant_mbps_) / 8.0;  // 1 Mbit/s = 1/8 B/us
    return static_cast<double>(ahead * result_bytes(payload_bytes, owned)) / bytes_per_us;
  }

  // The most packets of `payload_bytes` worth keeping outstanding on this aggregator: what the
  // grant drains in twice the longer of rto_min and the least round trip seen (min_rtt_us, 0 =
  // none yet), at least 1; UINT32_MAX without a grant. The pacer stays busy while the ranks turn
  // a result into the next contribution (the round trip, a wake-up: rto_min is what the timers
  // allow a busy host for that), and no longer: a deeper queue at the aggregator only delays
  // results, and the ranks' windows differ after a loss (a slot waits for every rank), so a
  // packet waits up to a window's drain longer than the bytes ahead of it (first_timeout_us
  // covers a quarter of that plus rto_min). W = 64 packets of 8 KiB at 100 Mbit/s for 2 ranks
  // is 84 ms of queue: 4-5 % of the results resent; 8 packets (10 ms): 0.1 %.
  uint32_t window_limit(uint32_t payload_bytes, double rto_min_us, double min_rtt_us) const {
    if (grant_mbps_ == 0) {
      return UINT32_MAX;
    }
    const double target_us = 2.0 * std::max(rto_min_us, min_rtt_us);
    const double per_packet_us = queue_us(1, payload_bytes, false);
    const double n = std::ceil(target_us / per_packet_us);
    return n >= static_cast<double>(UINT32_MAX) ? UINT32_MAX
                                                : std::max<uint32_t>(1, static_cast<uint32_t>(n));
  }

 private:
  ResultFanout f_;
  uint32_t grant_mbps_;
};

// The first timer of a new packet, microseconds after its send: the RTO, and not before the
// results ahead of it can have come back, the longer of what the measured delivery rate and the
// grant allow (each a least time), 1.25x for the jitter of both plus rto_min for the packet's own
// round trip; the queue's part is capped by rto_max.
inline double first_timeout_us(double rto_us, double measured_queue_us, double grant_queue_us,
                               double rto_min_us, double rto_max_us) {
  const double queue_us = std::max(measured_queue_us, grant_queue_us);
  return std::max(rto_us, std::min(rto_max_us, 1.25 * queue_us + rto_min_us));
}

}  // namespace conflux::client
