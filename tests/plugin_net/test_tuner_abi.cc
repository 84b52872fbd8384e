// ncclTunerPlugin_v5 through the built .so: NCCL treats an error from the tuner's init as fatal
// for the communicator (src/init.cc), so a bad CONFLUX_* setting must cost the tuning only.
#include <cstdlib>

#include "nccl/tuner_v5.h"
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

}  // namespace
}  // namespace cfxtest
