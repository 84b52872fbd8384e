// SPDX-License-Identifier: Apache-2.0
// The progress state of one Engine: all network I/O. It takes submitted requests in
// order, cuts them into packets, stripes them over the aggregators, keeps a window of
// W outstanding packets per aggregator, validates results, retransmits on timeout,
// sends heartbeats and watches the control channels. run() is the progress thread; step()
// is one round of it, which a polling caller may run too (caller progress, engine.h).
// Whoever holds Shared::progress_mu owns everything here; other threads reach it only
// through Shared.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "congestion.h"
#include "delivery_rate.h"
#include "grant_pacing.h"
#include "join.h"
#include "shared.h"
#include "striping.h"
#include "udp_channel.h"
#include "window.h"

namespace conflux::client {

// The progress thread counts time in nanoseconds of now_ns() (control_channel.h).
inline constexpr int64_t kMs = 1'000'000;
inline int64_t ns(std::chrono::nanoseconds d) { return d.count(); }

class Progress {
 public:
  Progress(Shared* shared, UdpChannel* udp, std::vector<JoinedAggregator> aggs,
           uint32_t payload_bytes);

  void run();  // the thread body; returns when shared->stop is set

  // One round of progress: submissions, results, timers, new packets, control. The caller
  // holds Shared::progress_mu (the progress thread, or a caller of Engine::test). True when
  // it did something.
  bool step(int64_t now);

  // After run() returned: sends Leave on every live control connection (best effort).
  void leave();

 private:
  struct Agg {
    Agg(JoinedAggregator joined, uint32_t slots, const CongestionConfig& cc)
        : j(std::move(joined)), window(slots), cwnd(cc, slots) {}
    JoinedAggregator j;
    SlotWindow window;
    CongestionWindow cwnd;                // how much of the window may be outstanding
    std::vector<sockaddr_in> port_addrs;  // data address per JoinAck port
    std::deque<Request*> send_queue;      // requests with packets left for this aggregator
    bool alive = true;
    int64_t last_heard_ns = 0;
    int64_t next_heartbeat_ns = 0;
    // Retransmission timeout for new packets (RFC 6298 style; samples from completion
    // broadcasts, see on_result; a timeout's backoff is kept until the next sample).
    double srtt_us = 0, rttvar_us = 0;
    double min_rtt_us = 0;  // the least round trip sampled (0: none yet)
    uint32_t rto_us = 0;
    // How fast results come back: a new packet's first timer waits at least for the bytes
    // outstanding ahead of it (delivery_rate.h).
    DeliveryRate rate;
    // ... and, where the aggregator paces the job, for its grant to send them (grant_pacing.h).
    GrantPacing pacing{ResultFanout{}};
    std::vector<uint64_t> delivered_tx;  // per port: latest stamp answered by a result
    uint64_t tx_stamp = 0;               // last transmission stamp handed out
    bool delivered_since_scan = false;
    int64_t last_result_ns = 0;  // when the latest accepted result arrived
    // Data MAC (SPEC.md §6): keyed when the aggregator signs; this rank's sequence number.
    std::unique_ptr<proto::DataMac> mac;
    uint64_t mac_seq = 0;
  };

  // progress.cc: loop, control plane, failure.
  bool take_submissions();
  bool poll_control(int64_t now);
  void on_grant(size_t aggregator, const proto::Capacity& c);  // a Capacity while running
  void handle_abort();
  void fail_engine(const std::string& reason, int aggregator = -1);
  void finish(Request* r, RequestState st, const std::string& error);
  // Blocks in ppoll until input, a wake() or the next timer; releases `lk` (progress_mu)
  // for the wait, so callers may progress meanwhile.
  void sleep(int64_t now, std::unique_lock<std::mutex>& lk);
  // While a caller polls: blocks until wake() or until the caller's claim runs out.
  void doze(int64_t now);
  // Keeps Shared::bulk_in_flight in step with unfinished_bytes_.
  void publish_bulk();
  int64_t next_wakeup(int64_t now) const;
  // How long sleep() listens only for a wake() before it waits on the sockets: > 0 only while
  // more than spin_max_bytes are in flight (ClientConfig::bulk_wake).
  int64_t bulk_pause_ns() const;

  // datapath.cc: packets; recovery.cc: loss recovery.
  bool send_new(int64_t now);
  bool receive(int64_t now);
  // Takes up to a few batches from `ch`; `group_of`: the aggregator whose multicast group `ch`
  // receives (only its datagrams are taken), or null for the unicast socket.
  bool drain(UdpChannel& ch, const JoinedAggregator* group_of, int64_t now);
  void check_timers(int64_t now);
  void on_result(const uint8_t* data, size_t len, bool truncated, int64_t now);
  // on_result's steps: the job's aggregator by id and token (nullptr: dropped, counted); the
  // payload into the request's buffer (and the failover's copy of its end); what a delivered
  // result tells the window, the round trip and the rate.
  Agg* result_source(const proto::DataHeader& h);
  void place_result(Request& r, const SlotEntry& e, const proto::DataHeader& h,
                    const uint8_t* payload);
  void note_delivery(Agg& g, SlotEntry& e, const proto::DataHeader& h, uint32_t slot, int64_t now);
  // Queues slot's entry of aggregator a (g) for sending, signed when the job has a data MAC.
  // False when it could not be signed (the engine has failed).
  bool queue_tx(Agg& g, uint32_t a, uint32_t slot);
  bool result_mac_ok(Agg& g, const proto::DataHeader& h, const uint8_t* datagram,
                     const uint8_t* payload);
  void flush_tx();
  void rtt_sample(Agg& g, double sample_us);
  // Bounds g's congestion window by what its grant drains in time (grant_pacing.h); after a
  // grant update and when the least round trip falls.
  void apply_grant_ceiling(Agg& g);
  // When the timer of a packet of `payload_bytes` sent now behind `ahead` outstanding packets
  // first fires: after the RTO, and not before their results can have drained at the measured
  // rate (delivery_rate.h) and at the grant (grant_pacing.h); `owned`: an OWNED packet.
  int64_t first_deadline(const Agg& g, uint64_t ahead, uint32_t payload_bytes, bool owned,
                         int64_t now) const;
  // A result of `bytes` arrived: the delivery rate's sample.
  void rate_sample(Agg& g, uint64_t bytes, int64_t now);
  void fast_retransmit(Agg& g, int64_t now);
  void retransmit(Agg& g, uint32_t slot, int64_t now);
  void congestion_event(Agg& g, uint64_t seq);
  void publish_cwnd();

  Shared* sh_;
  UdpChannel* udp_;
  std::vector<Agg> aggs_;
  uint32_t payload_bytes_;
  Striping striping_;  // which aggregator each packet of a request goes to (its weights)
  std::vector<std::shared_ptr<Request>> active_;  // owns the requests in flight
  size_t finished_in_active_ = 0;
  size_t unfinished_ = 0;          // requests of active_ not finished (busy time)
  uint64_t unfinished_bytes_ = 0;  // their bytes: the thread spins only while few are in flight
  std::vector<OutDatagram> tx_;
  int64_t next_timer_ns_ = 0;  // earliest retransmission deadline (or later)
  int64_t last_work_ns_ = 0;
  int64_t next_control_ns_ = 0;
  bool failed_ = false;
};

}  // namespace conflux::client
