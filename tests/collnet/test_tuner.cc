// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "nccl/tuner_v6.h"
#include "tuner/tuner.h"

namespace conflux::tuner {
namespace {

constexpr int kAlgos = 7, kProtos = 3;

struct Table {
  float t[kAlgos][kProtos];
  Table() {
    for (auto& row : t)
      for (float& v : row) v = 10.0f;
  }
  float** ptr() { return reinterpret_cast<float**>(t); }
  float chain() const { return t[nccl::kNcclAlgoCollNetChain][nccl::kNcclProtoSimple]; }
};

constexpr int kAllReduce = nccl::kNcclFuncAllReduce;

TEST(Tuner, PicksCollNetInsideTheRange) {
  TunerPolicy p{1024, 1 << 20, 4};
  EXPECT_EQ(decide(p, kAllReduce, 4096, true, std::nullopt), Choice::kCollNet);
  EXPECT_EQ(decide(p, kAllReduce, 1024, true, std::nullopt), Choice::kCollNet);
  EXPECT_EQ(decide(p, kAllReduce, 1 << 20, true, std::nullopt), Choice::kCollNet);
  EXPECT_EQ(decide(p, kAllReduce, 512, true, std::nullopt), Choice::kNotCollNet);
  EXPECT_EQ(decide(p, kAllReduce, (1 << 20) + 1, true, std::nullopt), Choice::kNotCollNet);
  p.max_bytes = 0;  // no upper limit, but min_bytes still makes the range the operator's
  EXPECT_EQ(decide(p, kAllReduce, size_t(1) << 40, true, std::nullopt), Choice::kCollNet);
  EXPECT_EQ(decide(p, kAllReduce, 512, true, std::nullopt), Choice::kNotCollNet);
}

TEST(Tuner, TheOperatorsRangeOverridesTheMeasuredModel) {
  const TunerPolicy p{1024, 1 << 20, 4};
  EXPECT_EQ(decide(p, kAllReduce, 4096, true, false), Choice::kCollNet);
  EXPECT_EQ(decide(p, kAllReduce, 512, true, true), Choice::kNotCollNet);
  EXPECT_EQ(decide(TunerPolicy{0, 4096, 4}, kAllReduce, 8192, true, true), Choice::kNotCollNet);
}

TEST(Tuner, WithoutARangeTheMeasuredModelDecides) {
  const TunerPolicy p{0, 0, 4};
  EXPECT_EQ(decide(p, kAllReduce, 4096, true, true), Choice::kCollNet);
  EXPECT_EQ(decide(p, kAllReduce, 4096, true, false), Choice::kNotCollNet);
  // No model (several ranks per node, or none published): CollNet at every size.
  EXPECT_EQ(decide(p, kAllReduce, 4, true, std::nullopt), Choice::kCollNet);
  EXPECT_EQ(decide(p, kAllReduce, size_t(1) << 40, true, std::nullopt), Choice::kCollNet);
  // ... unless CONFLUX_RING_FRACTION=1 sends everything over our worker ring: NCCL's own.
  TunerPolicy ring_only = p;
  ring_only.ring_only = true;
  EXPECT_EQ(decide(ring_only, kAllReduce, 4, true, std::nullopt), Choice::kNotCollNet);
  EXPECT_EQ(decide(ring_only, kAllReduce, 1 << 26, true, std::nullopt), Choice::kNotCollNet);
  EXPECT_EQ(decide(ring_only, kAllReduce, 1 << 26, true, true), Choice::kCollNet);
  ring_only.min_bytes = 1024;  // the operator's range wins over everything
  EXPECT_EQ(decide(ring_only, kAllReduce, 4096, true, std::nullopt), Choice::kCollNet);
}

TEST(Tuner, HarmlessWithoutCollNet) {
  const TunerPolicy p{0, 0, 4};
  EXPECT_EQ(decide(p, kAllReduce, 4096, false, true), Choice::kLeave);
  EXPECT_EQ(decide(p, kAllReduce, 4096, false, false), Choice::kLeave);
  EXPECT_EQ(decide(p, 2 /* AllGather */, 4096, true, true), Choice::kLeave);
  EXPECT_EQ(decide(TunerPolicy{0, 0, 1}, kAllReduce, 4096, true, true), Choice::kLeave);
}

TEST(Tuner, DescribeNamesWhereTheChoiceChanges) {
  EXPECT_EQ(describe([](size_t b) { return b >= 4096; }),
            "NCCL's algorithms from 1 B, CollNet from 4096 B");
  EXPECT_EQ(describe([](size_t) { return true; }), "CollNet from 1 B");
  EXPECT_EQ(describe([](size_t b) { return b >= 64 && b < (size_t{1} << 30); }),
            "NCCL's algorithms from 1 B, CollNet from 64 B, NCCL's algorithms from 1073741824 B");
}

TEST(Tuner, ApplyEditsOnlyTheAggregatorsEntries) {
  Table a;
  apply(Choice::kCollNet, a.ptr(), kAlgos, kProtos, 2);
  EXPECT_EQ(a.chain(), 0.0f);
  EXPECT_EQ(a.t[nccl::kNcclAlgoRing][nccl::kNcclProtoSimple], 10.0f);
  Table b;
  apply(Choice::kNotCollNet, b.ptr(), kAlgos, kProtos, 2);
  EXPECT_EQ(b.chain(), -1.0f);
  EXPECT_EQ(b.t[nccl::kNcclAlgoRing][nccl::kNcclProtoSimple], 10.0f);
  // NCCL_ALGO=allreduce:collnetchain: every other entry is -1, so CollNetChain stays.
  Table only;
  for (auto& row : only.t)
    for (float& v : row) v = -1.0f;
  only.t[nccl::kNcclAlgoCollNetChain][nccl::kNcclProtoSimple] = 7.0f;
  apply(Choice::kNotCollNet, only.ptr(), kAlgos, kProtos, 2);
  EXPECT_EQ(only.chain(), 7.0f);
  only.t[nccl::kNcclAlgoRing][0] = 3.0f;  // one other entry (Ring/LL) is enough
  apply(Choice::kNotCollNet, only.ptr(), kAlgos, kProtos, 2);
  EXPECT_EQ(only.chain(), -1.0f);
  Table c;
  apply(Choice::kLeave, c.ptr(), kAlgos, kProtos, 2);
  EXPECT_EQ(c.chain(), 10.0f);
  apply(Choice::kCollNet, c.ptr(), 2, kProtos, 2);  // table too small: no such entry
  EXPECT_EQ(c.chain(), 10.0f);
}

// A table shaped as NCCL fills it on NVSwitch nodes with several GPUs each (src/enqueue.cc):
// unavailable entries -1, CollNetChain off, CollNetDirect and NVLS (whose inter-node step is
// CollNet) offered. Steering away from CollNet must close every way through the aggregators;
// steering to it picks the one NCCL itself finds cheapest, whatever the protocol.
TEST(Tuner, CollNetDirectAndNvlsFollowTheSameChoice) {
  Table t;
  for (auto& row : t.t)
    for (float& v : row) v = -1.0f;
  t.t[nccl::kNcclAlgoRing][nccl::kNcclProtoSimple] = 50.0f;
  t.t[0 /* Tree */][nccl::kNcclProtoSimple] = 40.0f;
  t.t[nccl::kNcclAlgoCollNetDirect][nccl::kNcclProtoSimple] = 30.0f;
  t.t[nccl::kNcclAlgoNvls][nccl::kNcclProtoSimple] = 20.0f;
  EXPECT_TRUE(collnet_offered(t.ptr(), kAlgos, kProtos, 2));
  EXPECT_FALSE(collnet_offered(t.ptr(), nccl::kNcclAlgoCollNetDirect, kProtos, 2));
  Table away = t;
  apply(Choice::kNotCollNet, away.ptr(), kAlgos, kProtos, 2);
  EXPECT_EQ(away.t[nccl::kNcclAlgoCollNetDirect][nccl::kNcclProtoSimple], -1.0f);
  EXPECT_EQ(away.t[nccl::kNcclAlgoNvls][nccl::kNcclProtoSimple], -1.0f);
  EXPECT_EQ(away.t[nccl::kNcclAlgoRing][nccl::kNcclProtoSimple], 50.0f);
  EXPECT_EQ(away.t[0][nccl::kNcclProtoSimple], 40.0f);
  Table to = t;
  apply(Choice::kCollNet, to.ptr(), kAlgos, kProtos, 2);
  EXPECT_EQ(to.t[nccl::kNcclAlgoNvls][nccl::kNcclProtoSimple], 0.0f) << "NCCL's cheapest of them";
  EXPECT_EQ(to.t[nccl::kNcclAlgoCollNetDirect][nccl::kNcclProtoSimple], 30.0f);
  EXPECT_EQ(to.chain(), -1.0f) << "an unavailable entry is never made available";
  // Within one node NVLS is NVLink SHARP alone, no CollNet: left to NCCL.
  EXPECT_FALSE(through_aggregators(nccl::kNcclAlgoNvls, 1));
  Table one = t;
  one.t[nccl::kNcclAlgoCollNetDirect][nccl::kNcclProtoSimple] = -1.0f;
  EXPECT_FALSE(collnet_offered(one.ptr(), kAlgos, kProtos, 1));
}

// getChunkSize (tuner v6): a CollNet AllReduce smaller than one loop (channels x NCCL's chunk)
// gets its share per channel, rounded up to the 512 B grain; nothing else changes.
TEST(TunerChunk, SmallCollNetAllReduceGetsItsShareRoundedToTheGrain) {
  const TunerPolicy p{0, 0, 4};
  constexpr int kChain = nccl::kNcclAlgoCollNetChain, kDirect = nccl::kNcclAlgoCollNetDirect;
  constexpr int kSimple = nccl::kNcclProtoSimple;
  constexpr size_t k32K = 32 * 1024, k256K = 256 * 1024;
  // A 4 B AllReduce: 512 B, not NCCL's 32 KiB (one channel) nor 256 KiB.
  EXPECT_EQ(chunk_size(p, kAllReduce, 4, kChain, kSimple, 1, k32K), 512u);
  EXPECT_EQ(chunk_size(p, kAllReduce, 4, kChain, kSimple, 2, k256K), 512u);
  EXPECT_EQ(chunk_size(p, kAllReduce, 4, kDirect, kSimple, 4, k32K), 512u);
  // 10000 B over 2 channels: 5000 B each, rounded up to 5120.
  EXPECT_EQ(chunk_size(p, kAllReduce, 10000, kChain, kSimple, 2, k32K), 5120u);
  EXPECT_EQ(chunk_size(p, kAllReduce, 1024, kChain, kSimple, 2, k32K), 512u);
  EXPECT_EQ(chunk_size(p, kAllReduce, 1025, kChain, kSimple, 2, k32K), 1024u);
  // The result always covers the AllReduce in one loop, and is a multiple of the grain.
  for (size_t bytes = 1; bytes <= 3 * k32K; bytes = bytes * 3 + 1) {
    for (int ch : {1, 2, 3, 8}) {
      const size_t c = chunk_size(p, kAllReduce, bytes, kChain, kSimple, ch, k32K);
      EXPECT_EQ(c % 512, 0u) << bytes << " B, " << ch << " channels";
      EXPECT_LE(c, k32K);
      EXPECT_GE(c * static_cast<size_t>(ch), std::min(bytes, k32K * static_cast<size_t>(ch)));
    }
  }
}

TEST(TunerChunk, LeavesNcclsChunkOtherwise) {
  const TunerPolicy p{0, 0, 4};
  constexpr int kChain = nccl::kNcclAlgoCollNetChain, kSimple = nccl::kNcclProtoSimple;
  constexpr size_t k32K = 32 * 1024, k128K = 128 * 1024;
  // One loop or more: NCCL's chunk (its own halving already matched it to the size).
  EXPECT_EQ(chunk_size(p, kAllReduce, 2 * k32K, kChain, kSimple, 2, k32K), k32K);
  EXPECT_EQ(chunk_size(p, kAllReduce, size_t{1} << 30, kChain, kSimple, 2, k128K), k128K);
  EXPECT_EQ(chunk_size(p, kAllReduce, k32K - 100, kChain, kSimple, 1, k32K), k32K);
  // Not a CollNet algorithm, not Simple, not AllReduce, no channels, 0 bytes.
  EXPECT_EQ(chunk_size(p, kAllReduce, 4, nccl::kNcclAlgoRing, kSimple, 1, k32K), k32K);
  EXPECT_EQ(chunk_size(p, kAllReduce, 4, nccl::kNcclAlgoNvls, kSimple, 1, k32K), k32K);
  EXPECT_EQ(chunk_size(p, kAllReduce, 4, kChain, 0, 1, k32K), k32K);
  EXPECT_EQ(chunk_size(p, 2 /* AllGather */, 4, kChain, kSimple, 1, k32K), k32K);
  EXPECT_EQ(chunk_size(p, kAllReduce, 4, kChain, kSimple, 0, k32K), k32K);
  EXPECT_EQ(chunk_size(p, kAllReduce, 0, kChain, kSimple, 1, k32K), k32K);
  // Settings that do not parse: NCCL's choices stand, the chunk too.
  TunerPolicy bad;
  bad.leave_all = true;
  EXPECT_EQ(chunk_size(bad, kAllReduce, 4, kChain, kSimple, 1, k32K), k32K);
}

}  // namespace
}  // namespace conflux::tuner

#include "core/params.h"

namespace conflux::plugin {
namespace {

EnvLookup envOf(std::map<std::string, std::string> m) {
  return [m](const char* name) -> const char* {
    auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

TEST(CollNetParams, DefaultsAndValues) {
  Config c;
  std::string err;
  ASSERT_EQ(loadConfig(&c, &err, envOf({})), Status::kOk) << err;
  EXPECT_EQ(c.aggregators, "");
  EXPECT_EQ(c.ringFraction, kAutoFraction);
  EXPECT_EQ(c.aggregatorMbps, 0);
  EXPECT_EQ(c.windowSlots, 64);
  EXPECT_EQ(c.payloadBytes, 8192u);
  EXPECT_EQ(c.ringMinUs, 10);
  ASSERT_EQ(loadConfig(&c, &err,
                       envOf({{"CONFLUX_RING_FRACTION", "0.3"},
                              {"CONFLUX_RING_MIN_US", "0"},
                              {"CONFLUX_AGGREGATORS", "10.0.0.1:7470,10.0.0.2:7470"},
                              {"CONFLUX_DETERMINISTIC", "yes"},
                              {"CONFLUX_RING_BLOCK_BYTES", "256K"}})),
            Status::kOk)
      << err;
  EXPECT_DOUBLE_EQ(c.ringFraction, 0.3);
  EXPECT_EQ(c.aggregators, "10.0.0.1:7470,10.0.0.2:7470");
  EXPECT_TRUE(c.deterministic);
  EXPECT_EQ(c.ringBlockBytes, 256u * 1024);
  EXPECT_EQ(c.ringMinUs, 0);
  ASSERT_EQ(loadConfig(&c, &err, envOf({{"CONFLUX_RING_FRACTION", "AUTO"}})), Status::kOk);
  EXPECT_EQ(c.ringFraction, kAutoFraction);
}

TEST(CollNetParams, BadValuesNameTheVariable) {
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"CONFLUX_RING_FRACTION", "1.5"},
                                                        {"CONFLUX_RING_FRACTION", "-0.1"},
                                                        {"CONFLUX_RING_FRACTION", "half"},
                                                        {"CONFLUX_RING_FRACTION", "nan"},
                                                        {"CONFLUX_WINDOW_SLOTS", "0"},
                                                        {"CONFLUX_PAYLOAD_BYTES", "64K"},
                                                        {"CONFLUX_REQUIRE_AGGREGATORS", "maybe"},
                                                        {"CONFLUX_RING_INFLIGHT", "33"},
                                                        {"CONFLUX_RING_MIN_US", "-1"}}) {
    Config c;
    std::string err;
    EXPECT_EQ(loadConfig(&c, &err, envOf({{name, value}})), Status::kInvalidArgument)
        << name << "=" << value;
    EXPECT_NE(err.find(name), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace conflux::plugin
