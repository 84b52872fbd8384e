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
    Status s = Status::kPending;
    const auto end = std::chrono::steady_clock::now() + 20s;
    while ((s = es[r]->test(ids[r], &err)) == Status::kPending &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(100us);
    }
    ASSERT_EQ(s, Status::kDone) << err;
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

}  // namespace
}  // namespace conflux::client
