// SPDX-License-Identifier: Apache-2.0
// ncclTunerPlugin_v5 and _v6 through the built .so: NCCL treats an error from the tuner's init
// as fatal for the communicator (src/init.cc), so a bad CONFLUX_* setting must cost the tuning
// only.
#include <cstdlib>

#include "nccl/tuner_v6.h"
#include "plugin_harness.h"

namespace cfxtest {
namespace {

constexpr int kAlgos = 7, kProtos = 3;  // NCCL 2.28's NCCL_NUM_ALGORITHMS / _PROTOCOLS

// NCCL passes its float[algo][proto] array cast to float**.
struct Table {
  float cost[kAlgos][kProtos];
  Table() {
    for (int a = 0; a < kAlgos; ++a) {
      for (int p = 0; p < kProtos; ++p) cost[a][p] = 10.0f + float(a * kProtos + p);
    }
  }
  float** table() { return reinterpret_cast<float**>(cost); }
};

ncclTuner_v5_t* tuner() {
  return static_cast<ncclTuner_v5_t*>(dlsym(Plugin::get().lib, "ncclTunerPlugin_v5"));
}

TEST(TunerAbi, BadSettingLeavesNcclsTableAloneInsteadOfFailingTheCommunicator) {
  ncclTuner_v5_t* t = tuner();
  ASSERT_NE(t, nullptr);
  setenv("CONFLUX_RING_FRACTION", "bogus", 1);
  LogCapture::clear();
  void* ctx = nullptr;
  EXPECT_EQ(t->init(&ctx, 0x1234, 8, 2, LogCapture::logger, nullptr, nullptr), ncclSuccess);
  unsetenv("CONFLUX_RING_FRACTION");
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(LogCapture::contains("CONFLUX_RING_FRACTION"));
  EXPECT_TRUE(LogCapture::contains("NCCL's own algorithm choices stand"));
  for (size_t bytes : {size_t{4}, size_t{1} << 20, size_t{1} << 30}) {
    Table tab, before;
    int nChannels = 0;
    EXPECT_EQ(t->getCollInfo(ctx, kNcclFuncAllReduce, bytes, 1, tab.table(), kAlgos, kProtos, 0,
                             &nChannels),
              ncclSuccess);
    EXPECT_EQ(std::memcmp(tab.cost, before.cost, sizeof tab.cost), 0) << bytes << " B";
  }
  EXPECT_EQ(t->finalize(ctx), ncclSuccess);
}

// The same call with good settings does tune: CollNetChain/Simple becomes the cheapest entry.
TEST(TunerAbi, GoodSettingsSteerAllReduceToCollNet) {
  ncclTuner_v5_t* t = tuner();
  ASSERT_NE(t, nullptr);
  void* ctx = nullptr;
  ASSERT_EQ(t->init(&ctx, 0x5678, 8, 2, LogCapture::logger, nullptr, nullptr), ncclSuccess);
  Table tab;  // as NCCL fills it for one GPU per node: of CollNet, only CollNetChain/Simple
  for (int p = 0; p < kProtos; ++p) {
    tab.cost[kNcclAlgoCollNetDirect][p] = kNcclAlgoProtoIgnore;
    tab.cost[kNcclAlgoNvls][p] = kNcclAlgoProtoIgnore;
    if (p != kNcclProtoSimple) tab.cost[kNcclAlgoCollNetChain][p] = kNcclAlgoProtoIgnore;
  }
  int nChannels = 0;
  EXPECT_EQ(t->getCollInfo(ctx, kNcclFuncAllReduce, 1 << 20, 1, tab.table(), kAlgos, kProtos, 0,
                           &nChannels),
            ncclSuccess);
  EXPECT_EQ(tab.cost[kNcclAlgoCollNetChain][kNcclProtoSimple], 0.0f);
  EXPECT_EQ(t->finalize(ctx), ncclSuccess);
}

ncclTuner_v6_t* tunerV6() {
  return static_cast<ncclTuner_v6_t*>(dlsym(Plugin::get().lib, "ncclTunerPlugin_v6"));
}

// v6 (NCCL 2.30+, looked for before v5): v5's choices, and getChunkSize trims the chunk of a
// CollNet AllReduce smaller than one loop to its share per channel (512 B grain); NCCL's chunk
// stays for everything else.
TEST(TunerAbi, V6SteersLikeV5AndTrimsSmallCollNetChunks) {
  ncclTuner_v6_t* t = tunerV6();
  ASSERT_NE(t, nullptr);
  ASSERT_NE(t->getChunkSize, nullptr);
  EXPECT_STREQ(t->name, tuner()->name);
  EXPECT_EQ((void*)t->getCollInfo, (void*)tuner()->getCollInfo);
  EXPECT_EQ((void*)t->finalize, (void*)tuner()->finalize);
  LogCapture::clear();
  void* ctx = nullptr;
  ASSERT_EQ(t->init(&ctx, 0x6666, 8, 2, LogCapture::logger, nullptr, nullptr), ncclSuccess);
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(LogCapture::contains("tuner v6"));
  Table tab;  // one GPU per node: of CollNet, only CollNetChain/Simple
  for (int p = 0; p < kProtos; ++p) {
    tab.cost[kNcclAlgoCollNetDirect][p] = kNcclAlgoProtoIgnore;
    tab.cost[kNcclAlgoNvls][p] = kNcclAlgoProtoIgnore;
    if (p != kNcclProtoSimple) tab.cost[kNcclAlgoCollNetChain][p] = kNcclAlgoProtoIgnore;
  }
  int nChannels = 0;
  ASSERT_EQ(
      t->getCollInfo(ctx, kNcclFuncAllReduce, 4, 1, tab.table(), kAlgos, kProtos, 0, &nChannels),
      ncclSuccess);
  EXPECT_EQ(tab.cost[kNcclAlgoCollNetChain][kNcclProtoSimple], 0.0f);

  const auto chunk = [&](int coll, size_t bytes, int algo, int proto, int channels, size_t in) {
    size_t c = in;
    EXPECT_EQ(t->getChunkSize(ctx, coll, bytes, algo, proto, channels, &c), ncclSuccess);
    return c;
  };
  constexpr size_t k32K = 32 * 1024, k256K = 256 * 1024;
  EXPECT_EQ(chunk(kNcclFuncAllReduce, 4, kNcclAlgoCollNetChain, kNcclProtoSimple, 1, k32K), 512u);
  EXPECT_EQ(chunk(kNcclFuncAllReduce, 4, kNcclAlgoCollNetDirect, kNcclProtoSimple, 2, k32K), 512u);
  EXPECT_EQ(chunk(kNcclFuncAllReduce, 100000, kNcclAlgoCollNetChain, kNcclProtoSimple, 2, k256K),
            50176u);  // 50000 B per channel, rounded up to 98 x 512
  EXPECT_EQ(
      chunk(kNcclFuncAllReduce, size_t{1} << 30, kNcclAlgoCollNetChain, kNcclProtoSimple, 2, k32K),
      k32K);
  EXPECT_EQ(chunk(kNcclFuncAllReduce, 4, kNcclAlgoRing, kNcclProtoSimple, 1, k32K), k32K);
  EXPECT_EQ(chunk(kNcclFuncAllReduce, 4, kNcclAlgoNvls, kNcclProtoSimple, 1, k32K), k32K);
  EXPECT_EQ(chunk(2 /* AllGather */, 4, kNcclAlgoCollNetDirect, kNcclProtoSimple, 1, k32K), k32K);
  EXPECT_EQ(t->getChunkSize(ctx, kNcclFuncAllReduce, 4, kNcclAlgoCollNetChain, kNcclProtoSimple, 1,
                            nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(t->finalize(ctx), ncclSuccess);
  size_t c = k32K;
  int not_a_context = 0;
  EXPECT_EQ(t->getChunkSize(&not_a_context, kNcclFuncAllReduce, 4, kNcclAlgoCollNetChain,
                            kNcclProtoSimple, 1, &c),
            ncclInvalidArgument);
  EXPECT_EQ(c, k32K);
}

TEST(TunerAbi, V6WithABadSettingLeavesNcclsChunk) {
  ncclTuner_v6_t* t = tunerV6();
  ASSERT_NE(t, nullptr);
  setenv("CONFLUX_RING_FRACTION", "bogus", 1);
  void* ctx = nullptr;
  EXPECT_EQ(t->init(&ctx, 0x6667, 8, 2, LogCapture::logger, nullptr, nullptr), ncclSuccess);
  unsetenv("CONFLUX_RING_FRACTION");
  ASSERT_NE(ctx, nullptr);
  size_t c = 32 * 1024;
  EXPECT_EQ(
      t->getChunkSize(ctx, kNcclFuncAllReduce, 4, kNcclAlgoCollNetChain, kNcclProtoSimple, 1, &c),
      ncclSuccess);
  EXPECT_EQ(c, 32u * 1024);
  EXPECT_EQ(t->finalize(ctx), ncclSuccess);
}

}  // namespace
}  // namespace cfxtest
