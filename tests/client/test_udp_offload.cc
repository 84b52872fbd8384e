// SPDX-License-Identifier: Apache-2.0
// UDP segmentation offload: which datagrams share one GSO send (udp_offload::run_length),
// and a loopback round trip through UdpChannel that must deliver exactly the datagrams a
// plain send would have, in order, whatever the kernel coalesced on the way.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "conflux/common/udp_offload.h"
#include "counters.h"
#include "udp_channel.h"

namespace conflux::client {
namespace {

size_t run_of(const std::vector<size_t>& lens, const std::vector<int>& dst, size_t first) {
  return udp_offload::run_length(
      first, lens.size(), [&](size_t i) { return lens[i]; },
      [&](size_t i) { return dst[i] == dst[first]; });
}

TEST(UdpOffloadRuns, SameSizeDatagramsToOneDestinationShareASend) {
  EXPECT_EQ(run_of({100, 100, 100, 100}, {0, 0, 0, 0}, 0), 4u);
  EXPECT_EQ(run_of({100, 100, 100, 100}, {0, 0, 0, 0}, 2), 2u);
}

TEST(UdpOffloadRuns, OnlyTheLastSegmentMayBeShorter) {
  EXPECT_EQ(run_of({100, 100, 60, 100}, {0, 0, 0, 0}, 0), 3u);  // the short one ends it
  EXPECT_EQ(run_of({100, 120, 100}, {0, 0, 0}, 0), 1u);         // a longer one cannot join
}

TEST(UdpOffloadRuns, ADifferentDestinationEndsTheRun) {
  EXPECT_EQ(run_of({100, 100, 100, 100}, {0, 0, 1, 0}, 0), 2u);
}

TEST(UdpOffloadRuns, BoundedBySegmentsAndBytes) {
  EXPECT_EQ(run_of(std::vector<size_t>(100, 10), std::vector<int>(100, 0), 0),
            udp_offload::kMaxSegments);
  // 8240-byte datagrams: 7 fit in one IPv4 UDP payload (57680 <= 65507), 8 do not.
  EXPECT_EQ(run_of(std::vector<size_t>(20, 8240), std::vector<int>(20, 0), 0), 7u);
}

class Receiver {
 public:
  explicit Receiver(bool offload) {
    EXPECT_TRUE(ch_.open("127.0.0.1", 4 << 20, 9000, &ctr_, offload).ok());
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(ch_.port());
    ::inet_pton(AF_INET, "127.0.0.1", &addr_.sin_addr);
  }
  // Reads until `n` datagrams arrived (or 2 s passed); returns their bytes.
  std::vector<std::vector<uint8_t>> take(size_t n) {
    std::vector<std::vector<uint8_t>> got;
    for (int spins = 0; got.size() < n && spins < 2000; ++spins) {
      for (const InDatagram& d : ch_.receive()) got.emplace_back(d.data, d.data + d.len);
      pollfd p{ch_.fd(), POLLIN, 0};
      if (got.size() < n) ::poll(&p, 1, 1);
    }
    return got;
  }
  sockaddr_in addr_{};
  UdpChannel ch_;
  Counters ctr_;
};

// Datagram i: a header of 48 bytes carrying i and a payload of `len(i)` bytes of i's pattern.
std::vector<uint8_t> datagram_bytes(uint32_t i, uint32_t payload_len) {
  std::vector<uint8_t> b(proto::kDataHeaderSize + payload_len);
  for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<uint8_t>(i * 31 + k * 7);
  std::memcpy(b.data(), &i, sizeof i);
  return b;
}

void round_trip(bool offload) {
  Counters sctr;
  UdpChannel sender;
  ASSERT_TRUE(sender.open("127.0.0.1", 4 << 20, 9000, &sctr, offload).ok());
  Receiver a(offload), b(offload);
  // Runs of equal sizes ended by a short datagram, destinations alternating in blocks.
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<OutDatagram> out;
  std::vector<std::vector<uint8_t>> want_a, want_b;
  for (uint32_t i = 0; i < 300; ++i) {
    const uint32_t payload = (i % 13 == 12) ? 1000 + i : 8192;
    bytes.push_back(datagram_bytes(i, payload));
    (((i / 20) % 2) == 0 ? want_a : want_b).push_back(bytes.back());
  }
  for (uint32_t i = 0; i < bytes.size(); ++i) {
    OutDatagram d;
    d.dst = ((i / 20) % 2) == 0 ? a.addr_ : b.addr_;
    d.header = bytes[i].data();
    d.payload = bytes[i].data() + proto::kDataHeaderSize;
    d.payload_len = static_cast<uint32_t>(bytes[i].size() - proto::kDataHeaderSize);
    out.push_back(d);
  }
  // In slices the receive buffers hold (4 MiB each side).
  for (size_t at = 0; at < out.size(); at += 100) {
    sender.send(std::span(out).subspan(at, std::min<size_t>(100, out.size() - at)));
  }
  EXPECT_EQ(a.take(want_a.size()), want_a);
  EXPECT_EQ(b.take(want_b.size()), want_b);
  EXPECT_EQ(sctr.packets_sent.load(), 300u);
  EXPECT_EQ(a.ctr_.packets_received.load() + b.ctr_.packets_received.load(), 300u);
  if (offload && sender.gso()) {
    EXPECT_GT(sctr.gso_sends.load(), 0u);
    EXPECT_LT(sctr.gso_sends.load(), 300u);
  } else {
    EXPECT_EQ(sctr.gso_sends.load(), 0u);
  }
  if (offload && a.ch_.gro()) {
    // Loopback carries a GSO send as one skb; a GRO socket takes it whole.
    EXPECT_GT(a.ctr_.gro_receives.load() + b.ctr_.gro_receives.load(), 0u);
  } else {
    EXPECT_EQ(a.ctr_.gro_receives.load() + b.ctr_.gro_receives.load(), 0u);
  }
}

TEST(UdpOffloadChannel, RoundTripIsExactWithOffload) { round_trip(true); }
TEST(UdpOffloadChannel, RoundTripIsExactWithoutOffload) { round_trip(false); }

TEST(UdpOffloadChannel, KernelHasGsoAndGroHere) {
  // CI's kernel (Linux >= 5.0) has both; a kernel without them must still pass the round
  // trips above, plain.
  Counters c;
  UdpChannel ch;
  ASSERT_TRUE(ch.open("127.0.0.1", 1 << 20, 9000, &c, true).ok());
  EXPECT_TRUE(ch.gso());
  EXPECT_TRUE(ch.gro());
}

}  // namespace
}  // namespace conflux::client
