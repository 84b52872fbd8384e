// SPDX-License-Identifier: Apache-2.0
// Unit tests of the DPDK dataplane's frame code (aggregator/dataplane/dpdk/frame.h) and its
// neighbour table: no EAL, no root.
#include "aggregator/dataplane/dpdk/frame.h"

#include <vector>

#include "aggregator/dataplane/dpdk/neighbor_table.h"
#include "gtest/gtest.h"

namespace conflux::agg::dpdk {
namespace {

constexpr uint32_t kAggIp = 0x0a4d0001;     // 10.77.0.1
constexpr uint32_t kWorkerIp = 0x0a4d0002;  // 10.77.0.2
const MacAddr kAggMac{{0x02, 0, 0, 0, 0, 1}};
const MacAddr kWorkerMac{{0x02, 0, 0, 0, 0, 2}};

LocalAddr agg(uint16_t vlan = 0) {
  LocalAddr l;
  l.mac = kAggMac;
  l.ip = kAggIp;
  l.vlan = vlan;
  l.first_port = 7471;
  l.n_ports = 2;
  return l;
}

// The worker's view: a LocalAddr whose "own" addresses are the worker's.
LocalAddr worker(uint16_t vlan = 0) {
  LocalAddr l;
  l.mac = kWorkerMac;
  l.ip = kWorkerIp;
  l.vlan = vlan;
  return l;
}

// A worker -> aggregator datagram with a correct UDP checksum.
std::vector<uint8_t> datagram(const std::vector<uint8_t>& payload, uint16_t dport = 7471,
                              uint16_t vlan = 0) {
  const LocalAddr w = worker(vlan);
  std::vector<uint8_t> f(udp_header_len(vlan) + payload.size());
  UdpHeaderSpec s;
  s.dst_mac = kAggMac;
  s.dst_ip = kAggIp;
  s.src_port = 40000;
  s.dst_port = dport;
  s.payload_len = uint32_t(payload.size());
  s.udp_csum = udp_checksum(kWorkerIp, kAggIp, 40000, dport, s.payload_len,
                            csum_add(payload.data(), payload.size(), 0));
  const size_t h = build_udp_headers(f.data(), w, s);
  std::copy(payload.begin(), payload.end(), f.begin() + long(h));
  return f;
}

std::vector<uint8_t> some_payload(size_t n) {
  std::vector<uint8_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = uint8_t(i * 37 + 11);
  return p;
}

TEST(DpdkFrame, UdpRoundTripOddAndEvenLengths) {
  for (size_t n : {1u, 48u, 49u, 8240u}) {
    const auto p = some_payload(n);
    const auto f = datagram(p);
    const ParsedFrame r = parse_frame(f.data(), f.size(), agg());
    ASSERT_EQ(r.kind, FrameKind::kUdp) << n << " " << frame_drop_name(r.drop);
    EXPECT_EQ(r.payload_len, n);
    EXPECT_EQ(std::vector<uint8_t>(r.payload, r.payload + r.payload_len), p);
    EXPECT_EQ(r.src_ip, kWorkerIp);
    EXPECT_EQ(r.src_port, 40000);
    EXPECT_EQ(r.dst_port, 7471);
    EXPECT_EQ(r.src_mac, kWorkerMac);
  }
}

TEST(DpdkFrame, ChecksumsAreStandard) {
  // RFC 1071 example words 0001 f203 f4f5 f6f7 sum to ddf2 (before complement).
  const uint8_t w[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(csum_finish(csum_add(w, sizeof(w), 0)), uint16_t(~0xddf2));
  const auto f = datagram(some_payload(100));
  EXPECT_EQ(csum_finish(csum_add(f.data() + kEthHeader, kIpv4Header, 0)), 0);  // IPv4 verifies
}

TEST(DpdkFrame, FastChecksumMatchesWordByWordSum) {
  uint64_t x = 88172645463325252ull;
  auto rnd = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::vector<uint8_t> buf(9000);
  for (auto& b : buf) b = uint8_t(rnd());
  for (int trial = 0; trial < 500; ++trial) {
    const size_t off = rnd() % 8, n = rnd() % 8200;
    const uint32_t start = uint32_t(rnd() & 0xfffff);
    uint64_t ref = start;
    for (size_t i = 0; i + 1 < n; i += 2) ref += uint32_t(buf[off + i] << 8 | buf[off + i + 1]);
    if (n % 2) ref += uint32_t(buf[off + n - 1]) << 8;
    while (ref >> 16) ref = (ref & 0xffff) + (ref >> 16);
    ASSERT_EQ(csum_finish(csum_add(buf.data() + off, n, start)), uint16_t(~ref)) << n << " " << off;
  }
}

TEST(DpdkFrame, MulticastMacIsTheLow23BitsOfTheGroup) {
  const MacAddr want{{0x01, 0x00, 0x5e, 0x4d, 0x01, 0x02}};
  EXPECT_EQ(multicast_mac(0xef4d0102), want);  // 239.77.1.2
  EXPECT_EQ(multicast_mac(0xefcd0102), want);  // 239.205.1.2: bit 23 of the group is dropped
  EXPECT_EQ(multicast_mac(0xe0000001), (MacAddr{{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}}));
  EXPECT_EQ(multicast_mac(0xefffffff), (MacAddr{{0x01, 0x00, 0x5e, 0x7f, 0xff, 0xff}}));
  EXPECT_TRUE(is_ipv4_multicast(0xe0000000));
  EXPECT_TRUE(is_ipv4_multicast(0xefffffff));
  EXPECT_FALSE(is_ipv4_multicast(0xdfffffff));
  EXPECT_FALSE(is_ipv4_multicast(0xf0000000));
  EXPECT_FALSE(is_ipv4_multicast(kWorkerIp));
}

TEST(DpdkFrame, GroupFrameHasTheGroupMacIpAndTtl) {
  for (uint16_t vlan : {0, 42}) {
    const auto payload = some_payload(48);
    const uint32_t group = 0xef4d0102;  // 239.77.1.2
    UdpHeaderSpec s;
    address_to_group(&s, group, 3);
    s.src_port = 7471;
    s.dst_port = 7500;
    s.payload_len = uint32_t(payload.size());
    s.udp_csum = udp_checksum(kAggIp, group, 7471, 7500, s.payload_len,
                              csum_add(payload.data(), payload.size(), 0));
    std::vector<uint8_t> f(udp_header_len(vlan) + payload.size());
    const size_t h = build_udp_headers(f.data(), agg(vlan), s);
    std::copy(payload.begin(), payload.end(), f.begin() + long(h));
    const uint8_t* ip = f.data() + h - kUdpHeader - kIpv4Header;
    EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 6),
              (std::vector<uint8_t>{0x01, 0x00, 0x5e, 0x4d, 0x01, 0x02}));
    EXPECT_EQ(std::vector<uint8_t>(f.begin() + 6, f.begin() + 12),
              std::vector<uint8_t>(kAggMac.b, kAggMac.b + 6));
    EXPECT_EQ(ip[8], 3);  // TTL
    EXPECT_EQ(std::vector<uint8_t>(ip + 16, ip + 20), (std::vector<uint8_t>{239, 77, 1, 2}));
    EXPECT_EQ(csum_finish(csum_add(ip, kIpv4Header, 0)), 0);
    // The UDP checksum verifies over the group's pseudo header.
    const uint32_t udp_len = kUdpHeader + s.payload_len;
    const uint32_t pseudo =
        (kAggIp >> 16) + (kAggIp & 0xffff) + (group >> 16) + (group & 0xffff) + 17 + udp_len;
    EXPECT_EQ(csum_finish(csum_add(ip + kIpv4Header, udp_len, pseudo)), 0);
  }
  // Everything else keeps the unicast TTL.
  EXPECT_EQ(datagram(some_payload(8))[kEthHeader + 8], kUnicastTtl);
}

TEST(DpdkFrame, UdpChecksumZeroMeansNone) {
  auto f = datagram(some_payload(64));
  f[kEthHeader + kIpv4Header + 6] = 0;
  f[kEthHeader + kIpv4Header + 7] = 0;
  EXPECT_EQ(parse_frame(f.data(), f.size(), agg()).kind, FrameKind::kUdp);
}

TEST(DpdkFrame, BadChecksumsAreDropped) {
  auto f = datagram(some_payload(64));
  f.back() ^= 1;
  EXPECT_EQ(parse_frame(f.data(), f.size(), agg()).drop, FrameDrop::kBadUdpChecksum);
  EXPECT_EQ(parse_frame(f.data(), f.size(), agg(), CsumStatus::kUnknown, CsumStatus::kGood).kind,
            FrameKind::kUdp);  // hardware said good: trusted
  auto g = datagram(some_payload(64));
  g[kEthHeader + 8] ^= 1;  // TTL
  EXPECT_EQ(parse_frame(g.data(), g.size(), agg()).drop, FrameDrop::kBadIpChecksum);
  auto h = datagram(some_payload(64));
  EXPECT_EQ(parse_frame(h.data(), h.size(), agg(), CsumStatus::kBad).drop,
            FrameDrop::kBadIpChecksum);
}

void set_frag(std::vector<uint8_t>& f, uint16_t v) {
  uint8_t* ip = f.data() + kEthHeader;
  ip[6] = uint8_t(v >> 8);
  ip[7] = uint8_t(v);
  ip[10] = ip[11] = 0;
  const uint16_t c = csum_finish(csum_add(ip, kIpv4Header, 0));
  ip[10] = uint8_t(c >> 8);
  ip[11] = uint8_t(c);
}

TEST(DpdkFrame, FragmentsAreDropped) {
  auto f = datagram(some_payload(64));
  set_frag(f, 0x2000);  // MF
  EXPECT_EQ(parse_frame(f.data(), f.size(), agg()).drop, FrameDrop::kIpFragment);
  set_frag(f, 0x0010);  // offset
  EXPECT_EQ(parse_frame(f.data(), f.size(), agg()).drop, FrameDrop::kIpFragment);
  set_frag(f, 0x4000);  // DF only: fine
  EXPECT_EQ(parse_frame(f.data(), f.size(), agg()).kind, FrameKind::kUdp);
}

TEST(DpdkFrame, EveryTruncationIsDroppedSafely) {
  const auto f = datagram(some_payload(64));
  for (size_t n = 0; n < f.size(); ++n) {
    std::vector<uint8_t> t(f.begin(), f.begin() + long(n));  // exact-size copy: ASan sees overreads
    const ParsedFrame r = parse_frame(t.data(), t.size(), agg());
    EXPECT_EQ(r.kind, FrameKind::kDropped) << n;
    EXPECT_EQ(r.drop, FrameDrop::kTruncated) << n;
  }
  auto padded = f;  // Ethernet padding after the IP packet is ignored
  padded.resize(f.size() + 10, 0);
  EXPECT_EQ(parse_frame(padded.data(), padded.size(), agg()).kind, FrameKind::kUdp);
}

TEST(DpdkFrame, ForeignTrafficIsDropped) {
  const auto base = datagram(some_payload(32));
  auto other_mac = base;
  other_mac[5] = 9;
  EXPECT_EQ(parse_frame(other_mac.data(), other_mac.size(), agg()).drop, FrameDrop::kForeign);
  auto v6 = base;
  v6[12] = 0x86;
  v6[13] = 0xdd;
  EXPECT_EQ(parse_frame(v6.data(), v6.size(), agg()).drop, FrameDrop::kForeign);
  const auto wrong_port = datagram(some_payload(32), 9999);
  EXPECT_EQ(parse_frame(wrong_port.data(), wrong_port.size(), agg()).drop, FrameDrop::kForeign);
  const auto second_port = datagram(some_payload(32), 7472);
  EXPECT_EQ(parse_frame(second_port.data(), second_port.size(), agg()).kind, FrameKind::kUdp);
  LocalAddr other_ip = agg();
  other_ip.ip = kAggIp + 5;
  EXPECT_EQ(parse_frame(base.data(), base.size(), other_ip).drop, FrameDrop::kForeign);
}

TEST(DpdkFrame, VlanMustMatch) {
  const auto tagged = datagram(some_payload(40), 7471, 42);
  EXPECT_EQ(parse_frame(tagged.data(), tagged.size(), agg(42)).kind, FrameKind::kUdp);
  EXPECT_EQ(parse_frame(tagged.data(), tagged.size(), agg(43)).drop, FrameDrop::kForeign);
  EXPECT_EQ(parse_frame(tagged.data(), tagged.size(), agg(0)).drop, FrameDrop::kForeign);
  const auto untagged = datagram(some_payload(40));
  EXPECT_EQ(parse_frame(untagged.data(), untagged.size(), agg(42)).drop, FrameDrop::kForeign);
}

MacAddr mac_at(const uint8_t* p) {
  MacAddr m;
  std::copy(p, p + 6, m.b);
  return m;
}

TEST(DpdkFrame, ArpRequestReplyAndGratuitous) {
  uint8_t buf[64];
  // The worker asks who has 10.77.0.1.
  size_t n = build_arp(buf, worker(), 1, MacAddr{}, kAggIp);
  EXPECT_EQ(n, kMinFrame);
  ParsedFrame r = parse_frame(buf, n, agg());
  ASSERT_EQ(r.kind, FrameKind::kArpRequest);
  EXPECT_EQ(r.src_ip, kWorkerIp);
  EXPECT_EQ(r.src_mac, kWorkerMac);
  // Our reply parses at the worker as a reply carrying our MAC.
  n = build_arp(buf, agg(), 2, kWorkerMac, kWorkerIp);
  r = parse_frame(buf, n, worker());
  ASSERT_EQ(r.kind, FrameKind::kArpReply);
  EXPECT_EQ(r.src_ip, kAggIp);
  EXPECT_EQ(r.src_mac, kAggMac);
  EXPECT_TRUE(mac_at(buf) == kWorkerMac);
  // A request for someone else, and our own gratuitous ARP, are not answered.
  n = build_arp(buf, worker(), 1, MacAddr{}, kAggIp + 7);
  EXPECT_EQ(parse_frame(buf, n, agg()).drop, FrameDrop::kForeign);
  n = build_arp(buf, agg(), 1, MacAddr{}, kAggIp);
  EXPECT_TRUE(mac_at(buf).is_broadcast());
  EXPECT_EQ(parse_frame(buf, n, agg()).drop, FrameDrop::kForeign);
  // VLAN-tagged ARP is padded to the tagged minimum.
  EXPECT_EQ(build_arp(buf, agg(5), 2, kWorkerMac, kWorkerIp), kMinFrame + kVlanTag);
}

TEST(DpdkNeighbors, LearnLookupUpdate) {
  NeighborTable t;
  MacAddr m;
  EXPECT_FALSE(t.lookup(kWorkerIp, &m));
  t.learn(kWorkerIp, kWorkerMac);
  ASSERT_TRUE(t.lookup(kWorkerIp, &m));
  EXPECT_EQ(m, kWorkerMac);
  t.learn(kWorkerIp, kAggMac);  // moved
  ASSERT_TRUE(t.lookup(kWorkerIp, &m));
  EXPECT_EQ(m, kAggMac);
  t.learn(0, kAggMac);  // 0.0.0.0 is never learnt
  EXPECT_FALSE(t.lookup(0, &m));
  // Many addresses: every recent one is found (the table holds 4096 with 8 probes).
  for (uint32_t i = 1; i <= 1024; ++i)
    t.learn(0x0a000000 + i, MacAddr{{2, 0, 0, 0, uint8_t(i >> 8), uint8_t(i)}});
  size_t found = 0;
  for (uint32_t i = 1; i <= 1024; ++i) {
    if (t.lookup(0x0a000000 + i, &m) && m.b[5] == uint8_t(i)) ++found;
  }
  EXPECT_EQ(found, 1024u);
}

}  // namespace
}  // namespace conflux::agg::dpdk
