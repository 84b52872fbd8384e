// SPDX-License-Identifier: Apache-2.0
// TokenBucket (aggregator/util/token_bucket.h) on a clock the test drives.
#include "aggregator/util/token_bucket.h"

#include "gtest/gtest.h"

namespace conflux::agg {
namespace {

constexpr uint64_t kSec = 1000000000;

TEST(TokenBucket, UnlimitedNeverWaits) {
  TokenBucket b(0, 0);
  EXPECT_FALSE(b.limited());
  b.consume(0, 1 << 30);
  EXPECT_EQ(b.delay_ns(0), 0u);
}

TEST(TokenBucket, BurstThenRate) {
  TokenBucket b(1000, 500);  // 1000 B/s, 500 B burst
  EXPECT_EQ(b.delay_ns(0), 0u);
  b.consume(0, 500);             // the burst
  EXPECT_EQ(b.delay_ns(0), 0u);  // empty, not in debt
  b.consume(0, 250);             // 250 B of debt: 0.25 s
  EXPECT_NEAR(static_cast<double>(b.delay_ns(0)), 0.25 * kSec, 2);
  EXPECT_NEAR(static_cast<double>(b.delay_ns(kSec / 10)), 0.15 * kSec, 2);
  EXPECT_EQ(b.delay_ns(kSec / 4), 0u);
}

TEST(TokenBucket, LongRunAverageIsTheRate) {
  // A sender that always sends 100 B as soon as it may, for 10 s of bucket time.
  TokenBucket b(10000, 1000);
  uint64_t now = 0, sent = 0;
  while (now < 10 * kSec) {
    now += b.delay_ns(now);
    b.consume(now, 100);
    sent += 100;
  }
  // rate x time + burst + one send of debt, at most.
  EXPECT_LE(sent, 10 * 10000 + 1000 + 100);
  EXPECT_GE(sent, 10 * 10000);
}

TEST(TokenBucket, IdleTimeRefillsOnlyUpToTheBurst) {
  TokenBucket b(1000, 500);
  b.consume(0, 500);
  b.consume(100 * kSec, 500);  // 100 s idle: back to 500 tokens, not 100000
  EXPECT_EQ(b.delay_ns(100 * kSec), 0u);
  b.consume(100 * kSec, 1);
  EXPECT_GT(b.delay_ns(100 * kSec), 0u);
}

TEST(TokenBucket, EgressBucketSplitsTheCapOverQueues) {
  TokenBucket b = egress_bucket(80, 2);  // 10 MB/s in all, 5 MB/s per queue
  b.consume(0, 65536 + 5000000);         // burst (64 KiB) plus 1 s of debt
  EXPECT_NEAR(static_cast<double>(b.delay_ns(0)), 1.0 * kSec, 1000);
  EXPECT_FALSE(egress_bucket(0, 4).limited());
}

// conflux throttle: a queue's bucket follows the daemon's cap from its next send on, a new cap
// with a fresh burst, and no cap at all when it is set to 0.
TEST(TokenBucket, QueueEgressFollowsTheCap) {
  EgressCap cap(0);
  QueueEgress q(cap, 2);
  EXPECT_FALSE(q.bucket().limited());
  cap.set(80);  // 5 MB/s for this queue
  TokenBucket& b = q.bucket();
  ASSERT_TRUE(b.limited());
  b.consume(0, 65536 + 5000000);
  EXPECT_NEAR(static_cast<double>(q.bucket().delay_ns(0)), 1.0 * kSec, 1000);
  cap.set(160);  // twice the rate: the debt of the old bucket is gone, the new one is full
  EXPECT_EQ(q.bucket().delay_ns(0), 0u);
  q.bucket().consume(0, 65536 + 5000000);
  EXPECT_NEAR(static_cast<double>(q.bucket().delay_ns(0)), 0.5 * kSec, 1000);
  cap.set(0);
  EXPECT_FALSE(q.bucket().limited());
}

}  // namespace
}  // namespace conflux::agg
