// SPDX-License-Identifier: Apache-2.0
// A job striped over several aggregators that goes on without those that refuse it
// (ClientConfig::join_agree): the join waits for every answer instead of failing at
// the first refusal, the ranks agree on the set, and the engine runs on it; join_peers lets a
// rank stop waiting for an aggregator another rank could not join.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "conflux/client/engine.h"
#include "engine_fixture.h"
#include "fake_aggregator.h"

namespace conflux::client {
namespace {

using namespace std::chrono_literals;
using testing::FakeAggregator;
using testing::FakeOptions;

// One rank; aggregator 0 draining (its JoinAck says shutting_down), aggregator 1 accepting.
TEST(JoinAgree, ARefusingAggregatorIsLeftOutAndTheEngineRunsOnTheOthers) {
  FakeOptions drained;
  drained.join_status = proto::Status::kShuttingDown;
  FakeAggregator a0(drained), a1(FakeOptions{});
  ClientConfig c = testing::fake_engine_config({&a0, &a1}, 1, 0);
  uint64_t seen = ~uint64_t{0};
  std::string seen_why;
  c.join_agree = [&](uint64_t joined, const std::string& why, uint64_t* agreed) {
    seen = joined;
    seen_why = why;
    *agreed = joined;
    return Status();
  };
  std::string err;
  auto e = Engine::create(c, &err);
  ASSERT_NE(e, nullptr) << err;
  EXPECT_EQ(seen, 0b10u);
  EXPECT_NE(seen_why.find(a0.endpoint() + " refused Join: shutting_down"), std::string::npos)
      << seen_why;
  ASSERT_EQ(e->aggregators().size(), 1u);
  EXPECT_EQ(e->aggregators()[0].stripe, 1u);
  EXPECT_EQ(e->aggregators()[0].endpoint.to_string(), a1.endpoint());
  // The data path stripes over the one left: a sum completes, exact.
  std::vector<float> in(1000, 2.0f), out(1000, 0.0f);
  const uint64_t h = e->allreduce(in.data(), out.data(), in.size(), DType::kFloat32, Op::kSum);
  std::string why;
  RequestState st = RequestState::kPending;
  for (int i = 0; i < 100 && st == RequestState::kPending; ++i) st = e->wait(h, 100ms, &why);
  ASSERT_EQ(st, RequestState::kDone) << why;
  for (float v : out) ASSERT_EQ(v, 2.0f);
}

// Without join_agree (the re-join after a failover, conflux check) a refusal fails the engine.
TEST(JoinAgree, WithoutItARefusalFailsTheJoin) {
  FakeOptions drained;
  drained.join_status = proto::Status::kShuttingDown;
  FakeAggregator a0(drained), a1(FakeOptions{});
  std::string err;
  EXPECT_EQ(Engine::create(testing::fake_engine_config({&a0, &a1}, 1, 0), &err), nullptr);
  EXPECT_NE(err.find("refused Join: shutting_down"), std::string::npos) << err;
}

// The agreement keeps fewer than this rank joined (another rank lacks one): the engine runs
// on the agreed set only; an empty set fails it.
TEST(JoinAgree, TheEngineKeepsOnlyTheAgreedSet) {
  FakeAggregator a0(FakeOptions{}), a1(FakeOptions{});
  ClientConfig c = testing::fake_engine_config({&a0, &a1}, 1, 0);
  c.join_agree = [](uint64_t joined, const std::string&, uint64_t* agreed) {
    EXPECT_EQ(joined, 0b11u);
    *agreed = 0b01;
    return Status();
  };
  std::string err;
  auto e = Engine::create(c, &err);
  ASSERT_NE(e, nullptr) << err;
  ASSERT_EQ(e->aggregators().size(), 1u);
  EXPECT_EQ(e->aggregators()[0].stripe, 0u);
  e.reset();
  c.join_agree = [](uint64_t, const std::string&, uint64_t* agreed) {
    *agreed = 0;
    return Status();
  };
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  EXPECT_NE(err.find("no aggregator joined on every rank"), std::string::npos) << err;
}

// An aggregator that never answers (its job waits for ranks that will not come): once
// join_peers says another rank could not join it, the rank stops waiting at once instead of
// at the join timeout.
TEST(JoinAgree, APeersOutcomeEndsTheWaitForAnAggregatorItLacks) {
  FakeAggregator a0(FakeOptions{});
  a0.set_silent(true);
  ClientConfig c = testing::fake_engine_config({&a0}, 2, 1);
  c.join_timeout = 10s;
  int polls = 0;
  c.join_peers = [&](uint64_t* alive) {
    if (++polls < 3) return false;
    *alive = 0;  // rank 0 joined nothing
    return true;
  };
  std::string why;
  c.join_agree = [&](uint64_t joined, const std::string& w, uint64_t* agreed) {
    why = w;
    *agreed = joined;
    return Status();
  };
  std::string err;
  EXPECT_EQ(Engine::create(c, &err), nullptr);  // given up (below), not the 30 s join timeout
  EXPECT_GE(polls, 3);
  EXPECT_NE(why.find("given up, another rank could not join it"), std::string::npos) << why;
}

}  // namespace
}  // namespace conflux::client
