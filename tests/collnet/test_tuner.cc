#include <gtest/gtest.h>

#include "abi/tuner_v5.h"
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
  float chain() const { return t[abi::kNcclAlgoCollNetChain][abi::kNcclProtoSimple]; }
};

TEST(Tuner, PicksCollNetInsideTheRange) {
  TunerPolicy p{1024, 1 << 20, 4};
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, 4096, true, true), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, 1024, true, true), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, 1 << 20, true, true), Choice::kCollNetChain);
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, 512, true, true), Choice::kNotCollNet);
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, (1 << 20) + 1, true, true), Choice::kNotCollNet);
  p.max_bytes = 0;  // unlimited
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, size_t(1) << 40, true, true), Choice::kCollNetChain);
}

TEST(Tuner, HarmlessWithoutCollNet) {
  const TunerPolicy p{0, 0, 4};
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, 4096, false, true), Choice::kLeave);
  EXPECT_EQ(decide(p, abi::kNcclFuncAllReduce, 4096, true, false), Choice::kLeave);
  EXPECT_EQ(decide(p, 2 /* AllGather */, 4096, true, true), Choice::kLeave);
  EXPECT_EQ(decide(TunerPolicy{0, 0, 1}, abi::kNcclFuncAllReduce, 4096, true, true),
            Choice::kLeave);
}

TEST(Tuner, ApplyEditsOnlyCollNetChainSimple) {
  Table a;
  apply(Choice::kCollNetChain, a.ptr(), kAlgos, kProtos);
  EXPECT_EQ(a.chain(), 0.0f);
  EXPECT_EQ(a.t[abi::kNcclAlgoRing][abi::kNcclProtoSimple], 10.0f);
  Table b;
  apply(Choice::kNotCollNet, b.ptr(), kAlgos, kProtos);
  EXPECT_EQ(b.chain(), -1.0f);
  EXPECT_EQ(b.t[abi::kNcclAlgoRing][abi::kNcclProtoSimple], 10.0f);
  Table c;
  apply(Choice::kLeave, c.ptr(), kAlgos, kProtos);
  EXPECT_EQ(c.chain(), 10.0f);
  apply(Choice::kCollNetChain, c.ptr(), 2, kProtos);  // table too small: untouched
  EXPECT_EQ(c.chain(), 10.0f);
}

}  // namespace
}  // namespace conflux::tuner
