// SPDX-License-Identifier: Apache-2.0
// One queue of the DPDK dataplane: an RX/TX queue pair of the port, the lcore loop that polls
// it, and the per-queue engine state (SlotEngine, RxPipeline, ResultBatch, neighbour table).
// Constructed by DpdkDataplane (dpdk_dataplane.cc, main thread); run() is the body of the
// queue's lcore (dpdk_datapath.cc) and is the only code that touches the state afterwards.
// With `max_mbps` a TX burst waits for this queue's token bucket (max_mbps / threads), and,
// while several jobs are live, each job's result frames for its job's bucket too (its fair share
// / threads, Job::pacer), as in the kernel UDP dataplane: a job in debt does not stop the
// lcore. Its frames are set aside as they are (the mbufs, no copy) and sent, in order, as its
// bucket refills; a job alone with frames set aside is lent what the others leave.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/dataplane/dpdk/dpdk_counters.h"
#include "aggregator/dataplane/dpdk/frame.h"
#include "aggregator/dataplane/dpdk/neighbor_table.h"
#include "aggregator/engine/rx_pipeline.h"
#include "aggregator/engine/set_aside.h"
#include "aggregator/engine/slot_engine.h"
#include "aggregator/util/rate_limit.h"
#include "aggregator/util/token_bucket.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;

namespace conflux::agg::dpdk {

struct QueueSetup {
  uint16_t port_id = 0;
  uint16_t queue = 0;
  unsigned n_queues = 1;
  LocalAddr local;                  // our MAC/IP/VLAN and the data port range of the dataplane
  uint16_t udp_port = 0;            // the data port this queue serves (source port of its results)
  rte_mempool* pkt_pool = nullptr;  // direct mbufs for full frames (result payloads)
  rte_mempool* hdr_pool = nullptr;  // small direct mbufs: per-worker headers, ARP
  rte_mempool* clone_pool = nullptr;  // indirect mbufs; nullptr = copy the payload per worker
  bool tx_ip_csum = false;            // the port computes IPv4 header checksums
  bool tx_udp_csum = false;           // the port computes UDP checksums
  uint32_t idle_sleep_us = 0;  // sleep this long after kIdlePolls empty polls (0 = always spin)
  uint8_t multicast_ttl = 1;   // IPv4 TTL of results sent to a job's group (SPEC §8)
  const std::atomic<bool>* stop = nullptr;
  const EgressCap* egress_cap = nullptr;  // the dataplane's max_mbps (changeable while running)
  // Software steering: n_queues rings (multi-producer, single-consumer), inboxes[q] drained
  // by queue q; a datagram for a slot of queue q received elsewhere is handed over there.
  // nullptr = the port steers (rte_flow) or there is one queue.
  rte_ring* const* inboxes = nullptr;
  // Complete frames other threads built for this queue to send (the control thread's multicast
  // PROBEs: TX queues are not thread-safe). Queue 0 only; nullptr elsewhere.
  rte_ring* control_tx = nullptr;
};

class DpdkQueue final {
 public:
  static constexpr uint16_t kBurst = 32;
  static constexpr uint32_t kTxBuffer = 256;
  static constexpr uint32_t kIdlePolls = 1024;
  static constexpr uint64_t kDrainUs = 100;  // TX drain timer
  // Result frames set aside while their jobs' buckets are in debt, at most (the pools hold
  // this many more per queue); past it a frame is dropped and its worker asks again.
  static constexpr uint32_t kMaxDeferred = 1024;

  DpdkQueue(const QueueSetup& s, JobTable& jobs, const Config& cfg);
  ~DpdkQueue();
  DpdkQueue(const DpdkQueue&) = delete;
  DpdkQueue& operator=(const DpdkQueue&) = delete;

  // The lcore body: poll, aggregate, transmit until *stop. Queue thread only.
  void run();

  uint16_t udp_port() const { return s_.udp_port; }
  const QueueCounters& counters() const { return counters_; }
  const FrameCounters& frame_counters() const { return frames_; }

 private:
  // One frame from the RX queue (from_peer false) or from this queue's inbox (true: already
  // checked by the queue that received it, which marked its checksums good).
  void handle(rte_mbuf* m, bool from_peer);
  bool hand_over(rte_mbuf* m, unsigned owner);  // false: not handed over (caller frees)
  uint16_t drain_inbox();                       // frames taken from inboxes[queue]
  void drain_control_tx();                      // control_tx frames -> TX buffer
  void transmit_results();                      // ResultBatch -> TX buffer, then clear()
  void send_result(rte_mbuf* payload, uint32_t psum, const sockaddr_in& to, Job* job);
  void send_arp(uint16_t op, const MacAddr& mac, uint32_t ip);
  void request_neighbor(uint32_t ip);  // rate-limited ARP request
  // result_bytes 0 = not a RESULT; job_id: the job a RESULT belongs to (paced by its bucket),
  // 0 = none or already charged.
  void enqueue(rte_mbuf* m, uint32_t result_bytes, uint32_t job_id);
  void flush_tx();
  // Under pacing: keeps in the TX buffer the frames whose jobs may send now (charging their
  // buckets) and sets the others aside, in order per job.
  void pace_tx();
  // Moves the frames set aside whose jobs may send now into the TX buffer, oldest first.
  void drain_deferred();

  QueueSetup s_;
  JobTable& jobs_;
  QueueCounters counters_;
  FrameCounters frames_;
  SlotEngine engine_;
  RxPipeline pipeline_;
  ResultBatch results_;
  NeighborTable neighbors_;
  std::vector<rte_mbuf*> tx_;
  std::vector<uint32_t> tx_bytes_;
  std::vector<uint32_t> tx_jobs_;  // job id of each frame to charge (0: none), see enqueue
  // A result frame of a job whose bucket was in debt (aggregator/engine/set_aside.h).
  struct Deferred {
    rte_mbuf* m;
    uint32_t bytes;
  };
  SetAside<Deferred> deferred_;
  uint32_t tx_n_ = 0;
  uint64_t tx_first_tsc_ = 0;
  uint64_t last_arp_tsc_ = 0;
  uint16_t ip_id_ = 0;
  size_t hdr_len_;
  std::unique_ptr<uint8_t[]> scratch_;  // linearized multi-segment frames
  size_t scratch_len_;
  RateLimiter warn_limit_;
  QueueEgress egress_;  // this queue's share of the daemon's max_mbps (paces flush_tx)
};

}  // namespace conflux::agg::dpdk
