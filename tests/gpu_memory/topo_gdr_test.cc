// SPDX-License-Identifier: Apache-2.0
// NCCL's gdr rule (nccl/topo_gdr.h) on the cases that matter for Conflux: CollNet describes a
// NIC first, so its ptrSupport decides the bit for the p2p net of the same name too.
#include "nccl/topo_gdr.h"

#include <gtest/gtest.h>

namespace conflux::nccl {
namespace {

constexpr int kHost = NCCL_PTR_HOST;
constexpr int kGpuDirect = NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF;

TEST(TopoGdr, CollNetMirroringAGpuDirectNetKeepsGdr) {
  const auto nics = topo_gdr({{"mlx5_0", kGpuDirect}}, {{"mlx5_0", kGpuDirect}}, true);
  ASSERT_EQ(nics.size(), 1u);
  EXPECT_TRUE(nics[0].gdr);
  EXPECT_EQ(nics[0].first, "CollNet");
}

TEST(TopoGdr, AHostOnlyCollNetTakesGdrFromTheNetOfTheSameName) {
  const auto nics = topo_gdr({{"mlx5_0", kHost}}, {{"mlx5_0", kGpuDirect}}, true);
  ASSERT_EQ(nics.size(), 1u);
  EXPECT_FALSE(nics[0].gdr);  // the first description wins
}

TEST(TopoGdr, ADifferentNameIsANicOfItsOwn) {
  const auto nics = topo_gdr({{"conflux0", kHost}}, {{"mlx5_0", kGpuDirect}}, true);
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_FALSE(nics[0].gdr);
  EXPECT_EQ(nics[1].name, "mlx5_0");
  EXPECT_TRUE(nics[1].gdr);
  EXPECT_EQ(nics[1].first, "net");
}

TEST(TopoGdr, DmaBufCountsOnlyWhereItIsUsable) {
  const int dmabuf = NCCL_PTR_HOST | NCCL_PTR_DMABUF;
  EXPECT_TRUE(topo_gdr({{"a", dmabuf}}, {}, true)[0].gdr);
  EXPECT_FALSE(topo_gdr({{"a", dmabuf}}, {}, false)[0].gdr);
  EXPECT_TRUE(gdr_capable(NCCL_PTR_CUDA, false));
  EXPECT_FALSE(gdr_capable(kHost, true));
}

}  // namespace
}  // namespace conflux::nccl
