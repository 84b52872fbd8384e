// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v12 / ncclCollNetPlugin_v12 (NCCL 2.30+): v11's entry points with v12's
// properties, railId and planeId unknown (-1) for Conflux's TCP devices.
#include "nccl/net_v12.h"
#include "plugin_harness.h"

namespace cfxtest {
namespace {

template <typename T>
T* symbol(const char* name) {
  return static_cast<T*>(dlsym(Plugin::get().lib, name));
}

TEST_F(V11Test, V12NetIsV11sCallsWithRailAndPlaneInItsProperties) {
  auto* v12 = symbol<ncclNet_v12_t>("ncclNetPlugin_v12");
  ASSERT_NE(v12, nullptr);
  EXPECT_STREQ(v12->name, net->name);
  // The same functions as v11's, but getProperties; the optional ones null in both.
  EXPECT_EQ((void*)v12->init, (void*)net->init);
  EXPECT_EQ((void*)v12->listen, (void*)net->listen);
  EXPECT_EQ((void*)v12->connect, (void*)net->connect);
  EXPECT_EQ((void*)v12->accept, (void*)net->accept);
  EXPECT_EQ((void*)v12->isend, (void*)net->isend);
  EXPECT_EQ((void*)v12->irecv, (void*)net->irecv);
  EXPECT_EQ((void*)v12->test, (void*)net->test);
  EXPECT_EQ((void*)v12->finalize, (void*)net->finalize);
  EXPECT_NE((void*)v12->getProperties, (void*)net->getProperties);
  EXPECT_EQ(v12->makeVDevice, nullptr);
  EXPECT_EQ(v12->setNetAttr, nullptr);

  ncclNetProperties_v11_t p11{};
  ncclNetProperties_v12_t p12;
  std::memset(&p12, 0x5a, sizeof p12);  // every field must be written
  ASSERT_EQ(net->getProperties(dev, &p11), ncclSuccess);
  ASSERT_EQ(v12->getProperties(dev, &p12), ncclSuccess);
  EXPECT_STREQ(p12.name, p11.name);
  EXPECT_STREQ(p12.pciPath, p11.pciPath);
  EXPECT_EQ(p12.guid, p11.guid);
  EXPECT_EQ(p12.ptrSupport, p11.ptrSupport);
  EXPECT_EQ(p12.forceFlush, p11.forceFlush);
  EXPECT_EQ(p12.speed, p11.speed);
  EXPECT_EQ(p12.latency, p11.latency);
  EXPECT_EQ(p12.maxRecvs, p11.maxRecvs);
  EXPECT_EQ(p12.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_EQ(p12.vProps.ndevs, 1);
  EXPECT_EQ(p12.vProps.devs[0], dev);
  EXPECT_EQ(p12.maxP2pBytes, p11.maxP2pBytes);
  EXPECT_EQ(p12.maxCollBytes, p11.maxCollBytes);
  EXPECT_EQ(p12.maxMultiRequestSize, p11.maxMultiRequestSize);
  EXPECT_EQ(p12.railId, NCCL_NET_ID_UNDEF);
  EXPECT_EQ(p12.planeId, NCCL_NET_ID_UNDEF);
  EXPECT_NE(v12->getProperties(99, &p12), ncclSuccess);
  EXPECT_EQ(v12->getProperties(dev, nullptr), ncclInvalidArgument);
}

TEST(V12Exports, CollNetIsV11sCallsWithV12Properties) {
  auto* c11 = symbol<ncclCollNet_v11_t>("ncclCollNetPlugin_v11");
  auto* c12 = symbol<ncclCollNet_v12_t>("ncclCollNetPlugin_v12");
  auto* n12 = symbol<ncclNet_v12_t>("ncclNetPlugin_v12");
  ASSERT_NE(c11, nullptr);
  ASSERT_NE(c12, nullptr);
  ASSERT_NE(n12, nullptr);
  EXPECT_STREQ(c12->name, c11->name);
  EXPECT_EQ((void*)c12->init, (void*)c11->init);
  EXPECT_EQ((void*)c12->devices, (void*)c11->devices);
  EXPECT_EQ((void*)c12->listen, (void*)c11->listen);
  EXPECT_EQ((void*)c12->connect, (void*)c11->connect);
  EXPECT_EQ((void*)c12->iallreduce, (void*)c11->iallreduce);
  EXPECT_EQ((void*)c12->test, (void*)c11->test);
  EXPECT_EQ((void*)c12->closeColl, (void*)c11->closeColl);
  EXPECT_EQ((void*)c12->finalize, (void*)c11->finalize);
  EXPECT_EQ((void*)c12->getProperties, (void*)n12->getProperties);  // the same devices
  EXPECT_EQ(c12->makeVDevice, nullptr);
  for (auto fn : {(void*)c12->regMr, (void*)c12->regMrDmaBuf, (void*)c12->deregMr,
                  (void*)c12->iallgather, (void*)c12->ireducescatter, (void*)c12->iflush,
                  (void*)c12->closeListen, (void*)c12->reduceSupport}) {
    EXPECT_NE(fn, nullptr);
  }
}

}  // namespace
}  // namespace cfxtest
