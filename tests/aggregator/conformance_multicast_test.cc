// SPDX-License-Identifier: Apache-2.0
// Conformance: multicast result delivery (protocol/SPEC.md §8) on the wire. Every backend sends
// a shared result once, to the job's group, as the same frame: Ethernet 01:00:5e + the low 23
// bits of the group (RFC 1112), IPv4 destination the group, TTL multicast_ttl, UDP from the
// daemon's data address and the slot's data port. The udp backend lets the kernel build it; the
// dpdk backend builds it itself, which is what this suite pins down. A raw AF_PACKET socket on
// the workers' veth end sees the frames; a UDP socket joined to the group gets the RESULT.
// Re-served results stay unicast. (Every dtype x op through the group with real workers:
// tests/dpdk/dpdk_veth_test.sh multicast, tests/client/test_e2e_multicast.cc.)
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <optional>

#include "conformance.h"

namespace conflux::agg::testing {
namespace {

using Clock = std::chrono::steady_clock;

// 239.205.1.2: bit 23 of the group (the 0x80 of 205) must not reach the MAC.
constexpr uint32_t kGroup = 0xefcd0102;
constexpr std::array<uint8_t, 6> kGroupMac = {0x01, 0x00, 0x5e, 0x4d, 0x01, 0x02};
constexpr int kTtl = 3;  // not the default 1, nor the unicast 64

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t rd32(const uint8_t* p) { return uint32_t{rd16(p)} << 16 | rd16(p + 2); }

// One's complement sum of big-endian 16-bit words, folded (RFC 1071).
uint32_t ones_sum(const uint8_t* p, size_t n, uint32_t s) {
  for (size_t i = 0; i + 1 < n; i += 2) s += rd16(p + i);
  if (n % 2 != 0) s += uint32_t{p[n - 1]} << 8;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return s;
}

// An untagged IPv4/UDP frame as the workers' end of the veth received it.
struct Frame {
  std::array<uint8_t, 6> dst_mac{};
  uint8_t ttl = 0;
  uint32_t src_ip = 0, dst_ip = 0;  // host order
  uint16_t src_port = 0, dst_port = 0;
  bool udp_checksum_verifies = false;
  std::vector<uint8_t> payload;
};

// Every IPv4 frame arriving on wrk0 (of the calling thread's namespace: the workers').
class FrameCapture {
 public:
  FrameCapture() {
    fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_IP));
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_IP);
    a.sll_ifindex = static_cast<int>(if_nametoindex(VethTopology::kWorkerIface));
    ok_ = fd_ >= 0 && a.sll_ifindex != 0 &&
          ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~FrameCapture() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

  // The next incoming UDP frame from `src_ip` within timeout_ms.
  std::optional<Frame> next_from(uint32_t src_ip, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<uint8_t> buf(65536);
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
      sockaddr_ll from{};
      socklen_t len = sizeof(from);
      const ssize_t n =
          ::recvfrom(fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;  // the workers' own
      std::optional<Frame> f = parse(buf.data(), static_cast<size_t>(n));
      if (f && f->src_ip == src_ip) return f;
    }
    return std::nullopt;
  }

 private:
  static std::optional<Frame> parse(const uint8_t* e, size_t n) {
    constexpr size_t kEth = 14, kIp = 20, kUdp = 8;
    if (n < kEth + kIp + kUdp || rd16(e + 12) != ETH_P_IP) return std::nullopt;
    const uint8_t* ip = e + kEth;
    if (ip[0] != 0x45 || ip[9] != IPPROTO_UDP) return std::nullopt;
    const uint8_t* udp = ip + kIp;
    const size_t udp_len = rd16(udp + 4);
    if (udp_len < kUdp || kEth + kIp + udp_len > n) return std::nullopt;
    Frame f;
    std::memcpy(f.dst_mac.data(), e, 6);
    f.ttl = ip[8];
    f.src_ip = rd32(ip + 12);
    f.dst_ip = rd32(ip + 16);
    f.src_port = rd16(udp);
    f.dst_port = rd16(udp + 2);
    const uint32_t pseudo = ones_sum(ip + 12, 8, 0) + IPPROTO_UDP + uint32_t(udp_len);
    f.udp_checksum_verifies = rd16(udp + 6) != 0 && ones_sum(udp, udp_len, pseudo) == 0xffff;
    f.payload.assign(udp + kUdp, udp + udp_len);
    return f;
  }

  int fd_ = -1;
  bool ok_ = false;
};

// A UDP socket bound to group:port and joined to the group on the workers' veth address.
class GroupReceiver {
 public:
  GroupReceiver(uint32_t group, uint16_t port, uint32_t iface_ip) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(group);
    a.sin_port = htons(port);
    ip_mreq m{};
    m.imr_multiaddr.s_addr = htonl(group);
    m.imr_interface.s_addr = htonl(iface_ip);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
          ::setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)) == 0;
  }
  ~GroupReceiver() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  std::optional<std::vector<uint8_t>> recv(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return std::nullopt;
    std::vector<uint8_t> buf(65536);
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n < 0) return std::nullopt;
    buf.resize(static_cast<size_t>(n));
    return buf;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

// A datagram the daemon sent this job, parsed.
struct Datagram {
  std::vector<uint8_t> bytes;
  proto::DataHeader h;
  std::vector<uint8_t> payload;
};

// `bytes` parsed as a datagram of `type` for job `job_id`; nothing (and a failure) otherwise.
std::optional<Datagram> parse_for(const std::optional<std::vector<uint8_t>>& bytes,
                                  proto::PacketType type, uint32_t job_id) {
  if (!bytes) {
    ADD_FAILURE() << "no datagram";
    return std::nullopt;
  }
  Datagram d{*bytes, {}, {}};
  const uint8_t* payload = nullptr;
  const proto::DropReason r = proto::parse_data(d.bytes, 1 << 16, &d.h, &payload);
  if (r != proto::DropReason::kOk || d.h.type != type || d.h.job_id != job_id) {
    ADD_FAILURE() << "not the expected datagram: " << proto::drop_reason_name(r) << " "
                  << d.h.to_string();
    return std::nullopt;
  }
  d.payload.assign(payload, payload + d.h.wire_payload_bytes());
  return d;
}

class DataplaneMulticast : public DaemonTest {
 protected:
  // Starts a daemon with the group range and `mode`, opens the capture and the group socket,
  // and joins a 2-rank job asking for multicast (checks that it got the group). Fatal
  // failures and skips return early: callers check HasFatalFailure() / IsSkipped().
  void join_with_group(const std::string& mode) {
    if (const std::string why = use_wire(); !why.empty()) GTEST_SKIP() << "veth pair: " << why;
    Config cfg = base_config();
    cfg.multicast = mode;
    cfg.multicast_range = "239.205.1.2/32";
    cfg.multicast_ttl = kTtl;
    start(cfg);
    group_port_ = daemon().data_ports()[0];
    capture_.emplace();
    ASSERT_TRUE(capture_->ok()) << "AF_PACKET socket on " << VethTopology::kWorkerIface << ": "
                                << std::strerror(errno);
    group_.emplace(kGroup, group_port_, wire()->worker_ip());
    ASSERT_TRUE(group_->ok()) << "joining 239.205.1.2 on the worker veth: " << std::strerror(errno);
    JoinSpec spec;
    spec.job_key = 205;
    spec.flags = proto::kJoinFlagMulticast;
    workers_ = join_job(spec, 2);
    for (auto& x : workers_) {
      ASSERT_NE(x->ack.flags & proto::kJoinAckFlagMulticast, 0);
      EXPECT_EQ(x->ack.group, kGroup);
      EXPECT_EQ(x->ack.group_port, group_port_);
    }
  }
  bool ready() const { return !IsSkipped() && !HasFatalFailure(); }

  // Every rank's MulticastMode (after its JoinAck) says multicast, for `reason`.
  void expect_multicast_decided(proto::MulticastReason reason) {
    for (auto& x : workers_) {
      auto m = x->ctl.recv_skip_heartbeats(3000);
      ASSERT_TRUE(m && std::holds_alternative<proto::MulticastMode>(*m)) << "rank " << x->rank;
      EXPECT_TRUE(std::get<proto::MulticastMode>(*m).multicast);
      EXPECT_EQ(std::get<proto::MulticastMode>(*m).reason, reason);
    }
  }

  // The next frame from the daemon is `datagram` to the group, from data port `src_port`.
  void expect_group_frame(const std::vector<uint8_t>& datagram, uint16_t src_port) {
    const std::optional<Frame> f = capture_->next_from(wire()->agg_ip(), 1000);
    ASSERT_TRUE(f) << "no frame from the daemon on the workers' veth";
    EXPECT_EQ(f->dst_mac, kGroupMac);
    EXPECT_EQ(f->dst_ip, kGroup);
    EXPECT_EQ(f->ttl, kTtl);
    EXPECT_EQ(f->src_port, src_port);
    EXPECT_EQ(f->dst_port, group_port_);
    EXPECT_EQ(f->payload, datagram);
    // A kernel sender may leave the checksum to the veth's offload (the frame is captured
    // before it is filled in); the dpdk backend computes it, like its unicast ones.
    if (GetParam() == "dpdk") {
      EXPECT_TRUE(f->udp_checksum_verifies);
    }
  }

  uint16_t group_port_ = 0;
  std::optional<FrameCapture> capture_;
  std::optional<GroupReceiver> group_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

TEST_P(DataplaneMulticast, ProbeGoesToTheGroupFromTheFirstDataPort) {
  join_with_group("auto");
  if (!ready()) return;
  // PROBEs every ~20 ms until both ranks confirm (dpdk: built on the control thread and sent
  // by queue 0).
  const auto probe =
      parse_for(group_->recv(3000), proto::PacketType::kProbe, workers_[0]->ack.job_id);
  ASSERT_TRUE(probe) << "no PROBE on the group socket";
  EXPECT_EQ(probe->h.job_token, workers_[0]->ack.job_token);
  expect_group_frame(probe->bytes, group_port_);
  for (auto& x : workers_) ASSERT_TRUE(x->ctl.send(proto::MulticastAck{}));
  expect_multicast_decided(proto::MulticastReason::kConfirmed);
  // A PROBE is no result: the dataplane counters do not count it.
  EXPECT_EQ(metric_sum(metrics(), "conflux_dataplane_packets_out_total"), 0u);
}

TEST_P(DataplaneMulticast, SharedResultGoesOnceToTheGroupResendsStayUnicast) {
  join_with_group("on");  // no probe: decided at join
  if (!ready()) return;
  expect_multicast_decided(proto::MulticastReason::kForced);
  auto& workers = workers_;
  VethTopology& w = *wire();

  // Both ranks contribute slot 0; the one RESULT goes to the group.
  std::mt19937_64 rng(205);
  const size_t count = 64;
  std::vector<std::vector<uint8_t>> in;
  for (auto& x : workers) {
    in.push_back(exact_values(DType::kFloat32, count, rng));
    ASSERT_TRUE(x->send_contrib(0, 0, 0, DType::kFloat32, Op::kSum, in.back()));
  }
  const auto result =
      parse_for(group_->recv(3000), proto::PacketType::kResult, workers[0]->ack.job_id);
  ASSERT_TRUE(result) << "no RESULT on the group socket";
  EXPECT_EQ(result->h.slot, 0u);
  EXPECT_EQ(result->payload, reference(DType::kFloat32, Op::kSum, in, count));
  expect_group_frame(result->bytes, workers[0]->port_for(0));

  // One frame for both ranks: nothing by unicast, one send counted.
  for (auto& x : workers) EXPECT_FALSE(x->udp.recv(200)) << "rank " << x->rank;
  EXPECT_FALSE(capture_->next_from(w.agg_ip(), 100));
  EXPECT_EQ(wait_metric("conflux_dataplane_packets_out_total", 1), 1u);
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_job_results_sent_total"), 1u);
  EXPECT_EQ(metric_sum(m, "conflux_job_result_bytes_sent_total"), result->bytes.size());
  EXPECT_EQ(metric_sum(m, "conflux_dataplane_bytes_out_total"), result->bytes.size());
  EXPECT_EQ(metric_sum(m, "conflux_job_multicast"), 1u);

  // Rank 1 asks again (its result was "lost"): re-served by unicast to rank 1 only.
  ASSERT_TRUE(workers[1]->send_contrib(0, 0, 0, DType::kFloat32, Op::kSum, in[1], true));
  const auto resent =
      parse_for(workers[1]->udp.recv(3000), proto::PacketType::kResult, workers[1]->ack.job_id);
  ASSERT_TRUE(resent) << "no unicast resend";
  EXPECT_NE(resent->h.flags & proto::kFlagRetransmit, 0);  // echoed: it answers a RETRANSMIT
  EXPECT_EQ(resent->h.slot, 0u);
  EXPECT_EQ(resent->payload, result->payload);
  const std::optional<Frame> u = capture_->next_from(w.agg_ip(), 1000);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->dst_ip, w.worker_ip());
  EXPECT_EQ(u->dst_port, workers[1]->udp.port());
  EXPECT_NE(u->dst_mac[0] & 1, 1) << "a unicast resend went to a group MAC";
  EXPECT_FALSE(workers[0]->udp.recv(200));
  EXPECT_FALSE(group_->recv(100));
  EXPECT_EQ(wait_metric("conflux_job_unicast_resends_total", 1), 1u);
  EXPECT_EQ(wait_metric("conflux_dataplane_packets_out_total", 2), 2u);
}

INSTANTIATE_TEST_SUITE_P(Backends, DataplaneMulticast, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
