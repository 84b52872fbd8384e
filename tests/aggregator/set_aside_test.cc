// SPDX-License-Identifier: Apache-2.0
// SetAside, the per-job pacing policy both dataplanes use (aggregator/engine/set_aside.h),
// with real jobs and buckets but no sockets. A job "in debt" was charged 1 MiB on a 1 Mbit/s
// bucket: it stays in debt for about 8 s, far longer than any of these tests.
#include "aggregator/engine/set_aside.h"

#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "aggregator/engine/job_table.h"
#include "gtest/gtest.h"

namespace conflux::agg {
namespace {

class SetAsideTest : public ::testing::Test {
 protected:
  static constexpr unsigned kQueue = 0;

  // A job paced to pace_mbps (0: not paced).
  uint32_t make_job(uint32_t pace_mbps) {
    const uint32_t id = jobs_.allocate_id();
    JobParams p;
    p.id = id;
    p.n_workers = 1;
    p.slots = 4;
    p.payload_bytes = 64;
    p.workers.push_back(sockaddr_in{});
    auto job = std::make_unique<Job>(std::move(p), 1);
    job->set_grant(pace_mbps, pace_mbps);
    jobs_.publish(std::move(job));
    return id;
  }
  void put_in_debt(uint32_t id) {
    Job* job = jobs_.find(id);
    ASSERT_NE(job, nullptr);
    TokenBucket* share = job->pacer(kQueue);
    ASSERT_NE(share, nullptr);
    share->consume(steady_ns(), 1 << 20);
  }

  struct Sent {
    uint32_t job;
    int item;
    bool charged;  // send was given a bucket to charge
    bool borrowed;
  };
  // One drain; send takes `room` results at most (then says the pass is full).
  uint64_t drain(uint64_t queue_wait = 0, size_t room = 1000) {
    return aside_.drain(
        jobs_, kQueue, [&](uint64_t) { return queue_wait; },
        [&](Job& job, int& item, TokenBucket* share, bool borrowed) {
          sent_.push_back({job.id(), item, share != nullptr, borrowed});
          return --room > 0;
        },
        [&](int& item) { dropped_.push_back(item); });
  }
  std::vector<int> items_sent() const {
    std::vector<int> v;
    for (const Sent& s : sent_) v.push_back(s.item);
    return v;
  }

  JobTable jobs_{8, 1};
  SetAside<int> aside_;
  std::vector<Sent> sent_;
  std::vector<int> dropped_;
};

TEST_F(SetAsideTest, AJobHeldOnceInAPassKeepsItsLaterSendsAndQueuesBehindItsSetAside) {
  const uint32_t a = make_job(1), b = make_job(0);
  aside_.begin_pass();
  EXPECT_TRUE(aside_.hold(a, 5));   // its bucket says wait
  EXPECT_FALSE(aside_.hold(b, 0));  // the other goes past it
  EXPECT_TRUE(aside_.hold(a, 0));   // its later sends stay behind the held one
  aside_.begin_pass();
  EXPECT_FALSE(aside_.hold(a, 0));  // a new pass, nothing set aside: it may send
  aside_.push(a, 1);
  EXPECT_TRUE(aside_.holds(a));
  EXPECT_FALSE(aside_.holds(b));
  EXPECT_TRUE(aside_.hold(a, 0));  // behind what it has set aside
  EXPECT_FALSE(aside_.hold(b, 0));
  EXPECT_EQ(aside_.size(), 1u);
}

TEST_F(SetAsideTest, AJobAloneInDebtIsLentTheIdleShareInOrderWithoutCharge) {
  const uint32_t a = make_job(1);
  put_in_debt(a);
  for (int i = 1; i <= 3; ++i) aside_.push(a, i);
  EXPECT_EQ(drain(), 0u);
  EXPECT_EQ(items_sent(), (std::vector<int>{1, 2, 3}));
  for (const Sent& s : sent_) {
    EXPECT_TRUE(s.borrowed);
    EXPECT_FALSE(s.charged);
  }
  EXPECT_TRUE(aside_.empty());
}

TEST_F(SetAsideTest, TheQueuesOwnEgressHoldsEvenALoneJob) {
  const uint32_t a = make_job(1);
  put_in_debt(a);
  aside_.push(a, 1);
  aside_.push(a, 2);
  EXPECT_EQ(drain(/*queue_wait=*/7000), 7000u);
  EXPECT_TRUE(sent_.empty());
  EXPECT_EQ(aside_.size(), 2u);
}

TEST_F(SetAsideTest, AJobInDebtWaitsWhileAnotherGoesPastCharged) {
  const uint32_t a = make_job(1), b = make_job(10000);
  put_in_debt(a);
  aside_.push(a, 1);
  aside_.push(b, 2);
  aside_.push(a, 3);
  aside_.push(b, 4);
  const uint64_t due = drain();
  EXPECT_GT(due, 1'000'000'000u);  // about 8 s of debt at 1 Mbit/s
  EXPECT_EQ(items_sent(), (std::vector<int>{2, 4}));
  for (const Sent& s : sent_) {
    EXPECT_EQ(s.job, b);
    EXPECT_TRUE(s.charged);
    EXPECT_FALSE(s.borrowed);
  }
  EXPECT_EQ(aside_.size(), 2u);
  EXPECT_TRUE(aside_.holds(a));
  EXPECT_FALSE(aside_.holds(b));
  // Now a is alone with results waiting, but b had results a moment ago: b is not idle, and
  // its share is not lent.
  sent_.clear();
  EXPECT_GT(drain(), 1'000'000'000u);
  EXPECT_TRUE(sent_.empty());
  // Once b has been idle for kIdleNs, a is lent the share, its order kept.
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * SetAside<int>::kIdleNs));
  EXPECT_EQ(drain(), 0u);
  EXPECT_EQ(items_sent(), (std::vector<int>{1, 3}));
  EXPECT_TRUE(sent_[0].borrowed && sent_[1].borrowed);
}

TEST_F(SetAsideTest, AJobWhoseResultsAreHeldIsNotIdleAndItsShareIsNotLent) {
  // The fabric's case: b's results are not waiting here (its members' contributions still
  // queue on the congested ingress link), but it had one a moment ago.
  const uint32_t a = make_job(1), b = make_job(10000);
  put_in_debt(a);
  aside_.begin_pass();
  EXPECT_FALSE(aside_.hold(b, 0));  // b sends in a batch pass
  aside_.push(a, 1);
  EXPECT_GT(drain(), 1'000'000'000u);
  EXPECT_TRUE(sent_.empty());
  EXPECT_TRUE(aside_.holds(a));
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * SetAside<int>::kIdleNs));
  EXPECT_EQ(drain(), 0u);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_TRUE(sent_[0].borrowed);
}

TEST_F(SetAsideTest, AnUnpacedJobsResultsGoUnchargedAndUnborrowed) {
  const uint32_t b = make_job(0);
  aside_.push(b, 1);
  EXPECT_EQ(drain(), 0u);
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_FALSE(sent_[0].charged);
  EXPECT_FALSE(sent_[0].borrowed);
}

TEST_F(SetAsideTest, ResultsOfAJobThatEndedAreDropped) {
  const uint32_t a = make_job(1), b = make_job(0);
  aside_.push(a, 1);
  aside_.push(b, 2);
  aside_.push(a, 3);
  jobs_.retire(a);
  EXPECT_EQ(drain(), 0u);
  EXPECT_EQ(items_sent(), (std::vector<int>{2}));
  EXPECT_EQ(dropped_, (std::vector<int>{1, 3}));
  EXPECT_TRUE(aside_.empty());
  EXPECT_FALSE(aside_.holds(a));
  EXPECT_FALSE(aside_.holds(b));
}

TEST_F(SetAsideTest, AFullPassStopsAndTheNextGoesOnInOrder) {
  const uint32_t b = make_job(0);
  for (int i = 1; i <= 3; ++i) aside_.push(b, i);
  drain(0, /*room=*/1);
  EXPECT_EQ(items_sent(), (std::vector<int>{1}));
  EXPECT_EQ(aside_.size(), 2u);
  EXPECT_TRUE(aside_.holds(b));  // two of its three still wait
  drain(0, /*room=*/5);
  EXPECT_EQ(items_sent(), (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(aside_.holds(b));
}

TEST_F(SetAsideTest, ClearReleasesEverything) {
  const uint32_t a = make_job(1);
  aside_.push(a, 1);
  aside_.push(a, 2);
  aside_.clear([&](int& item) { dropped_.push_back(item); });
  EXPECT_EQ(dropped_, (std::vector<int>{1, 2}));
  EXPECT_TRUE(aside_.empty());
  EXPECT_FALSE(aside_.holds(a));
  EXPECT_EQ(drain(), 0u);  // draining nothing is harmless
  aside_.push(a, 3);       // and the count starts afresh
  EXPECT_TRUE(aside_.holds(a));
}

}  // namespace
}  // namespace conflux::agg
