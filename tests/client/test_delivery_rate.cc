// SPDX-License-Identifier: Apache-2.0
// DeliveryRate (nccl_plugin/client/src/delivery_rate.h): the windowed maximum of the results'
// rate, and the least wait it gives a packet sent behind outstanding bytes.
#include <gtest/gtest.h>

#include <cstdint>

#include "delivery_rate.h"

namespace conflux::client {
namespace {

constexpr int64_t kMs = 1'000'000;

// `bytes` every `every_ns` from `start` for `n` results.
int64_t deliver(DeliveryRate& r, int64_t start, int n, uint64_t bytes, int64_t every_ns,
                int64_t interval_ns) {
  int64_t t = start;
  for (int i = 0; i < n; ++i, t += every_ns) r.on_delivered(bytes, t, interval_ns);
  return t;
}

TEST(DeliveryRate, NoRateNoWait) {
  DeliveryRate r;
  EXPECT_EQ(r.bytes_per_ns(), 0);
  EXPECT_EQ(r.queue_us(1 << 20), 0);
  r.on_delivered(8192, kMs, kMs);  // the first result only starts a sample
  EXPECT_EQ(r.bytes_per_ns(), 0);
}

TEST(DeliveryRate, ABulkTransferSetsTheRateAndTheWaitBehindAFullWindow) {
  // 8 KiB every 0.655 ms: 12.5 MB/s, a 100 Mbit/s link. 64 packets ahead drain in 42 ms.
  DeliveryRate r;
  deliver(r, kMs, 200, 8192, 655'360, 5 * kMs);
  EXPECT_NEAR(r.bytes_per_ns() * 1e9, 12.5e6, 0.1e6);
  EXPECT_NEAR(r.queue_us(64 * 8192), 41'943, 400);
}

TEST(DeliveryRate, SparseTrafficAndIdleGapsOnlyDecayTheRate) {
  DeliveryRate r;
  int64_t t = deliver(r, kMs, 200, 8192, 655'360, 5 * kMs);
  const double bulk = r.bytes_per_ns();
  // An idle second, then one small result: one low sample, the maximum decays once.
  t += 1000 * kMs;
  r.on_delivered(4, t, 5 * kMs);
  EXPECT_DOUBLE_EQ(r.bytes_per_ns(), bulk * DeliveryRate::kDecay);
  // Sparse small results for a while: the rate decays sample by sample, never below them.
  deliver(r, t + 10 * kMs, 20, 4, 10 * kMs, 5 * kMs);
  EXPECT_LT(r.bytes_per_ns(), bulk * DeliveryRate::kDecay);
  EXPECT_GT(r.bytes_per_ns(), 4.0 / (10 * kMs));
}

TEST(DeliveryRate, AFasterTransferRaisesTheRateAtOnce) {
  DeliveryRate r;
  int64_t t = deliver(r, kMs, 50, 8192, 655'360, 5 * kMs);
  const double slow = r.bytes_per_ns();
  deliver(r, t, 200, 8192, 65'536, 5 * kMs);  // ten times faster, for 13 ms
  EXPECT_GT(r.bytes_per_ns(), 9 * slow);
}

TEST(DeliveryRate, ASampleSpansAtLeastTheInterval) {
  // Results arriving in a burst (one wake-up takes a batch) are not a rate of their own.
  DeliveryRate r;
  r.on_delivered(8192, kMs, 2 * kMs);
  for (int i = 0; i < 8; ++i) r.on_delivered(8192, kMs + 1000 * (i + 1), 2 * kMs);
  EXPECT_EQ(r.bytes_per_ns(), 0);  // 9 µs of burst: no sample yet
  r.on_delivered(8192, 3 * kMs, 2 * kMs);
  EXPECT_NEAR(r.bytes_per_ns(), 9.0 * 8192 / (2 * kMs), 1e-9);
}

}  // namespace
}  // namespace conflux::client
