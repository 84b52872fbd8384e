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

TEST(Tuner, PicksCollNetInsideTheRange) {
  TunerPolicy p{1024, 1 << 20, 4};
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 4096, true, true, true), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 1024, true, true, true), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 1 << 20, true, true, true), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 512, true, true, true), Choice::kNotCollNet);
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, (1 << 20) + 1, true, true, true),
            Choice::kNotCollNet);
  p.max_bytes = 0;  // unlimited
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, size_t(1) << 40, true, true, true),
            Choice::kCollNetChain);
}

TEST(Tuner, HarmlessWithoutCollNet) {
  const TunerPolicy p{0, 0, 4};
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 4096, false, true, true), Choice::kLeave);
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 4096, true, false, true), Choice::kLeave);
  EXPECT_EQ(decide(p, 2 /* AllGather */, 4096, true, true, true), Choice::kLeave);
  EXPECT_EQ(decide(TunerPolicy{0, 0, 1}, nccl::kNcclFuncAllReduce, 4096, true, true, true),
            Choice::kLeave);
}

TEST(Tuner, SteersAwayFromCollNetWithoutAggregatorCapacity) {
  // Connected, but every comm failed over (or sends everything over the ring): CollNet would
  // only run the worker ring, so NCCL's Ring is preferred, whatever the size.
  const TunerPolicy p{0, 0, 4};
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 4096, true, true, false), Choice::kNotCollNet);
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 1 << 26, true, true, false), Choice::kNotCollNet);
  EXPECT_EQ(decide(p, nccl::kNcclFuncAllReduce, 4096, true, false, false), Choice::kLeave);
}

// With no byte range set, the measured estimate of both paths (collnet/path_estimate.h)
// decides per size. 4 ranks on 1000 Mbit/s links, the worker ring 70 us per hop.
TEST(Tuner, TheMeasuredEstimateChoosesPerSize) {
  collnet::PathEstimate e;
  e.nranks = 4;
  e.hop_s = 70e-6;
  e.link_bps = 125e6;
  e.s_per_byte = 1 / 125e6;  // the split's model with one aggregator at 4x: the link's rate
  e.latency_s = 70e-6;       // a small AllReduce through the aggregators
  const TunerPolicy p{0, 0, 4};
  const int ar = nccl::kNcclFuncAllReduce;
  // Fewer hops and fewer bytes per byte: CollNet at every size.
  for (const size_t b : {size_t{4}, size_t{64} << 10, size_t{1} << 20, size_t{64} << 20}) {
    EXPECT_EQ(decide(p, ar, b, true, true, true, &e), Choice::kCollNetChain) << b;
  }
  // A slow CollNet round trip (1 ms): the ring's 6 hops (420 us) win below the crossing, where
  // 1 ms + B / L = 420 us + 1.5 B / L, i.e. B = 145 kB; CollNet's bandwidth above it.
  e.latency_s = 1e-3;
  EXPECT_EQ(decide(p, ar, 4, true, true, true, &e), Choice::kNotCollNet);
  EXPECT_EQ(decide(p, ar, 140000, true, true, true, &e), Choice::kNotCollNet);
  EXPECT_EQ(decide(p, ar, 150000, true, true, true, &e), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, ar, size_t{64} << 20, true, true, true, &e), Choice::kCollNetChain);
  EXPECT_TRUE(by_estimate(p, &e));
  // A byte range set by the operator wins over the estimate.
  const TunerPolicy range{1024, 0, 4};
  EXPECT_FALSE(by_estimate(range, &e));
  EXPECT_EQ(decide(range, ar, 4096, true, true, true, &e), Choice::kCollNetChain);
  EXPECT_EQ(decide(range, ar, 512, true, true, true, &e), Choice::kNotCollNet);
  // CONFLUX_TUNER_MEASURED=0, an incomplete estimate (no small AllReduce timed yet), or none:
  // CollNet for every size, as with no range.
  TunerPolicy off = p;
  off.measured = false;
  EXPECT_EQ(decide(off, ar, 4, true, true, true, &e), Choice::kCollNetChain);
  collnet::PathEstimate young = e;
  young.latency_s = 0;
  EXPECT_FALSE(by_estimate(p, &young));
  EXPECT_EQ(decide(p, ar, 4, true, true, true, &young), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, ar, 4, true, true, true, nullptr), Choice::kCollNetChain);
  // Without aggregator capacity the estimate does not matter.
  e.latency_s = 1e-6;
  EXPECT_EQ(decide(p, ar, 4, true, true, false, &e), Choice::kNotCollNet);
}

// The registry the tuner reads: the estimate written last, among the live communicators'.
TEST(Tuner, TheLatestEstimateIsTheOneWrittenLast) {
  EXPECT_FALSE(collnet::PathEstimateSlot::latest().has_value());
  {
    collnet::PathEstimateSlot a(4), b(8);
    EXPECT_EQ(collnet::PathEstimateSlot::latest()->nranks, 8);
    a.set_model(1e-8, 70e-6, 125e6);
    EXPECT_EQ(collnet::PathEstimateSlot::latest()->nranks, 4);
    EXPECT_FALSE(collnet::PathEstimateSlot::latest()->complete());
    a.add_latency(100e-6);
    EXPECT_TRUE(collnet::PathEstimateSlot::latest()->complete());
    a.add_latency(180e-6);  // a moving average: 1/8 of the new one
    EXPECT_DOUBLE_EQ(a.get().latency_s, 110e-6);
    {
      collnet::PathEstimateSlot c(2);
      EXPECT_EQ(collnet::PathEstimateSlot::latest()->nranks, 2);
    }
    EXPECT_EQ(collnet::PathEstimateSlot::latest()->nranks, 4);  // c is gone
    b.add_latency(1e-3);
    EXPECT_EQ(collnet::PathEstimateSlot::latest()->nranks, 8);
  }
  EXPECT_FALSE(collnet::PathEstimateSlot::latest().has_value());
}

TEST(Tuner, ApplyEditsOnlyCollNetChainSimple) {
  Table a;
  apply(Choice::kCollNetChain, a.ptr(), kAlgos, kProtos);
  EXPECT_EQ(a.chain(), 0.0f);
  EXPECT_EQ(a.t[nccl::kNcclAlgoRing][nccl::kNcclProtoSimple], 10.0f);
  Table b;
  apply(Choice::kNotCollNet, b.ptr(), kAlgos, kProtos);
  EXPECT_EQ(b.chain(), -1.0f);
  EXPECT_EQ(b.t[nccl::kNcclAlgoRing][nccl::kNcclProtoSimple], 10.0f);
  Table c;
  apply(Choice::kLeave, c.ptr(), kAlgos, kProtos);
  EXPECT_EQ(c.chain(), 10.0f);
  apply(Choice::kCollNetChain, c.ptr(), 2, kProtos);  // table too small: untouched
  EXPECT_EQ(c.chain(), 10.0f);
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
  EXPECT_EQ(c.tunerMeasured, 1);
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
                                                        {"CONFLUX_RING_MIN_US", "-1"},
                                                        {"CONFLUX_TUNER_MEASURED", "2"}}) {
    Config c;
    std::string err;
    EXPECT_EQ(loadConfig(&c, &err, envOf({{name, value}})), Status::kInvalidArgument)
        << name << "=" << value;
    EXPECT_NE(err.find(name), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace conflux::plugin
