// SPDX-License-Identifier: Apache-2.0
// DPDK dataplane, datapath half: rx burst -> frame parse -> RxPipeline/SlotEngine, reducing
// straight from the mbuf payload -> results built once, fanned out to every worker (or one
// frame to the job's multicast group) -> tx burst with a drain timer. Runs on the queue's lcore; no
// locks, no virtual calls, no syscalls (except what the PMD does and the optional idle sleep). With
// software steering, a datagram for another queue's slot is handed over as the mbuf pointer through
// that queue's ring.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "aggregator/dataplane/dataplane.h"
#include "aggregator/dataplane/dpdk/dpdk_queue.h"
#include "aggregator/dataplane/dpdk/steering.h"
#include "conflux/common/thread_name.h"
#include "spdlog/spdlog.h"

namespace conflux::agg::dpdk {
namespace {

CsumStatus ip_status(uint64_t f) {
  switch (f & RTE_MBUF_F_RX_IP_CKSUM_MASK) {
    case RTE_MBUF_F_RX_IP_CKSUM_GOOD:
      return CsumStatus::kGood;
    case RTE_MBUF_F_RX_IP_CKSUM_BAD:
      return CsumStatus::kBad;
    default:
      return CsumStatus::kUnknown;
  }
}

CsumStatus l4_status(uint64_t f) {
  switch (f & RTE_MBUF_F_RX_L4_CKSUM_MASK) {
    case RTE_MBUF_F_RX_L4_CKSUM_GOOD:
      return CsumStatus::kGood;
    case RTE_MBUF_F_RX_L4_CKSUM_BAD:
      return CsumStatus::kBad;
    default:
      return CsumStatus::kUnknown;
  }
}

// Sum of the 16-bit words of the pseudo header (not complemented), as UDP checksum offload
// expects in the checksum field.
uint16_t pseudo_header_sum(uint32_t src, uint32_t dst, uint32_t udp_len) {
  uint32_t s = (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + 17 + udp_len;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(s);
}

// ResultBatch::Space over the pkt pool: the handle is the mbuf, the space its data room
// (sized for the largest frame, so it holds the largest datagram).
uint8_t* take_result_mbuf(void* pool, void** handle) {
  rte_mbuf* m = rte_pktmbuf_alloc(static_cast<rte_mempool*>(pool));
  *handle = m;
  return m != nullptr ? rte_pktmbuf_mtod(m, uint8_t*) : nullptr;
}

void give_back_result_mbuf(void*, void* handle) {
  rte_pktmbuf_free(static_cast<rte_mbuf*>(handle));
}

}  // namespace

DpdkQueue::DpdkQueue(const QueueSetup& s, JobTable& jobs, const Config& cfg)
    : s_(s),
      jobs_(jobs),
      engine_(jobs, s.queue, s.n_queues, static_cast<uint32_t>(cfg.max_payload_bytes), counters_),
      pipeline_(engine_, make_fault_injector(cfg, s.queue)),
      // The engine writes each RESULT straight into a pkt mbuf (no copy before the send).
      results_(size_t{kBurst} * RxPipeline::kMaxResultsPerDatagram + 1,
               proto::kDataHeaderSize + static_cast<size_t>(cfg.max_payload_bytes),
               ResultBatch::Space{s.pkt_pool, &take_result_mbuf, &give_back_result_mbuf}),
      tx_(kTxBuffer),
      tx_bytes_(kTxBuffer),
      tx_jobs_(kTxBuffer),
      hdr_len_(udp_header_len(s.local.vlan)),
      scratch_len_(65536 + 64),
      egress_(*s.egress_cap, s.n_queues) {
  scratch_ = std::make_unique<uint8_t[]>(scratch_len_);
}

DpdkQueue::~DpdkQueue() {
  for (size_t i = 0; i < results_.size(); ++i)
    rte_pktmbuf_free(static_cast<rte_mbuf*>(results_[i].handle));
  for (uint32_t i = 0; i < tx_n_; ++i) rte_pktmbuf_free(tx_[i]);
  deferred_.clear([](Deferred& d) { rte_pktmbuf_free(d.m); });
}

void DpdkQueue::run() {
  name_this_thread("cfx-dpdk" + std::to_string(s_.queue));  // an EAL lcore or a thread
  jobs_.online(s_.queue);
  if (s_.queue == 0) send_arp(1, MacAddr{}, s_.local.ip);  // gratuitous ARP
  flush_tx();
  const uint64_t drain = rte_get_tsc_hz() / 1000000 * kDrainUs;
  uint32_t idle = 0;
  rte_mbuf* rx[kBurst];
  while (!s_.stop->load(std::memory_order_acquire)) {
    const uint64_t t0 = rte_rdtsc();
    const uint16_t n = rte_eth_rx_burst(s_.port_id, s_.queue, rx, kBurst);
    for (uint16_t i = 0; i < n; ++i) {
      if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void*));
      handle(rx[i], false);
    }
    const uint16_t k = drain_inbox();  // software steering: datagrams other queues handed over
    drain_control_tx();
    if (!deferred_.empty()) drain_deferred();   // before new results: a job's leave in order
    if (n + k == 0) pipeline_.flush(results_);  // idle: release a datagram held by faults
    transmit_results();
    if (tx_n_ > 0 && (n + k == 0 || tx_n_ >= kBurst || rte_rdtsc() - tx_first_tsc_ >= drain)) {
      flush_tx();
    }
    jobs_.quiescent(s_.queue);  // no Job pointer is held past this point
    if (n + k != 0) {
      frames_.busy_cycles.add(rte_rdtsc() - t0);
      frames_.busy_polls.inc();
      idle = 0;
    } else if (++idle >= kIdlePolls && s_.idle_sleep_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(s_.idle_sleep_us));
    }
  }
  flush_tx();
  jobs_.offline(s_.queue);
}

uint16_t DpdkQueue::drain_inbox() {
  if (s_.inboxes == nullptr) return 0;
  rte_mbuf* in[kBurst];
  const auto n = static_cast<uint16_t>(rte_ring_sc_dequeue_burst(
      s_.inboxes[s_.queue], reinterpret_cast<void**>(in), kBurst, nullptr));
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(in[i + 1], void*));
    handle(in[i], true);
  }
  frames_.handoff_in.add(n);
  return n;
}

void DpdkQueue::drain_control_tx() {
  if (s_.control_tx == nullptr) return;
  void* m = nullptr;
  // Rare (a PROBE every 20 ms while a job's ranks confirm its group): one at a time.
  while (rte_ring_sc_dequeue(s_.control_tx, &m) == 0) enqueue(static_cast<rte_mbuf*>(m), 0, 0);
}

bool DpdkQueue::hand_over(rte_mbuf* m, unsigned owner) {
  // handle() verified both checksums (or the port did): the owner's parse skips them.
  m->ol_flags = (m->ol_flags & ~(RTE_MBUF_F_RX_IP_CKSUM_MASK | RTE_MBUF_F_RX_L4_CKSUM_MASK)) |
                RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
  if (rte_ring_mp_enqueue(s_.inboxes[owner], m) != 0) {
    frames_.handoff_drops.inc();  // the owner is behind: a lost contribution, resent by its rank
    return false;
  }
  frames_.handoff_out.inc();
  return true;
}

void DpdkQueue::handle(rte_mbuf* m, bool from_peer) {
  if (!from_peer) frames_.frames_in.inc();
  const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
  uint32_t len = rte_pktmbuf_pkt_len(m);
  if (m->nb_segs > 1) {  // the engine needs the datagram contiguous: copy (counted)
    frames_.rx_linearized.inc();
    len = std::min<uint32_t>(len, uint32_t(scratch_len_));
    data = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, len, scratch_.get()));
  }
  LocalAddr local = s_.local;
  if ((m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) != 0) {  // the tag was taken off the frame
    if ((m->vlan_tci & 0x0fff) != local.vlan)
      local.vlan = 0xffff;  // never matches: foreign
    else
      local.vlan = 0;
  }
  const ParsedFrame f =
      parse_frame(data, len, local, ip_status(m->ol_flags), l4_status(m->ol_flags));
  switch (f.kind) {
    case FrameKind::kUdp:
      neighbors_.learn(f.src_ip, f.src_mac);
      if (s_.inboxes != nullptr && !from_peer) {
        const unsigned owner = owner_queue(f.payload, f.payload_len, s_.n_queues, s_.queue);
        if (owner != s_.queue) {
          if (hand_over(m, owner)) return;  // the owner frees it
          break;
        }
      }
      // Zero copy: the engine reduces from the mbuf's payload before the mbuf is freed.
      pipeline_.on_datagram({f.payload, f.payload_len}, Source{htonl(f.src_ip), htons(f.src_port)},
                            results_);
      break;
    case FrameKind::kArpRequest:
      neighbors_.learn(f.src_ip, f.src_mac);
      send_arp(2, f.src_mac, f.src_ip);
      break;
    case FrameKind::kArpReply:
      neighbors_.learn(f.src_ip, f.src_mac);
      break;
    case FrameKind::kDropped:
      frames_.drop(f.drop);
      break;
  }
  rte_pktmbuf_free(m);
}

void DpdkQueue::transmit_results() {
  for (size_t i = 0; i < results_.size(); ++i) {
    const ResultBatch::Entry& e = results_[i];
    // The engine wrote the RESULT datagram into this mbuf's data room; every worker gets a
    // header mbuf chained to an indirect clone of it (or, without multi-segment TX, a copy).
    auto* payload = static_cast<rte_mbuf*>(e.handle);
    if (rte_pktmbuf_append(payload, uint16_t(e.len)) == nullptr) {  // cannot happen: sized
      rte_pktmbuf_free(payload);
      counters_.send_errors.inc();
      continue;
    }
    const uint32_t psum = s_.tx_udp_csum ? 0 : csum_add(e.data, e.len, 0);
    e.for_each_destination([&](const sockaddr_in& to) { send_result(payload, psum, to, e.job); });
    rte_pktmbuf_free(payload);  // drops our reference; the clones keep the data alive
  }
  results_.clear();
}

void DpdkQueue::send_result(rte_mbuf* payload, uint32_t psum, const sockaddr_in& to, Job* job) {
  const uint32_t dst_ip = ntohl(to.sin_addr.s_addr);
  const uint16_t dst_port = ntohs(to.sin_port);
  UdpHeaderSpec h;
  h.dst_ip = dst_ip;
  if (is_ipv4_multicast(dst_ip)) {
    // The job's group (ResultBatch names it once per shared result): one frame reaches every
    // rank; its MAC comes from the address, not from ARP.
    address_to_group(&h, dst_ip, s_.multicast_ttl);
  } else if (!neighbors_.lookup(dst_ip, &h.dst_mac)) {
    frames_.neighbor_misses.inc();
    counters_.send_errors.inc();  // the worker will resend its contribution and get it again
    request_neighbor(dst_ip);
    return;
  }
  const uint32_t len = rte_pktmbuf_pkt_len(payload);
  h.src_port = s_.udp_port;
  h.dst_port = dst_port;
  h.payload_len = len;
  h.ip_id = ip_id_++;
  h.ip_csum = !s_.tx_ip_csum;
  h.udp_csum = s_.tx_udp_csum ? pseudo_header_sum(s_.local.ip, dst_ip, len + uint32_t(kUdpHeader))
                              : udp_checksum(s_.local.ip, dst_ip, s_.udp_port, dst_port, len, psum);
  rte_mbuf* m = nullptr;
  if (s_.clone_pool != nullptr) {
    m = rte_pktmbuf_alloc(s_.hdr_pool);
    rte_mbuf* c = m != nullptr ? rte_pktmbuf_clone(payload, s_.clone_pool) : nullptr;
    char* p = c != nullptr ? rte_pktmbuf_append(m, uint16_t(hdr_len_)) : nullptr;
    if (p == nullptr || rte_pktmbuf_chain(m, c) != 0) {
      if (c != nullptr) rte_pktmbuf_free(c);
      if (m != nullptr) rte_pktmbuf_free(m);
      counters_.send_errors.inc();
      return;
    }
    build_udp_headers(reinterpret_cast<uint8_t*>(p), s_.local, h);
  } else {
    m = rte_pktmbuf_alloc(s_.pkt_pool);
    char* p = m != nullptr ? rte_pktmbuf_append(m, uint16_t(hdr_len_ + len)) : nullptr;
    if (p == nullptr) {
      if (m != nullptr) rte_pktmbuf_free(m);
      counters_.send_errors.inc();
      return;
    }
    build_udp_headers(reinterpret_cast<uint8_t*>(p), s_.local, h);
    std::memcpy(p + hdr_len_, rte_pktmbuf_mtod(payload, const void*), len);
  }
  if (s_.tx_ip_csum || s_.tx_udp_csum) {
    m->l2_len = hdr_len_ - kIpv4Header - kUdpHeader;
    m->l3_len = kIpv4Header;
    m->ol_flags |= RTE_MBUF_F_TX_IPV4 | (s_.tx_ip_csum ? RTE_MBUF_F_TX_IP_CKSUM : 0) |
                   (s_.tx_udp_csum ? RTE_MBUF_F_TX_UDP_CKSUM : 0);
  }
  job->counters(s_.queue).results_sent.inc();
  job->counters(s_.queue).result_bytes.add(len);
  enqueue(m, len, job->id());
}

void DpdkQueue::send_arp(uint16_t op, const MacAddr& mac, uint32_t ip) {
  rte_mbuf* m = rte_pktmbuf_alloc(s_.hdr_pool);
  char* p = m != nullptr ? rte_pktmbuf_append(m, 64) : nullptr;
  if (p == nullptr) {
    if (m != nullptr) rte_pktmbuf_free(m);
    return;
  }
  const size_t len = build_arp(reinterpret_cast<uint8_t*>(p), s_.local, op, mac, ip);
  rte_pktmbuf_trim(m, uint16_t(64 - len));
  (op == 2 ? frames_.arp_replies : frames_.arp_requests).inc();
  enqueue(m, 0, 0);
}

void DpdkQueue::request_neighbor(uint32_t ip) {
  const uint64_t now = rte_rdtsc();
  if (now - last_arp_tsc_ < rte_get_tsc_hz() / 1000) return;  // at most one per millisecond
  last_arp_tsc_ = now;
  send_arp(1, MacAddr{}, ip);
}

void DpdkQueue::enqueue(rte_mbuf* m, uint32_t result_bytes, uint32_t job_id) {
  if (tx_n_ == kTxBuffer) flush_tx();
  if (tx_n_ == 0) tx_first_tsc_ = rte_rdtsc();
  tx_bytes_[tx_n_] = result_bytes;  // read later: the PMD owns the mbuf after tx_burst
  tx_jobs_[tx_n_] = job_id;
  tx_[tx_n_++] = m;
}

void DpdkQueue::flush_tx() {
  TokenBucket& egress = egress_.bucket();
  // Jobs are paced only under max_mbps (Job::set_grant), so without it nothing is looked up.
  bool paced = !deferred_.empty();
  for (uint32_t i = 0; i < tx_n_ && !paced && egress.limited(); ++i) {
    const Job* job = tx_jobs_[i] != 0 ? jobs_.find(tx_jobs_[i]) : nullptr;
    paced = job != nullptr && job->pace_mbps() != 0;
  }
  if (paced) pace_tx();
  uint32_t sent = 0;
  if (egress.limited() && tx_n_ > 0) wait_for_tokens(egress);  // the whole burst after the wait
  for (int tries = 0; sent < tx_n_ && tries < 64; ++tries) {
    sent += rte_eth_tx_burst(s_.port_id, s_.queue, tx_.data() + sent, uint16_t(tx_n_ - sent));
  }
  for (uint32_t i = 0; i < sent; ++i) {
    if (tx_bytes_[i] == 0) continue;  // ARP
    egress.consume(steady_ns(), tx_bytes_[i]);
    counters_.packets_out.inc();            // RESULT datagrams and their UDP payload bytes, like
    counters_.bytes_out.add(tx_bytes_[i]);  // the UDP backend
  }
  for (uint32_t i = sent; i < tx_n_; ++i) {
    frames_.tx_dropped.inc();
    counters_.send_errors.inc();
    rte_pktmbuf_free(tx_[i]);
  }
  tx_n_ = 0;
}

void DpdkQueue::pace_tx() {
  deferred_.begin_pass();
  uint32_t kept = 0;
  for (uint32_t i = 0; i < tx_n_; ++i) {
    const uint32_t id = tx_jobs_[i];
    Job* job = id != 0 ? jobs_.find(id) : nullptr;
    TokenBucket* share = job != nullptr ? job->pacer(s_.queue) : nullptr;
    if (share != nullptr || (id != 0 && !deferred_.empty())) {
      const uint64_t now = steady_ns();
      if (deferred_.hold(id, share != nullptr ? share->delay_ns(now) : 0)) {
        if (deferred_.size() < kMaxDeferred) {
          deferred_.push(id, {tx_[i], tx_bytes_[i]});
          counters_.deferred.inc();
        } else {
          rte_pktmbuf_free(tx_[i]);  // its worker asks again; served from the COMPLETE bank
          counters_.send_errors.inc();
          uint64_t suppressed = 0;
          if (warn_limit_.allow(&suppressed)) {
            spdlog::warn(
                "dpdk queue {}: {} paced result frames waiting; frame dropped ({} "
                "similar suppressed)",
                s_.queue, deferred_.size(), suppressed);
          }
        }
        continue;
      }
      if (share != nullptr) share->consume(now, tx_bytes_[i]);
    }
    tx_[kept] = tx_[i];
    tx_bytes_[kept] = tx_bytes_[i];
    tx_jobs_[kept] = id;
    ++kept;
  }
  tx_n_ = kept;
}

void DpdkQueue::drain_deferred() {
  if (tx_n_ >= kTxBuffer) return;
  // The queue's egress is waited for by flush_tx, for the whole burst.
  deferred_.drain(
      jobs_, s_.queue, [](uint64_t) { return uint64_t{0}; },
      [&](Job&, Deferred& d, TokenBucket* share, bool borrowed) {
        if (borrowed) counters_.borrowed.inc();
        if (share != nullptr) share->consume(steady_ns(), d.bytes);
        if (tx_n_ == 0) tx_first_tsc_ = rte_rdtsc();
        tx_[tx_n_] = d.m;
        tx_bytes_[tx_n_] = d.bytes;
        tx_jobs_[tx_n_] = 0;  // charged
        ++tx_n_;
        return tx_n_ < kTxBuffer;
      },
      [](Deferred& d) { rte_pktmbuf_free(d.m); });
}

}  // namespace conflux::agg::dpdk
