// SPDX-License-Identifier: Apache-2.0
// Data transfers through the v11 ABI, as NCCL's proxy drives it.
#include "plugin_harness.h"

namespace cfxtest {
namespace {

TEST_F(V11Test, PropertiesDescribeAHostOnlyDevice) {
  ncclNetProperties_v11_t p{};
  ASSERT_EQ(net->getProperties(dev, &p), ncclSuccess);
  ASSERT_NE(p.name, nullptr);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_EQ(p.regIsGlobal, 0);
  EXPECT_GT(p.speed, 0);
  EXPECT_GE(p.maxComms, 1024);
  EXPECT_EQ(p.maxRecvs, 1);  // CONFLUX_NET_MAX_RECVS's default: a connection per sender
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], dev);
  EXPECT_GT(p.maxP2pBytes, 0u);
  EXPECT_LE(p.maxP2pBytes, NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_GT(p.maxCollBytes, 0u);
  EXPECT_LE(p.maxCollBytes, NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_EQ(p.maxMultiRequestSize, 1);
  EXPECT_NE(net->getProperties(99, &p), ncclSuccess);
}

// NCCL adds `latency` to its network model (graph/tuning.cc) but does not agree it across
// ranks, so it must not depend on the host it is read on: by default 0 (as NCCL's own socket
// and IB transports), on every call. (CONFLUX_NET_LATENCY_US: V11Params.)
TEST_F(V11Test, PropertiesCarryTheSameLatencyOnEveryRank) {
  ncclNetProperties_v11_t p{}, again{};
  ASSERT_EQ(net->getProperties(dev, &p), ncclSuccess);
  EXPECT_EQ(p.latency, 0.0f);
  ASSERT_EQ(net->getProperties(dev, &again), ncclSuccess);
  EXPECT_EQ(again.latency, p.latency);
}

class V11SizeTest : public V11Test, public ::testing::WithParamInterface<size_t> {};

// A sends to B, B sends the received bytes back to A: both directions, data checked.
TEST_P(V11SizeTest, RoundTripKeepsEveryByte) {
  const size_t size = GetParam();
  Pair ab, ba;
  connect(&ab);
  connect(&ba);
  std::vector<unsigned char> src(size), mid(size + 16), back(size + 16);
  fillPattern(src, unsigned(size));
  void* mh = nullptr;
  ASSERT_EQ(net->regMr(ab.send, src.data(), size, NCCL_PTR_HOST, &mh), ncclSuccess);

  void* rreq = nullptr;
  void* data[1] = {mid.data()};
  size_t sizes[1] = {mid.size()};
  int tags[1] = {7};
  ASSERT_EQ(net->irecv(ab.recv, 1, data, sizes, tags, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_NE(rreq, nullptr);
  void* sreq = nullptr;
  ASSERT_EQ(net->isend(ab.send, src.data(), size, 7, mh, nullptr, &sreq), ncclSuccess);
  ASSERT_NE(sreq, nullptr);
  int got[8] = {-1};
  int sent = -1;
  ASSERT_EQ(waitRequest(net, sreq, &sent), ncclSuccess);
  ASSERT_EQ(waitRequest(net, rreq, got), ncclSuccess);
  EXPECT_EQ(size_t(sent), size);
  ASSERT_EQ(size_t(got[0]), size);
  EXPECT_TRUE(size == 0 || std::memcmp(src.data(), mid.data(), size) == 0);

  data[0] = back.data();
  sizes[0] = back.size();
  ASSERT_EQ(net->irecv(ba.recv, 1, data, sizes, tags, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(net->isend(ba.send, mid.data(), size, 7, nullptr, nullptr, &sreq), ncclSuccess);
  ASSERT_EQ(waitRequest(net, sreq, &sent), ncclSuccess);
  ASSERT_EQ(waitRequest(net, rreq, got), ncclSuccess);
  ASSERT_EQ(size_t(got[0]), size);
  EXPECT_TRUE(size == 0 || std::memcmp(src.data(), back.data(), size) == 0);

  EXPECT_EQ(net->deregMr(ab.send, mh), ncclSuccess);
  close(ab);
  close(ba);
}

INSTANTIATE_TEST_SUITE_P(Sizes, V11SizeTest,
                         ::testing::Values(size_t{0}, size_t{1}, size_t{4096},
                                           size_t{(1 << 20) + 3}, size_t{64} << 20),
                         [](const auto& info) { return "bytes_" + std::to_string(info.param); });

// With CONFLUX_NET_MAX_RECVS=8 (NCCL then shares connections among senders and groups their
// receives), read at this fixture's init; unset again after its finalize.
class V11GroupedTest : public V11Test {
 protected:
  void SetUp() override {
    setenv("CONFLUX_NET_MAX_RECVS", "8", 1);
    V11Test::SetUp();
  }
  void TearDown() override {
    V11Test::TearDown();
    unsetenv("CONFLUX_NET_MAX_RECVS");
  }
};

// One grouped irecv takes four messages, matched by tag whatever their order, each smaller
// than its posted buffer; test() reports the actual sizes per part.
TEST_F(V11GroupedTest, GroupedReceiveMatchesByTagAndReportsActualSizes) {
  ncclNetProperties_v11_t props{};
  ASSERT_EQ(net->getProperties(dev, &props), ncclSuccess);
  ASSERT_EQ(props.maxRecvs, 8);
  Pair p;
  connect(&p);
  const int tags[4] = {10, 11, 12, 13};
  const size_t posted[4] = {4096, 200000, 64, 1 << 20};
  const size_t actual[4] = {100, 150001, 0, 700000};
  std::vector<unsigned char> out[4], in[4];
  void* data[4];
  size_t sizes[4];
  for (int i = 0; i < 4; ++i) {
    out[i].resize(actual[i]);
    fillPattern(out[i], unsigned(i + 1));
    in[i].assign(posted[i], 0xEE);
    data[i] = in[i].data();
    sizes[i] = posted[i];
  }
  int rtags[4] = {tags[0], tags[1], tags[2], tags[3]};
  void* rreq = nullptr;
  ASSERT_EQ(net->irecv(p.recv, 4, data, sizes, rtags, nullptr, nullptr, &rreq), ncclSuccess);
  void* sreq[4];
  for (int i : {2, 0, 3, 1}) {  // send order differs from the posted order
    ASSERT_EQ(net->isend(p.send, out[i].data(), actual[i], tags[i], nullptr, nullptr, &sreq[i]),
              ncclSuccess);
    ASSERT_NE(sreq[i], nullptr);
  }
  for (int i = 0; i < 4; ++i) ASSERT_EQ(waitRequest(net, sreq[i], nullptr), ncclSuccess);
  int got[8] = {-1, -1, -1, -1};
  ASSERT_EQ(waitRequest(net, rreq, got), ncclSuccess);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(size_t(got[i]), actual[i]) << "part " << i;
    EXPECT_TRUE(actual[i] == 0 || std::memcmp(out[i].data(), in[i].data(), actual[i]) == 0)
        << "part " << i;
    if (actual[i] < posted[i]) {
      EXPECT_EQ(in[i][actual[i]], 0xEE) << "wrote past the message";
    }
  }
  close(p);
}

// Messages match receives in posting order, by tag: tag 7 sent first goes to the second irecv.
TEST_F(V11Test, TagSelectsTheReceiveInPostingOrder) {
  Pair p;
  connect(&p);
  std::vector<unsigned char> a(3000, 0xA1), b(5000, 0xB2), ra(8192), rb(8192);
  void* req5 = nullptr;
  void* req7 = nullptr;
  void* d5[1] = {ra.data()};
  void* d7[1] = {rb.data()};
  size_t s[1] = {8192};
  int t5[1] = {5}, t7[1] = {7};
  ASSERT_EQ(net->irecv(p.recv, 1, d5, s, t5, nullptr, nullptr, &req5), ncclSuccess);
  ASSERT_EQ(net->irecv(p.recv, 1, d7, s, t7, nullptr, nullptr, &req7), ncclSuccess);
  void *sb = nullptr, *sa = nullptr;
  ASSERT_EQ(net->isend(p.send, b.data(), b.size(), 7, nullptr, nullptr, &sb), ncclSuccess);
  ASSERT_EQ(net->isend(p.send, a.data(), a.size(), 5, nullptr, nullptr, &sa), ncclSuccess);
  int got5[8], got7[8];
  ASSERT_EQ(waitRequest(net, req7, got7), ncclSuccess);
  ASSERT_EQ(waitRequest(net, req5, got5), ncclSuccess);
  EXPECT_EQ(got7[0], 5000);
  EXPECT_EQ(got5[0], 3000);
  EXPECT_EQ(rb[4999], 0xB2);
  EXPECT_EQ(ra[2999], 0xA1);
  ASSERT_EQ(waitRequest(net, sa, nullptr), ncclSuccess);
  ASSERT_EQ(waitRequest(net, sb, nullptr), ncclSuccess);
  close(p);
}

// 32 concurrent 256 KiB messages with distinct tags and buffers, received in any test order.
TEST_F(V11Test, ManyRequestsInFlight) {
  constexpr int kN = 32;
  constexpr size_t kSize = 256 << 10;
  Pair p;
  connect(&p);
  std::vector<std::vector<unsigned char>> out(kN), in(kN);
  void* rreq[kN];
  void* sreq[kN];
  for (int i = 0; i < kN; ++i) {
    out[i].resize(kSize);
    fillPattern(out[i], unsigned(i * 7 + 3));
    in[i].assign(kSize, 0);
    void* d[1] = {in[i].data()};
    size_t s[1] = {kSize};
    int t[1] = {i};
    ASSERT_EQ(net->irecv(p.recv, 1, d, s, t, nullptr, nullptr, &rreq[i]), ncclSuccess);
    ASSERT_NE(rreq[i], nullptr);
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(net->isend(p.send, out[i].data(), kSize, i, nullptr, nullptr, &sreq[i]), ncclSuccess);
    ASSERT_NE(sreq[i], nullptr);
  }
  for (int i = kN - 1; i >= 0; --i) {
    int got[8];
    ASSERT_EQ(waitRequest(net, rreq[i], got), ncclSuccess);
    EXPECT_EQ(size_t(got[0]), kSize);
    EXPECT_EQ(0, std::memcmp(out[i].data(), in[i].data(), kSize)) << "message " << i;
  }
  for (int i = 0; i < kN; ++i) ASSERT_EQ(waitRequest(net, sreq[i], nullptr), ncclSuccess);
  close(p);
}

// The request pool holds NCCL_NET_MAX_REQUESTS x maxRecvs; beyond that isend returns a NULL
// request (NCCL retries) instead of failing, and works again once requests are released.
TEST_F(V11Test, FullRequestPoolReturnsNullRequest) {
  Pair p;
  connect(&p);
  std::vector<unsigned char> buf(64, 1);
  std::vector<void*> reqs;
  void* r = nullptr;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(net->isend(p.send, buf.data(), buf.size(), 0, nullptr, nullptr, &r), ncclSuccess);
    if (r == nullptr) break;
    reqs.push_back(r);
  }
  EXPECT_GE(reqs.size(), size_t(NCCL_NET_MAX_REQUESTS * 8));
  EXPECT_EQ(r, nullptr);
  for (void* q : reqs) ASSERT_EQ(waitRequest(net, q, nullptr), ncclSuccess);
  ASSERT_EQ(net->isend(p.send, buf.data(), buf.size(), 0, nullptr, nullptr, &r), ncclSuccess);
  EXPECT_NE(r, nullptr);
  close(p);
}

}  // namespace
}  // namespace cfxtest
