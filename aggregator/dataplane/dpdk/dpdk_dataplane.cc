// SPDX-License-Identifier: Apache-2.0
// DPDK dataplane, setup half: EAL, mbuf pools, port and queue configuration, rte_flow
// or software steering, lcore launch. (The extra /metrics families: dpdk_metrics.cc.)
#include "aggregator/dataplane/dpdk/dpdk_dataplane.h"

#include <arpa/inet.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "aggregator/dataplane/dpdk/dpdk_eal.h"
#include "aggregator/dataplane/dpdk/dpdk_queue.h"
#include "aggregator/dataplane/dpdk/port_plan.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

using dpdk::DpdkQueue;
using dpdk::plan_port;
using dpdk::PortPlan;

constexpr uint16_t kRxDesc = 512;
constexpr uint16_t kTxDesc = 512;
constexpr uint32_t kFanoutMbufs = 8192;  // header + clone mbufs per queue (results x workers)
constexpr uint16_t kDefaultDataPort = 7471;
constexpr uint16_t kJumboRoom = RTE_PKTMBUF_HEADROOM + 9216 + 1024;
constexpr uint32_t kInboxSize = 1024;    // software steering ring per queue (power of two)
constexpr uint32_t kControlTxSize = 64;  // PROBEs waiting for queue 0 (one per job per 20 ms)
std::atomic<unsigned> g_ring_seq{0};     // ring names are unique per process

// Steers UDP to (our IPv4, port) to `queue`. Ok, or system_error where the port cannot.
Status add_flow(uint16_t port, uint32_t ip, uint16_t udp_port, uint16_t queue) {
  rte_flow_attr attr{};
  attr.ingress = 1;
  rte_flow_item_ipv4 ip_spec{}, ip_mask{};
  ip_spec.hdr.dst_addr = htonl(ip);
  ip_mask.hdr.dst_addr = 0xffffffff;
  rte_flow_item_udp udp_spec{}, udp_mask{};
  udp_spec.hdr.dst_port = htons(udp_port);
  udp_mask.hdr.dst_port = 0xffff;
  const rte_flow_item pattern[] = {{RTE_FLOW_ITEM_TYPE_ETH, nullptr, nullptr, nullptr},
                                   {RTE_FLOW_ITEM_TYPE_IPV4, &ip_spec, nullptr, &ip_mask},
                                   {RTE_FLOW_ITEM_TYPE_UDP, &udp_spec, nullptr, &udp_mask},
                                   {RTE_FLOW_ITEM_TYPE_END, nullptr, nullptr, nullptr}};
  rte_flow_action_queue q{};
  q.index = queue;
  const rte_flow_action actions[] = {{RTE_FLOW_ACTION_TYPE_QUEUE, &q},
                                     {RTE_FLOW_ACTION_TYPE_END, nullptr}};
  rte_flow_error e{};
  if (rte_flow_create(port, &attr, pattern, actions, &e) == nullptr) {
    return system_error(fmt::format("rte_flow UDP port {} -> queue {}: {}", udp_port, queue,
                                    e.message != nullptr ? e.message : "unsupported"));
  }
  return {};
}

// Frees a ring and the mbufs still parked in it.
void free_ring(rte_ring* r) {
  void* m = nullptr;
  while (rte_ring_sc_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  rte_ring_free(r);
}

// The steps of DpdkDataplane::create, in order. Each returns ok or its error: invalid_argument
// where the configuration asks for what the port does not have, else system_error.

// Port `port` exists and has `nq` RX and TX queues; its description in *info.
Status check_port(uint16_t port, uint16_t nq, rte_eth_dev_info* info) {
  if (!rte_eth_dev_is_valid_port(port)) {
    return invalid_argument(
        fmt::format("dpdk: no port {} ({} port(s) available; check dpdk_eal_args --vdev/-a)", port,
                    rte_eth_dev_count_avail()));
  }
  if (int rc = rte_eth_dev_info_get(port, info); rc != 0) {
    return system_error(fmt::format("dpdk: port {} info: {}", port, rte_strerror(-rc)));
  }
  if (nq > info->max_rx_queues || nq > info->max_tx_queues) {
    return invalid_argument(fmt::format("dpdk: port {} ({}) has {} rx / {} tx queues, threads = {}",
                                        port, info->driver_name, info->max_rx_queues,
                                        info->max_tx_queues, nq));
  }
  return {};
}

struct Pools {
  rte_mempool* pkt = nullptr;    // RX and result mbufs
  rte_mempool* hdr = nullptr;    // fan-out headers
  rte_mempool* clone = nullptr;  // fan-out clones (ports with multi-segment TX only)
  uint32_t n_pkt = 0;
  uint16_t room = 0;  // data room of a pkt mbuf
};

// Receive mbufs are never held across a burst (contributions are reduced into the slot
// accumulators at once), so the pools scale with rings and bursts, not with slot windows.
// Frames parked in software-steering inboxes (only with several queues) hold RX mbufs too, and
// result frames set aside by pacing (DpdkQueue::kMaxDeferred per queue) result mbufs.
Status make_pools(uint16_t nq, uint16_t rxd, uint16_t txd, int socket, bool multi_seg, Pools* p) {
  std::string err;
  p->n_pkt =
      nq * (rxd + txd + 4u * DpdkQueue::kBurst + DpdkQueue::kTxBuffer + DpdkQueue::kMaxDeferred) +
      (nq > 1 ? nq * kInboxSize : 0) + 512;
  const uint32_t n_fanout = nq * (kFanoutMbufs + DpdkQueue::kMaxDeferred);
  p->pkt = dpdk::shared_pool("pkt", p->n_pkt, p->room, socket, &err);
  p->hdr = p->pkt ? dpdk::shared_pool("hdr", n_fanout, RTE_PKTMBUF_HEADROOM + 128, socket, &err)
                  : nullptr;
  p->clone =
      (p->hdr && multi_seg) ? dpdk::shared_pool("clone", n_fanout, 0, socket, &err) : nullptr;
  if (p->pkt == nullptr || p->hdr == nullptr || (multi_seg && p->clone == nullptr)) {
    return system_error(err);
  }
  return {};
}

// Sets up the nq RX/TX queue pairs; may switch the pkt pool to jumbo mbufs (p->room).
Status setup_queues(uint16_t port, uint16_t nq, const rte_eth_dev_info& info, const PortPlan& plan,
                    uint16_t rxd, uint16_t txd, int socket, Pools* p) {
  for (uint16_t q = 0; q < nq; ++q) {
    rte_eth_rxconf rxc = info.default_rxconf;
    rxc.offloads = plan.conf.rxmode.offloads;
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = plan.conf.txmode.offloads;
    int rc = rte_eth_rx_queue_setup(port, q, rxd, socket, &rxc, p->pkt);
    if (rc == -ENOMEM && p->room < kJumboRoom) {
      // Some PMDs need every RX mbuf to hold their own largest frame, which the API does not
      // report (af_packet: its framesz, while it says max_rx_pktlen 1518) and which can exceed
      // what max_payload_bytes needs: retry once with mbufs for a 9216-byte frame.
      spdlog::info("dpdk: port {} ({}) wants larger RX mbufs than {} bytes; using {}", port,
                   info.driver_name, p->room, kJumboRoom);
      p->room = kJumboRoom;
      std::string err;
      p->pkt = dpdk::shared_pool("pkt", p->n_pkt, p->room, socket, &err);
      if (p->pkt == nullptr) return system_error(err);
      rc = rte_eth_rx_queue_setup(port, q, rxd, socket, &rxc, p->pkt);
    }
    if (rc == 0) rc = rte_eth_tx_queue_setup(port, q, txd, socket, &txc);
    if (rc != 0) {
      return system_error(
          fmt::format("dpdk: port {} queue {} setup: {}", port, q, rte_strerror(-rc)));
    }
  }
  return {};
}

// Raises the port's MTU to ip_mtu where it is lower (a warning where the port refuses).
void raise_mtu(uint16_t port, const rte_eth_dev_info& info, uint32_t ip_mtu, const Config& cfg) {
  uint16_t mtu = 0;
  if (rte_eth_dev_get_mtu(port, &mtu) == 0 && mtu < ip_mtu &&
      rte_eth_dev_set_mtu(port, static_cast<uint16_t>(ip_mtu)) != 0) {
    spdlog::warn(
        "dpdk: port {} ({}) keeps MTU {} < {} needed for {}-byte payloads; larger "
        "frames may be dropped by the port (af_packet: the interface MTU and framesz "
        "decide)",
        port, info.driver_name, mtu, ip_mtu, cfg.max_payload_bytes);
  }
}

// Several queues: rte_flow rules steer each UDP port to its queue, or, where the port has
// none, one inbox ring per queue (software steering). The rings go to *inboxes as they are
// made (their owner frees them, also after an error).
Status steer(uint16_t port, const dpdk::LocalAddr& local, uint16_t nq, const rte_eth_dev_info& info,
             const PortPlan& plan, int socket, std::vector<rte_ring*>* inboxes) {
  (void)rte_flow_flush(port, nullptr);
  Status flows;
  for (uint16_t q = 0; q < nq && flows.ok(); ++q) {
    flows = add_flow(port, local.ip, uint16_t(local.first_port + q), q);
  }
  if (flows.ok()) return {};
  (void)rte_flow_flush(port, nullptr);
  spdlog::info(
      "dpdk: port {} ({}) cannot steer UDP ports to queues ({}): software steering "
      "(queues hand datagrams to the slot's owner through rings; RSS {})",
      port, info.driver_name, flows.message(),
      plan.conf.rxmode.mq_mode == RTE_ETH_MQ_RX_RSS ? "on" : "off");
  for (uint16_t q = 0; q < nq; ++q) {
    const std::string name = fmt::format("cfx_inbox_{}", g_ring_seq.fetch_add(1));
    rte_ring* r = rte_ring_create(name.c_str(), kInboxSize, socket, RING_F_SC_DEQ);
    if (r == nullptr) {
      return system_error(fmt::format("dpdk: ring {}: {}", name, rte_strerror(rte_errno)));
    }
    inboxes->push_back(r);
  }
  return {};
}

}  // namespace

std::unique_ptr<DpdkDataplane> DpdkDataplane::create(const Config& cfg, JobTable& jobs,
                                                     std::string* err) {
  const std::string& ip_text = cfg.dpdk_ipv4.empty() ? cfg.listen : cfg.dpdk_ipv4;
  in_addr a{};
  if (inet_pton(AF_INET, ip_text.c_str(), &a) != 1 || a.s_addr == 0) {
    *err = fmt::format(
        "dpdk: needs the aggregator's IPv4 address: set dpdk_ipv4 or a specific "
        "listen address (got '{}')",
        ip_text);
    return nullptr;
  }
  if (Status st = dpdk::eal_init_once(cfg.dpdk_eal_args); !st.ok()) {
    *err = st.message();
    return nullptr;
  }
  const auto port = static_cast<uint16_t>(cfg.dpdk_port);
  const auto nq = static_cast<uint16_t>(cfg.threads);
  rte_eth_dev_info info{};
  if (Status st = check_port(port, nq, &info); !st.ok()) {
    *err = st.message();
    return nullptr;
  }
  // Largest frame: Ethernet + VLAN + IPv4 + UDP + data header + payload.
  const uint32_t ip_mtu = uint32_t(dpdk::kIpv4Header + dpdk::kUdpHeader) +
                          uint32_t(cfg.max_payload_bytes) + uint32_t(proto::kDataHeaderSize);
  const uint32_t frame = ip_mtu + uint32_t(dpdk::kEthHeader + dpdk::kVlanTag);
  Pools pools;
  pools.room = static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM +
                                     std::max<uint32_t>(2048, (frame + 64 + 1023) / 1024 * 1024));
  PortPlan plan = plan_port(info, ip_mtu, nq);

  std::unique_ptr<DpdkDataplane> dp(new DpdkDataplane());
  dp->port_id_ = port;
  (void)rte_eth_dev_stop(port);  // a previous dataplane in this process may have started it
  if (int rc = rte_eth_dev_configure(port, nq, nq, &plan.conf); rc != 0) {
    *err = fmt::format("dpdk: configure port {}: {}", port, rte_strerror(-rc));
    return nullptr;
  }
  uint16_t rxd = kRxDesc, txd = kTxDesc;
  (void)rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
  const int socket = rte_eth_dev_socket_id(port) < 0 ? SOCKET_ID_ANY : rte_eth_dev_socket_id(port);
  if (Status st = make_pools(nq, rxd, txd, socket, plan.multi_seg, &pools); !st.ok()) {
    *err = st.message();
    return nullptr;
  }
  if (Status st = setup_queues(port, nq, info, plan, rxd, txd, socket, &pools); !st.ok()) {
    *err = st.message();
    return nullptr;
  }
  raise_mtu(port, info, ip_mtu, cfg);
  if (int rc = rte_eth_dev_start(port); rc != 0) {
    *err = fmt::format("dpdk: start port {}: {}", port, rte_strerror(-rc));
    return nullptr;
  }
  dp->port_started_ = true;

  dpdk::LocalAddr local;
  rte_ether_addr mac{};
  rte_eth_macaddr_get(port, &mac);
  std::memcpy(local.mac.b, mac.addr_bytes, 6);
  local.ip = ntohl(a.s_addr);
  local.vlan = static_cast<uint16_t>(cfg.dpdk_vlan);
  local.first_port = cfg.data_port != 0 ? static_cast<uint16_t>(cfg.data_port) : kDefaultDataPort;
  local.n_ports = nq;
  if (nq > 1) {
    if (Status st = steer(port, local, nq, info, plan, socket, &dp->inboxes_); !st.ok()) {
      *err = st.message();
      return nullptr;  // ~DpdkDataplane frees the rings made so far
    }
  }
  const std::string ctl_name = fmt::format("cfx_ctl_tx_{}", g_ring_seq.fetch_add(1));
  dp->control_tx_ = rte_ring_create(ctl_name.c_str(), kControlTxSize, socket, RING_F_SC_DEQ);
  if (dp->control_tx_ == nullptr) {
    *err = fmt::format("dpdk: ring {}: {}", ctl_name, rte_strerror(rte_errno));
    return nullptr;
  }
  dp->hdr_pool_ = pools.hdr;
  dp->local_ = local;
  dp->multicast_ttl_ = static_cast<uint8_t>(cfg.multicast_ttl);
  if (!cfg.multicast_interface.empty() && cfg.multicast_interface != ip_text) {
    spdlog::warn("dpdk: multicast_interface {} ignored: multicast results leave by port {} ({})",
                 cfg.multicast_interface, port, ip_text);
  }
  dp->egress_cap_.set(cfg.max_mbps);
  for (uint16_t q = 0; q < nq; ++q) {
    dpdk::QueueSetup s;
    s.egress_cap = &dp->egress_cap_;
    s.port_id = port;
    s.queue = q;
    s.n_queues = nq;
    s.local = local;
    s.udp_port = static_cast<uint16_t>(local.first_port + q);
    s.pkt_pool = pools.pkt;
    s.hdr_pool = pools.hdr;
    s.clone_pool = pools.clone;
    s.tx_ip_csum = plan.tx_ip_csum;
    s.tx_udp_csum = plan.tx_udp_csum;
    s.idle_sleep_us = static_cast<uint32_t>(cfg.dpdk_idle_sleep_us);
    s.stop = &dp->stopping_;
    s.inboxes = dp->inboxes_.empty() ? nullptr : dp->inboxes_.data();
    s.multicast_ttl = dp->multicast_ttl_;
    s.control_tx = q == 0 ? dp->control_tx_ : nullptr;
    dp->queues_.push_back(std::make_unique<DpdkQueue>(s, jobs, cfg));
  }
  spdlog::info(
      "dpdk dataplane: port {} ({}) {} {}:{}..{} vlan {}, {} queue(s) steered by {}, mbuf "
      "room {}, fan-out {}, tx csum ip {} udp {}",
      port, info.driver_name, fmt::format("{:02x}", fmt::join(local.mac.b, ":")), ip_text,
      local.first_port, local.first_port + nq - 1, local.vlan, nq,
      nq == 1 ? "none" : (dp->inboxes_.empty() ? "rte_flow" : "software"), pools.room,
      pools.clone != nullptr ? "clone" : "copy", plan.tx_ip_csum, plan.tx_udp_csum);
  return dp;
}

DpdkDataplane::~DpdkDataplane() {
  stop();
  if (port_started_) {
    (void)rte_flow_flush(port_id_, nullptr);
    (void)rte_eth_dev_stop(port_id_);
  }
  queues_.clear();
  for (rte_ring* r : inboxes_) free_ring(r);  // every lcore has stopped
  if (control_tx_ != nullptr) free_ring(control_tx_);
}

bool DpdkDataplane::send_datagram(const sockaddr_in& to, std::span<const uint8_t> bytes) const {
  const uint32_t group = ntohl(to.sin_addr.s_addr);
  if (!dpdk::is_ipv4_multicast(group) || control_tx_ == nullptr) return false;
  const size_t hdr = dpdk::udp_header_len(local_.vlan);
  rte_mbuf* m = rte_pktmbuf_alloc(hdr_pool_);  // no lcore cache on this thread: the pool's ring
  char* p = m != nullptr ? rte_pktmbuf_append(m, uint16_t(hdr + bytes.size())) : nullptr;
  if (p == nullptr) {
    if (m != nullptr) rte_pktmbuf_free(m);
    return false;
  }
  dpdk::UdpHeaderSpec h;
  dpdk::address_to_group(&h, group, multicast_ttl_);
  h.src_port = local_.first_port;  // from the first data port, as the UDP backend sends it
  h.dst_port = ntohs(to.sin_port);
  h.payload_len = static_cast<uint32_t>(bytes.size());
  // Both checksums in software: the frame carries no offload flags.
  h.udp_csum = dpdk::udp_checksum(local_.ip, group, h.src_port, h.dst_port, h.payload_len,
                                  dpdk::csum_add(bytes.data(), bytes.size(), 0));
  dpdk::build_udp_headers(reinterpret_cast<uint8_t*>(p), local_, h);
  std::memcpy(p + hdr, bytes.data(), bytes.size());
  if (rte_ring_mp_enqueue(control_tx_, m) != 0) {  // queue 0 is not draining it
    rte_pktmbuf_free(m);
    return false;
  }
  return true;
}

Status DpdkDataplane::start() {
  std::vector<unsigned> free;
  unsigned l = 0;
  RTE_LCORE_FOREACH_WORKER(l) {
    if (rte_eal_get_lcore_state(l) == WAIT) free.push_back(l);
  }
  if (free.size() < queues_.size()) {
    spdlog::warn(
        "dpdk: {} free EAL worker lcore(s) for {} queue(s): running unpinned threads "
        "(give the EAL -l/--lcores with one lcore per queue plus the main lcore)",
        free.size(), queues_.size());
    for (auto& q : queues_) {
      dpdk::DpdkQueue* queue = q.get();
      threads_.emplace_back([queue] {
        const bool registered = rte_thread_register() == 0;
        queue->run();
        if (registered) rte_thread_unregister();
      });
    }
    return {};
  }
  for (size_t i = 0; i < queues_.size(); ++i) {
    auto body = [](void* arg) {
      static_cast<dpdk::DpdkQueue*>(arg)->run();
      return 0;
    };
    if (int rc = rte_eal_remote_launch(body, queues_[i].get(), free[i]); rc != 0) {
      stop();
      return system_error(
          fmt::format("dpdk: launch queue {} on lcore {}: {}", i, free[i], rte_strerror(-rc)));
    }
    lcores_.push_back(free[i]);
  }
  return {};
}

void DpdkDataplane::stop() {
  stopping_.store(true, std::memory_order_release);
  for (unsigned l : lcores_) (void)rte_eal_wait_lcore(l);
  lcores_.clear();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

bool DpdkDataplane::software_steering() const { return !inboxes_.empty(); }

std::vector<uint16_t> DpdkDataplane::ports() const {
  std::vector<uint16_t> out;
  for (const auto& q : queues_) out.push_back(q->udp_port());
  return out;
}

const QueueCounters& DpdkDataplane::counters(unsigned q) const { return queues_[q]->counters(); }

}  // namespace conflux::agg
