// SPDX-License-Identifier: Apache-2.0
// NetDelegate (core/net_delegate.h) on the test delegates of every ABI version
// (tests/plugin_net/delegate): the newest exported version is taken, its name and properties
// come through, and what an older version lacks is filled as NCCL fills it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/net_delegate.h"

namespace conflux::plugin {
namespace {

std::string fixture(int v) {
  return std::string(CONFLUX_TEST_DELEGATE_DIR) + "/libconflux_test_delegate_v" +
         std::to_string(v) + ".so";
}

TEST(NetDelegate, EveryVersionLoadsAndPassesItsPropertiesThrough) {
  for (int v : {8, 9, 10, 11}) {
    SCOPED_TRACE("v" + std::to_string(v));
    std::unique_ptr<NetDelegate> d;
    const conflux::Status loaded = NetDelegate::load(fixture(v), &d);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->version(), v);
    EXPECT_EQ(std::string(d->name()), "TestDelegate" + std::to_string(v));
    ASSERT_EQ(d->initProcess(nullptr, nullptr), Status::kOk);
    int ndev = 0;
    ASSERT_EQ(d->devices(&ndev), Status::kOk);
    ASSERT_GE(ndev, 1);
    NetProperties p;
    ASSERT_EQ(d->getProperties(0, &p), Status::kOk);
    EXPECT_EQ(std::string(p.name), "delegate0");
    EXPECT_EQ(p.speed, 12345);
    EXPECT_EQ(p.ptrSupport, nccl::NCCL_PTR_HOST);
    EXPECT_GE(p.maxRecvs, 1);
    EXPECT_GE(p.maxMultiRequestSize, 1);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], 0);
    // v8 sizes are int: at most 1 GiB per message is advertised for it.
    EXPECT_EQ(p.maxP2pBytes, v == 8 ? size_t{1} << 30 : nccl::NCCL_MAX_NET_SIZE_BYTES);
    EXPECT_EQ(d->getProperties(ndev, &p) == Status::kOk, false) << "a device past the last";
  }
}

TEST(NetDelegate, ALibraryThatIsNoNetPluginIsRefusedWithTheReason) {
  std::unique_ptr<NetDelegate> d;
  conflux::Status st = NetDelegate::load(fixture(8) + ".missing", &d);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(st.code(), conflux::Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("CONFLUX_NET_DELEGATE="), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cannot load it"), std::string::npos) << st.message();
  st = NetDelegate::load("libm.so.6", &d);  // loads, exports no ncclNet
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(st.code(), conflux::Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("exports no ncclNetPlugin_v8 .. _v11"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace conflux::plugin
