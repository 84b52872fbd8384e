// SPDX-License-Identifier: Apache-2.0
// RingWorker (with a fixed split) and Failover on their own, N ranks as threads over loopback
// rings: the ring shares of a stream of requests, and the failover protocol's agreement, hand-over
// and redo.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "collnet/coll_request.h"
#include "collnet/failover.h"
#include "collnet/measured_split.h"
#include "collnet/ring_worker.h"
#include "loopback_ring.h"
#include "tests/common/thread_names.h"

namespace conflux::collnet {
namespace {

using namespace std::chrono_literals;

RingSettings small_blocks(std::chrono::milliseconds timeout = 10s) {
  RingSettings s;
  s.block_bytes = 4096;  // many blocks per share, so several are in flight
  s.inflight = 4;
  s.timeout = timeout;
  return s;
}

// Runs body(rank) on n threads and joins them.
void each_rank(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

int32_t input(int rank, uint32_t seq, size_t i) {
  return int32_t(rank * 1000003 + seq * 7919 + i * 31) % 100000;
}

// A split that is not measured: every request gets `fraction`.
MeasuredSplit fixed_split(int rank, int n, double fraction) {
  return MeasuredSplit(rank, n, fraction, std::nullopt, nullptr, nullptr, nullptr);
}

// An int32 sum request over rank's input, its aggregator share [0, agg_count) left alone.
struct Owned {
  std::vector<int32_t> send, recv;
  CollRequest r;
  Owned(int rank, uint32_t seq, size_t count, size_t agg_count) : send(count), recv(count, -1) {
    for (size_t i = 0; i < count; ++i) send[i] = input(rank, seq, i);
    r.send = reinterpret_cast<const uint8_t*>(send.data());
    r.recv = reinterpret_cast<uint8_t*>(recv.data());
    r.count = count;
    r.bytes = count * sizeof(int32_t);
    r.dtype = DType::kInt32;
    r.op = Op::kSum;
    r.seq = seq;
    r.agg_count = agg_count;
  }
};

class RingWorkerTest : public ::testing::TestWithParam<int> {};

TEST_P(RingWorkerTest, RingSharesOfARequestStreamAreExactOnEveryLane) {
  const int n = GetParam();
  constexpr int kLanes = 2;
  std::vector<std::unique_ptr<Ring>> lanes;
  for (int l = 0; l < kLanes; ++l) lanes.push_back(std::make_unique<Ring>(n));
  const std::vector<std::pair<size_t, size_t>> shapes = {
      // (count, agg_count)
      {1, 0}, {50000, 20000}, {777, 777}, {3, 1}, {12345, 0}, {40000, 39999}, {9000, 4500}};
  std::atomic<bool> closing{false};
  std::vector<std::vector<std::unique_ptr<Owned>>> reqs(n);
  each_rank(n, [&](int rank) {
    RingLanes mine;
    for (auto& l : lanes) {
      mine.next.push_back(std::move(l->next[rank]));
      mine.prev.push_back(std::move(l->prev[rank]));
    }
    MeasuredSplit split = fixed_split(rank, n, 0.5);
    RingWorker worker(rank, n, std::move(mine), small_blocks(), split, closing);
    EXPECT_FALSE(split.measured());
    for (uint32_t seq = 0; seq < shapes.size(); ++seq) {
      auto o = std::make_unique<Owned>(rank, seq, shapes[seq].first, shapes[seq].second);
      double fraction = -1;
      size_t min_ring = 1;
      ASSERT_TRUE(split.fraction_for(o->r, seq, /*agg_ok=*/true, &fraction, &min_ring));
      EXPECT_EQ(fraction, 0.5);  // not measured: the configured fraction, no floor of its own
      EXPECT_EQ(min_ring, 0u);
      worker.enqueue(&o->r);
      reqs[rank].push_back(std::move(o));
    }
    for (auto& o : reqs[rank]) {
      const conflux::Status st = worker.wait_share(o->r);
      EXPECT_TRUE(st.ok()) << st.message();
    }
  });
  for (int rank = 0; rank < n; ++rank) {
    for (uint32_t seq = 0; seq < shapes.size(); ++seq) {
      const auto& [count, agg] = shapes[seq];
      const auto& recv = reqs[rank][seq]->recv;
      for (size_t i = 0; i < count; ++i) {
        int32_t want = -1;  // the aggregator share is not the worker's to touch
        if (i >= agg) {
          want = 0;
          for (int k = 0; k < n; ++k) want += input(k, seq, i);
        }
        ASSERT_EQ(recv[i], want) << "rank " << rank << " request " << seq << " element " << i;
      }
    }
  }
}

TEST(RingWorker, OneRanksShareIsACopy) {
  std::atomic<bool> closing{false};
  MeasuredSplit split = fixed_split(0, 1, 0.25);
  RingWorker worker(0, 1, RingLanes{}, small_blocks(), split, closing);
  Owned o(0, 0, 1000, 600);
  worker.enqueue(&o.r);
  const conflux::Status st = worker.wait_share(o.r);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(conflux::testing::thread_names().count("cfx-ring"), 1u);  // it has run: named
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(o.recv[i], i < 600 ? -1 : o.send[i]) << i;
}

// Rank 0's worker on a ring of two whose rank 1 never runs: a ring share stalls once its
// first blocks are sent.
std::unique_ptr<RingWorker> rank0_alone(Ring& ring, const RingSettings& s, MeasuredSplit& split,
                                        const std::atomic<bool>& closing) {
  RingLanes lanes;
  lanes.next.push_back(std::move(ring.next[0]));
  lanes.prev.push_back(std::move(ring.prev[0]));
  return std::make_unique<RingWorker>(0, 2, std::move(lanes), s, split, closing);
}

TEST(RingWorker, AStalledRingFailsItsShareAndEveryLaterOne) {
  Ring ring(2);
  std::atomic<bool> closing{false};
  MeasuredSplit split = fixed_split(0, 2, 0.5);
  auto worker = rank0_alone(ring, small_blocks(300ms), split, closing);
  Owned first(0, 0, 50000, 0), later(0, 1, 100, 0), aggs_only(0, 2, 100, 100);
  for (Owned* o : {&first, &later, &aggs_only}) worker->enqueue(&o->r);
  const conflux::Status stalled = worker->wait_share(first.r);
  EXPECT_EQ(stalled.code(), conflux::Status::Code::kTimeout);
  EXPECT_EQ(stalled.message(), "worker ring made no progress for 300 ms");
  const conflux::Status after = worker->wait_share(later.r);
  EXPECT_EQ(after.code(), conflux::Status::Code::kUnavailable);
  EXPECT_EQ(after.message(), "the worker ring failed earlier");
  EXPECT_TRUE(worker->wait_share(aggs_only.r).ok()) << "no ring share: nothing to fail";
}

TEST(RingWorker, ClosingEndsAWaitForAShareThatCannotFinish) {
  Ring ring(2);
  std::atomic<bool> closing{false};
  MeasuredSplit split = fixed_split(0, 2, 0.5);
  auto worker = rank0_alone(ring, small_blocks(), split, closing);
  Owned o(0, 0, 50000, 0);
  worker->enqueue(&o.r);
  std::thread closer([&] {
    std::this_thread::sleep_for(100ms);
    closing = true;
  });
  const conflux::Status st = worker->wait_share(o.r);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "communicator closed");
  closer.join();
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingWorkerTest, ::testing::Values(2, 3));

// --- Failover --------------------------------------------------------------------------

std::vector<std::unique_ptr<Failover>> failovers(Ring& ring, int n,
                                                 const std::atomic<bool>& closing,
                                                 std::chrono::milliseconds timeout = 10s) {
  std::vector<std::unique_ptr<Failover>> f;
  for (int r = 0; r < n; ++r) {
    f.push_back(std::make_unique<Failover>(r, n, std::move(ring.next[r]), std::move(ring.prev[r]),
                                           small_blocks(timeout), 1 << 20, closing));
    f.back()->arm_notice();  // as CollComm's completion thread does at start
  }
  return f;
}

class FailoverTest : public ::testing::TestWithParam<int> {};

TEST_P(FailoverTest, EveryRankAgreesOnTheVotes) {
  const int n = GetParam();
  Ring ring(n);
  std::atomic<bool> closing{false};
  auto f = failovers(ring, n, closing);
  // Rank 1 completed the most; rank n-1 was given the most; each saw aggregator r fail.
  const auto vote = [](int r) {
    return FailoverVote{uint32_t(r == 1 ? 9 : 5 + r % 2), uint32_t(20 + r), uint64_t{1} << r};
  };
  std::vector<FailoverAgreement> agreed(n);
  each_rank(n, [&](int r) {
    const conflux::Status st = f[r]->agree(vote(r), &agreed[r]);
    EXPECT_TRUE(st.ok()) << st.message();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agreed[r].lo, 5u);
    EXPECT_EQ(agreed[r].hi, n > 1 ? 9u : 5u);
    EXPECT_EQ(agreed[r].holder, n > 1 ? 1 : 0);
    EXPECT_EQ(agreed[r].given, uint32_t(20 + n - 1));
    EXPECT_EQ(agreed[r].dead, (uint64_t{1} << n) - 1);
    EXPECT_FALSE(f[r]->broken());
  }
}

TEST_P(FailoverTest, TheHolderHandsOverTheResultsOthersLack) {
  const int n = GetParam();
  Ring ring(n);
  std::atomic<bool> closing{false};
  auto f = failovers(ring, n, closing);
  // Requests #3 and #4 completed on rank 0 only; rank 0 kept #3's result but not #4's.
  std::vector<int32_t> result3(3000);
  for (size_t i = 0; i < result3.size(); ++i) result3[i] = int32_t(i * 13 - 7);
  f[0]->tails().keep(3, reinterpret_cast<const uint8_t*>(result3.data()), result3.size() * 4);
  std::vector<std::vector<std::unique_ptr<Owned>>> queued(n);
  for (int r = 1; r < n; ++r) {
    for (uint32_t seq : {3u, 4u, 5u})
      queued[r].push_back(std::make_unique<Owned>(r, seq, 3000, 3000));
  }
  each_rank(n, [&](int r) {
    const FailoverVote mine{r == 0 ? 5u : 3u, 6, 0};
    FailoverAgreement a;
    const conflux::Status agreed = f[r]->agree(mine, &a);
    ASSERT_TRUE(agreed.ok()) << agreed.message();
    EXPECT_EQ(a.holder, 0);
    const auto find = [&](uint32_t seq) -> CollRequest* {
      for (auto& o : queued[r]) {
        if (o->r.seq == seq) return &o->r;
      }
      return nullptr;
    };
    const conflux::Status handed = f[r]->hand_over(a, find);
    ASSERT_TRUE(handed.ok()) << handed.message();
  });
  for (int r = 1; r < n; ++r) {
    const CollRequest& r3 = queued[r][0]->r;
    const CollRequest& r4 = queued[r][1]->r;
    const CollRequest& r5 = queued[r][2]->r;
    EXPECT_TRUE(f[r]->handed_over(r3));
    EXPECT_EQ(r3.resolved, 1);
    EXPECT_EQ(queued[r][0]->recv, result3) << "rank " << r;
    EXPECT_EQ(r4.resolved, 2);
    EXPECT_EQ(r4.resolve_error.message(),
              "rank 0 no longer holds the results of request #4 that this rank lacks");
    EXPECT_FALSE(f[r]->handed_over(r5)) << "#5 is redone, not handed over";
    EXPECT_EQ(r5.resolved, 0);
  }
}

TEST_P(FailoverTest, RedoReducesTheAggregatorShareOverTheRing) {
  const int n = GetParam();
  Ring ring(n);
  std::atomic<bool> closing{false};
  auto f = failovers(ring, n, closing);
  std::vector<std::unique_ptr<Owned>> reqs;
  for (int r = 0; r < n; ++r) reqs.push_back(std::make_unique<Owned>(r, 8, 30000, 20000));
  each_rank(n, [&](int r) {
    const conflux::Status st = f[r]->redo(reqs[r]->r);
    EXPECT_TRUE(st.ok()) << st.message();
  });
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < 30000; ++i) {
      int32_t want = -1;  // the ring share is not the failover's to touch
      if (i < 20000) {
        want = 0;
        for (int k = 0; k < n; ++k) want += input(k, 8, i);
      }
      ASSERT_EQ(reqs[r]->recv[i], want) << "rank " << r << " element " << i;
    }
  }
}

TEST_P(FailoverTest, AllSayGathersOneWordFromEveryRank) {
  const int n = GetParam();
  Ring ring(n);
  std::atomic<bool> closing{false};
  auto f = failovers(ring, n, closing);
  std::vector<std::vector<uint32_t>> all(n);
  each_rank(n, [&](int r) {
    const conflux::Status st = f[r]->all_say(uint32_t(100 + r), &all[r], 5s, "test");
    EXPECT_TRUE(st.ok()) << st.message();
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(all[r].size(), size_t(n));
    for (int k = 0; k < n; ++k) EXPECT_EQ(all[r][k], uint32_t(100 + k));
  }
}

TEST(Failover, ARankAloneWithoutNoticeFailsWithinTheTimeoutAndStaysBroken) {
  Ring ring(2);
  std::atomic<bool> closing{false};
  auto f = failovers(ring, 2, closing, 300ms);
  FailoverAgreement a;
  const conflux::Status st = f[0]->agree({1, 2, 0}, &a);  // rank 1 never fails over
  EXPECT_EQ(st.code(), conflux::Status::Code::kTimeout);  // its timeout, not a hang
  EXPECT_EQ(st.message(), "no failover notice from the previous rank");
  EXPECT_TRUE(f[0]->broken());
}

TEST(Failover, AClosedPreviousRankIsNotANoticeToFailOver) {
  Ring ring(2);
  std::atomic<bool> closing{false};
  auto f = failovers(ring, 2, closing);
  EXPECT_FALSE(f[1]->notice_arrived());
  f[0].reset();  // rank 0 closes its communicator (the end of a job)
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!f[1]->notice_arrived() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(f[1]->notice_arrived());
  EXPECT_TRUE(f[1]->notice_closed());
}

INSTANTIATE_TEST_SUITE_P(Ranks, FailoverTest, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace conflux::collnet
