// SPDX-License-Identifier: Apache-2.0
// The congestion window inside a running engine (against the in-process FakeAggregator):
// it grows to the granted window on a lossless path, backs off under loss without
// stalling, and is the full window when disabled. Counters: cwnd_decreases,
// congestion_window, spurious_retransmits.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "conflux/client/engine.h"
#include "engine_fixture.h"
#include "fake_aggregator.h"

namespace conflux::client {
namespace {

using namespace std::chrono_literals;
using testing::FakeAggregator;
using testing::FakeOptions;

using Tweak = void (*)(ClientConfig&);

FakeOptions grant32() {
  FakeOptions o;
  o.max_slots = 32;
  return o;
}

// Engines on `agg` asking for a window of 32 (FakeAggregator grants up to its max_slots).
std::vector<std::unique_ptr<Engine>> engines(FakeAggregator& agg, uint32_t n, Tweak tweak) {
  return testing::make_engines({&agg}, n, [tweak](ClientConfig& c) {
    c.window_slots = 32;
    tweak(c);
  });
}

// One float32 sum of `count` elements on every engine; checks the result.
void sum_once(std::vector<std::unique_ptr<Engine>>& es, size_t count) {
  std::vector<std::vector<float>> in(es.size(), std::vector<float>(count, 1.f)), out = in;
  std::vector<uint64_t> ids;
  for (size_t r = 0; r < es.size(); ++r) {
    ids.push_back(es[r]->allreduce(in[r].data(), out[r].data(), count, DType::kFloat32, Op::kSum));
  }
  for (size_t r = 0; r < es.size(); ++r) {
    std::string err;
    RequestState s = RequestState::kPending;
    const auto end = std::chrono::steady_clock::now() + 20s;
    while ((s = es[r]->test(ids[r], &err)) == RequestState::kPending &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(100us);
    }
    ASSERT_EQ(s, RequestState::kDone) << err;
    ASSERT_EQ(out[r], std::vector<float>(count, static_cast<float>(es.size())));
  }
}

TEST(EngineCongestion, StartsLowAndGrowsToTheGrantWithoutLoss) {
  FakeAggregator agg(grant32());
  auto es = engines(agg, 2, [](ClientConfig& c) {
    c.congestion.initial_window = 4;
    // No timer may fire on this lossless path, however busy the test machine is.
    c.rto_initial = c.rto_min = 1s;
    c.rto_max = 2s;
  });
  ASSERT_EQ(es[0]->aggregators()[0].granted_slots, 32u);
  EXPECT_EQ(es[0]->stats().congestion_window, 4u);
  sum_once(es, 16 * 400);  // 400 packets
  const EngineStats s = es[0]->stats();
  EXPECT_EQ(s.congestion_window, 32u);
  EXPECT_EQ(s.cwnd_decreases, 0u);
}

TEST(EngineCongestion, DisabledUsesTheWholeWindowFromTheStart) {
  FakeAggregator agg(grant32());
  auto es = engines(agg, 2, [](ClientConfig& c) { c.congestion.enabled = false; });
  EXPECT_EQ(es[0]->stats().congestion_window, 32u);
  sum_once(es, 16 * 100);
  EXPECT_EQ(es[0]->stats().cwnd_decreases, 0u);
}

TEST(EngineCongestion, BacksOffUnderLossAndStillCompletes) {
  FakeAggregator agg(grant32());
  auto es = engines(agg, 2, [](ClientConfig& c) {
    c.faults = {0.05, 0, 0, 11};
    c.rto_initial = 1ms;
    c.rto_min = 1ms;
    c.rto_max = 10ms;
  });
  sum_once(es, 16 * 2000);
  const EngineStats s = es[0]->stats();
  const EngineStats t = es[1]->stats();
  EXPECT_GT(s.retransmits + t.retransmits, 0u);
  EXPECT_GT(s.cwnd_decreases + t.cwnd_decreases, 0u);
  // At most one decrease per window of packets: far fewer than the losses.
  EXPECT_LT(s.cwnd_decreases, s.retransmits + 1);
  EXPECT_GE(s.congestion_window, 2u);
  EXPECT_LE(s.congestion_window, 32u);
}

// A bottleneck queue in front of the workers (the fake sends results at 128 KB/s: a window of
// 32 slots, 2 workers, is about 60 ms of queue). Each collective after an idle gap starts with
// results through an empty queue, which pull srtt down, while the packets sent next wait behind
// a full window. Their first timers wait for the bytes ahead of them to drain
// (delivery_rate.h), so nothing is resent on this lossless path; with the plain RTO
// (srtt + max(4 rttvar, 5 ms)) 13-31 of about 1150 packets were.
TEST(EngineCongestion, NoNeedlessResendsBehindAFullWindowAfterIdleGaps) {
  FakeOptions o = grant32();
  o.result_bytes_per_s = 128'000;
  FakeAggregator agg(o);
  auto es = engines(agg, 2, [](ClientConfig& c) {
    c.rto_initial = 40ms;
    c.rto_min = 20ms;
    c.rto_max = 200ms;
  });
  const auto totals = [&] {
    std::pair<uint64_t, uint64_t> t;  // packets sent, resent
    for (const auto& e : es) {
      t.first += e->stats().packets_sent;
      t.second += e->stats().retransmits;
    }
    return t;
  };
  sum_once(es, 16 * 96);  // the first: slow start, no round trip nor rate measured yet
  // A test thread descheduled for long may still cost a resend or two, and a host loaded by
  // the rest of the suite a burst of them (15 of 1167 once); such a burst is not the rule, so
  // a second round decides. Without the wait for the bytes ahead, every round resent 13-31.
  uint64_t packets = 0, resent = 0;
  for (int round = 0; round < 2; ++round) {
    const auto before = totals();
    for (int i = 0; i < 6; ++i) {
      std::this_thread::sleep_for(80ms);
      sum_once(es, 16 * 96);  // 96 packets of 64 bytes each
    }
    packets = totals().first - before.first;
    resent = totals().second - before.second;
    if (resent * 300 <= packets) break;
  }
  EXPECT_GE(packets, 2u * 6 * 96);
  EXPECT_LE(resent * 300, packets) << resent << " of " << packets << " packets resent";
}

}  // namespace
}  // namespace conflux::client
