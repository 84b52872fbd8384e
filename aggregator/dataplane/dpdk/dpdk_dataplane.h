// SPDX-License-Identifier: Apache-2.0
// DPDK poll-mode dataplane: one port, one RX/TX queue pair and one lcore per queue; queue i
// serves UDP port data_port + i (slot s on queue s % n). With more than one queue, rte_flow
// rules steer each UDP port to its queue. A port that cannot install them (af_packet and
// af_xdp vdevs, NICs without flow rules) gets RSS where it has it and SOFTWARE STEERING: each
// queue has an rte_ring inbox (multi-producer, single-consumer), and the queue that receives
// a datagram for another queue's slot hands the mbuf pointer to the owner's inbox (ring full:
// dropped and counted). ARP is answered by whichever queue receives it; queue 0 sends a
// gratuitous ARP at start. Multicast results (protocol/SPEC.md §8) are frames to the group's
// MAC (RFC 1112) built like unicast ones; the control thread's PROBEs go out through queue 0.
// Setup (EAL, mempools, port, queues, flows) in dpdk_dataplane.cc; datapath in
// dpdk_datapath.cc. This header has no DPDK types, so the registry can include it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/dataplane/dataplane.h"
#include "aggregator/dataplane/dpdk/frame.h"

struct rte_mempool;
struct rte_ring;

namespace conflux::agg {
namespace dpdk {
class DpdkQueue;
}

class DpdkDataplane final : public Dataplane {
 public:
  // Initializes the EAL once per process (cfg.dpdk_eal_args; later calls reuse it), then
  // configures and starts port cfg.dpdk_port with cfg.threads queues. Main thread.
  static std::unique_ptr<DpdkDataplane> create(const Config& cfg, JobTable& jobs, std::string* err);
  ~DpdkDataplane() override;  // stop(), then stops the port (the EAL stays initialized)

  std::string_view name() const override { return "dpdk"; }
  // Launches queue q on the q-th free EAL worker lcore, or, when the EAL has fewer worker
  // lcores than queues, on a std::thread registered with the EAL (unpinned; a warning says so).
  Status start() override;
  void stop() override;
  std::vector<uint16_t> ports() const override;
  unsigned n_queues() const override { return static_cast<unsigned>(queues_.size()); }
  const QueueCounters& counters(unsigned q) const override;
  std::string extra_metrics() const override;
  // Any group: the port sends frames to the group's MAC itself (no route, no interface choice:
  // results leave by the DPDK port; multicast_interface does not apply).
  bool can_multicast() const override { return true; }
  // Only to a multicast group (the PROBE): builds the frame here and hands it to queue 0,
  // which owns TX queue 0. False when `to` is not a group or the frame cannot be queued.
  bool send_datagram(const sockaddr_in& to, std::span<const uint8_t> bytes) const override;
  // True when the port could not install the rte_flow rules and queues hand datagrams over.
  bool software_steering() const;

 private:
  DpdkDataplane() = default;

  uint16_t port_id_ = 0;
  bool port_started_ = false;
  std::vector<std::unique_ptr<dpdk::DpdkQueue>> queues_;
  std::vector<rte_ring*> inboxes_;   // software steering: one per queue; empty otherwise
  rte_ring* control_tx_ = nullptr;   // control thread -> queue 0 (QueueSetup::control_tx)
  rte_mempool* hdr_pool_ = nullptr;  // the PROBE frames' mbufs
  dpdk::LocalAddr local_;            // source of the PROBEs: the first data port
  uint8_t multicast_ttl_ = 1;
  std::vector<unsigned> lcores_;      // EAL lcores running a queue
  std::vector<std::thread> threads_;  // or registered threads
  std::atomic<bool> stopping_{false};
};

}  // namespace conflux::agg
