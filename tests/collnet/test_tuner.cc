#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nccl/tuner_v5.h"
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
