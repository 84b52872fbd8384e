// SPDX-License-Identifier: Apache-2.0
// The DPDK datapath's own cost per packet, without a kernel or a NIC: confluxd's DPDK
// dataplane runs on an ethdev made of two rte_rings (rte_eth_from_rings). This thread plays
// the NIC and N workers: it writes CONTRIB frames (8 KiB float payloads, RX checksums marked
// good as a NIC with offload would) into the RX ring and frees what the lcore transmits.
// The lcore parses, reduces in place, builds each result once and fans it out (header +
// clone per worker, UDP checksum in software: the ring port has no TX offload).
//   dpdk_datapath_bench [WORKERS=4] [PACKETS=200000] [stream|backlog]     (no root needed)
// stream (default): frames go in as fast as this thread makes them, so each poll finds what
//   arrived since the last one: few frames when the lcore keeps up, more when it falls behind
//   (the figure then depends on the host's load).
// backlog: frames are made ahead in batches of 8 full bursts (256 frames, 2.4 MiB: still in
//   the last-level cache, as frames a NIC has just written would be), and a batch goes into
//   the RX ring at once (pointers only) when the lcore has emptied it; the next batch is made
//   while the lcore works through the last. Every poll that finds frames finds a full burst,
//   and the wait for the next batch is idle, not busy: the lcore's capacity when saturated,
//   whether or not this thread makes frames as fast as the lcore takes them. (A deeper
//   backlog measures something else: tens of MiB of payload read back from DRAM.)
// Prints contributions/s, Gbit/s, TSC cycles per contribution of the busy lcore and its mean
// burst (frames per poll that found any).
#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/dataplane/dpdk/dpdk_dataplane.h"
#include "aggregator/dataplane/dpdk/dpdk_eal.h"
#include "aggregator/dataplane/dpdk/frame.h"
#include "conflux/protocol/data.h"

using namespace conflux;
using namespace conflux::agg;

namespace {

uint64_t metric(const std::string& text, const std::string& name) {
  uint64_t sum = 0;
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    if (at > 0 && text[at - 1] != '\n') continue;
    const size_t sp = text.find(' ', at);
    const size_t nl = text.find('\n', at);
    if (sp < nl) sum += std::strtoull(text.c_str() + sp + 1, nullptr, 10);
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t n_workers = argc > 1 ? uint32_t(std::atoi(argv[1])) : 4;
  const uint64_t packets = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 200000;
  const std::string mode = argc > 3 ? argv[3] : "stream";
  if (n_workers < 1 || n_workers > 64 || (mode != "stream" && mode != "backlog")) {
    std::fprintf(stderr, "usage: %s [WORKERS=4 (1..64)] [PACKETS=200000] [stream|backlog]\n",
                 argv[0]);
    return 2;
  }
  const bool backlog = mode == "backlog";
  constexpr uint32_t kPayload = 8192, kSlots = 64, kAggIp = 0x0a000001;
  const std::string prefix = "cfxdpb" + std::to_string(getpid());
  const std::string eal =
      "-l 0,1 --no-huge -m 512 --no-pci --no-telemetry --log-level=*:warning "
      "--file-prefix=" +
      prefix;
  struct RemoveRuntimeDir {  // EAL leaves /var/run/dpdk/<prefix> behind
    std::string dir;
    ~RemoveRuntimeDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{"/var/run/dpdk/" + prefix};
  if (const Status st = dpdk::eal_init_once(eal); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  rte_ring* rx = rte_ring_create("cfx_rx", 4096, SOCKET_ID_ANY, 0);
  rte_ring* tx = rte_ring_create("cfx_tx", 16384, SOCKET_ID_ANY, 0);
  const int port = rx && tx ? rte_eth_from_rings("cfxring", &rx, 1, &tx, 1, SOCKET_ID_ANY) : -1;
  if (port < 0) {
    std::fprintf(stderr, "ring port: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  Config cfg;
  cfg.threads = 1;
  cfg.dataplane = "dpdk";
  cfg.dpdk_eal_args = eal;
  cfg.dpdk_port = port;
  cfg.dpdk_ipv4 = "10.0.0.1";
  cfg.data_port = 7471;
  cfg.log_level = "warn";
  JobTable jobs(16, 1);
  std::string err;
  auto dp = DpdkDataplane::create(cfg, jobs, &err);
  if (!dp) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  JobParams p;
  p.id = jobs.allocate_id();
  p.token = 0x1234;
  p.n_workers = n_workers;
  p.slots = kSlots;
  p.payload_bytes = kPayload;
  for (uint32_t r = 0; r < n_workers; ++r) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(kAggIp + 1 + r);
    a.sin_port = htons(5000);
    p.workers.push_back(a);
  }
  const uint32_t job_id = p.id;
  jobs.publish(std::make_unique<Job>(std::move(p), 1));
  rte_ether_addr agg_mac{};
  rte_eth_macaddr_get(uint16_t(port), &agg_mac);
  rte_mempool* pool = rte_pktmbuf_pool_create("cfx_bench", 8191, 256, 0,
                                              RTE_PKTMBUF_HEADROOM + 9216, SOCKET_ID_ANY);
  if (pool == nullptr) {
    std::fprintf(stderr, "mbuf pool: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  std::vector<uint8_t> payload(kPayload);
  for (uint32_t i = 0; i < kPayload / 4; ++i) {
    const float f = float(i % 7);
    std::memcpy(payload.data() + 4 * i, &f, 4);
  }
  const size_t hdr = dpdk::udp_header_len(0), len = hdr + proto::kDataHeaderSize + kPayload;
  uint64_t freed = 0;
  auto drain = [&] {
    void* out[256];
    const unsigned k = rte_ring_dequeue_burst(tx, out, 256, nullptr);
    for (unsigned i = 0; i < k; ++i) rte_pktmbuf_free(static_cast<rte_mbuf*>(out[i]));
    freed += k;
  };
  uint64_t made = 0;  // frames written; frame k is worker k % W's contribution to round k / W
  const uint64_t total = (packets / n_workers) * n_workers;
  auto make = [&](uint64_t k) {
    const uint64_t n = k / n_workers;
    const auto r = uint32_t(k % n_workers);
    rte_mbuf* m;
    while ((m = rte_pktmbuf_alloc(pool)) == nullptr) drain();
    auto* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(len)));
    dpdk::LocalAddr w;
    w.mac.b[0] = 0x02;
    w.mac.b[5] = uint8_t(r + 1);
    w.ip = kAggIp + 1 + r;
    dpdk::UdpHeaderSpec s;
    std::memcpy(s.dst_mac.b, agg_mac.addr_bytes, 6);
    s.dst_ip = kAggIp;
    s.src_port = 5000;
    s.dst_port = 7471;
    s.payload_len = uint32_t(proto::kDataHeaderSize + kPayload);
    dpdk::build_udp_headers(f, w, s);
    proto::DataHeader h;
    h.type = proto::PacketType::kContrib;
    h.job_id = job_id;
    h.contributor = uint16_t(r);
    h.job_token = 0x1234;
    h.slot = uint32_t(n % kSlots);
    h.generation = uint32_t(n / kSlots);
    h.offset = n * (kPayload / 4);
    h.count = kPayload / 4;
    h.dtype = DType::kFloat32;
    h.op = Op::kSum;
    proto::encode_data_header(h, f + hdr);
    std::memcpy(f + hdr + proto::kDataHeaderSize, payload.data(), kPayload);
    m->ol_flags = RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    return m;
  };
  // Backlog mode: whole rounds made ahead, up to 8 bursts of the lcore (it polls 32 at a time).
  constexpr unsigned kBacklog = 256;
  std::vector<void*> staged;
  staged.reserve(kBacklog + 64);
  auto stage = [&] {
    while (made < total && staged.size() + n_workers <= kBacklog) {
      for (uint32_t r = 0; r < n_workers; ++r) staged.push_back(make(made++));
      drain();  // as a NIC returns TX completions: results left in the TX ring hold the
                // dataplane's mbufs, and a lcore that had them all would drop results
    }
  };
  auto release = [&] {  // into the (empty) ring at once
    if (rte_ring_enqueue_bulk(rx, staged.data(), unsigned(staged.size()), nullptr) == 0) {
      std::abort();  // the ring was empty and holds 4095
    }
    staged.clear();
  };
  const std::string m0 = dp->extra_metrics();  // before the lcore runs: every frame counts
  if (backlog) {
    stage();
    release();  // before the lcore polls: its first poll finds a full ring
  }
  if (const Status st = dp->start(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  const uint64_t t0 = rte_rdtsc();
  if (backlog) {
    while (made < total) {
      stage();
      do {
        drain();
      } while (rte_ring_count(rx) != 0);
      release();
    }
  } else {
    while (made < total) {
      for (uint32_t r = 0; r < n_workers; ++r) {
        rte_mbuf* m = make(made++);
        while (rte_ring_enqueue(rx, m) != 0) drain();
      }
      drain();
    }
  }
  const uint64_t expect = total;  // results = contributions (each round's result to W workers)
  while (dp->counters(0).packets_out.get() < expect && rte_rdtsc() - t0 < rte_get_tsc_hz() * 30)
    drain();
  const uint64_t t1 = rte_rdtsc();
  const std::string m1 = dp->extra_metrics();
  dp->stop();
  const double secs = double(t1 - t0) / double(rte_get_tsc_hz());
  const uint64_t in =
      metric(m1, "conflux_dpdk_frames_in_total") - metric(m0, "conflux_dpdk_frames_in_total");
  const uint64_t busy =
      metric(m1, "conflux_dpdk_busy_cycles_total") - metric(m0, "conflux_dpdk_busy_cycles_total");
  const uint64_t polls =
      metric(m1, "conflux_dpdk_busy_polls_total") - metric(m0, "conflux_dpdk_busy_polls_total");
  const uint64_t out = dp->counters(0).packets_out.get();
  std::printf("workers %u, %s, %lu contributions of %u B, %lu results sent, %.2f s\n", n_workers,
              mode.c_str(), (unsigned long)in, kPayload, (unsigned long)out, secs);
  std::printf(
      "lcore: %.3f Mpps in (%.2f Gbit/s payload), %.3f Mpps out, "
      "%.0f busy TSC cycles per contribution (TSC %.2f GHz), %.1f frames per busy poll\n",
      double(in) / secs / 1e6, double(in) * kPayload * 8 / secs / 1e9, double(out) / secs / 1e6,
      double(busy) / double(in ? in : 1), double(rte_get_tsc_hz()) / 1e9,
      double(in) / double(polls ? polls : 1));
  if (out != expect) {
    const QueueCounters& q = dp->counters(0);
    std::fprintf(stderr,
                 "%lu results sent, %lu expected; slots completed %lu, send errors %lu, "
                 "deferred %lu; datagram drops by reason:",
                 (unsigned long)out, (unsigned long)expect, (unsigned long)q.slots_completed.get(),
                 (unsigned long)q.send_errors.get(), (unsigned long)q.deferred.get());
    for (int r = 1; r < proto::kNumDropReasons; ++r) {
      if (q.drops[r].get() == 0) continue;
      const std::string_view name = proto::drop_reason_name(static_cast<proto::DropReason>(r));
      std::fprintf(stderr, " %.*s %lu", int(name.size()), name.data(),
                   (unsigned long)q.drops[r].get());
    }
    std::fprintf(stderr, "\nthe DPDK counters:\n%s\n", m1.c_str());
    return 1;
  }
  // The backlog mode promises a saturated lcore: a run whose polls found less than half a
  // burst on average measured something else (batches released into a ring still draining).
  if (backlog && double(in) < double(polls) * 16) {
    std::fprintf(stderr, "backlog: only %.1f frames per busy poll (at least 16 expected)\n",
                 double(in) / double(polls ? polls : 1));
    return 3;
  }
  return 0;
}
