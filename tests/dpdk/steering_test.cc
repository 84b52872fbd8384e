// SPDX-License-Identifier: Apache-2.0
// Unit tests of the DPDK dataplane's software steering (aggregator/dataplane/dpdk/steering.h):
// the slot is read from where proto::encode_data_header writes it. No EAL, no root.
#include "aggregator/dataplane/dpdk/steering.h"

#include <vector>

#include "conflux/protocol/data.h"
#include "gtest/gtest.h"

namespace conflux::agg::dpdk {
namespace {

std::vector<uint8_t> datagram(uint32_t slot) {
  proto::DataHeader h;
  h.job_id = 0xa5a5a5a5;
  h.contributor = 0xffff;
  h.job_token = ~uint64_t{0};
  h.slot = slot;
  h.generation = 0xffffffff;
  h.offset = ~uint64_t{0};
  h.count = 4;
  std::vector<uint8_t> d(proto::kDataHeaderSize + 16);
  proto::encode_data_header(h, d.data());
  return d;
}

TEST(Steering, OwnerIsSlotModQueues) {
  for (uint32_t slot : {0u, 1u, 2u, 7u, 255u, 256u, 65537u, 0xfffffffeu, 0xffffffffu}) {
    const auto d = datagram(slot);
    for (unsigned n : {1u, 2u, 3u, 4u, 64u}) {
      for (unsigned self = 0; self < n; ++self) {
        EXPECT_EQ(owner_queue(d.data(), uint32_t(d.size()), n, self), n == 1 ? self : slot % n)
            << "slot " << slot << " queues " << n;
      }
    }
  }
}

TEST(Steering, ShortDatagramStaysWhereItArrived) {
  const auto d = datagram(5);
  for (uint32_t len : {0u, 1u, 27u, 28u, uint32_t(proto::kDataHeaderSize - 1)}) {
    EXPECT_EQ(owner_queue(d.data(), len, 4, 2), 2u) << len;
  }
  EXPECT_EQ(owner_queue(d.data(), uint32_t(proto::kDataHeaderSize), 4, 2), 1u);
}

}  // namespace
}  // namespace conflux::agg::dpdk
