// SPDX-License-Identifier: Apache-2.0
// The engine against the in-process FakeAggregator: joins, windows, striping, loss
// recovery, and every failure path (refused join, no daemon, shutdown, silence, abort).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>
#include <numeric>
#include <thread>
#include <tuple>

#include "conflux/client/engine.h"
#include "engine_fixture.h"
#include "fake_aggregator.h"
#include "tests/common/wait_until.h"

namespace conflux::client {
namespace {

using namespace std::chrono_literals;
using testing::FakeAggregator;
using testing::FakeOptions;

using testing::make_engines;
ClientConfig base_config(const std::vector<FakeAggregator*>& aggs, uint32_t n, uint32_t rank) {
  return testing::fake_engine_config(aggs, n, rank);
}

RequestState wait(Engine& e, uint64_t req, std::string* err,
                  std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const RequestState s = e.test(req, err);
    if (s != RequestState::kPending || std::chrono::steady_clock::now() > end) {
      return s;
    }
    std::this_thread::sleep_for(100us);
  }
}

// Runs one float32 sum over all engines; rank r contributes r + 1 + i % 5.
void check_sum(std::vector<std::unique_ptr<Engine>>& es, size_t count, bool in_place = false) {
  const size_t n = es.size();
  std::vector<std::vector<float>> in(n, std::vector<float>(count)), out = in;
  std::vector<uint64_t> reqs;
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      in[r][i] = static_cast<float>(r + 1 + i % 5);
    }
    void* dst = in_place ? in[r].data() : out[r].data();
    reqs.push_back(es[r]->allreduce(in[r].data(), dst, count, DType::kFloat32, Op::kSum));
  }
  for (size_t r = 0; r < n; ++r) {
    std::string err;
    ASSERT_EQ(wait(*es[r], reqs[r], &err), RequestState::kDone) << err;
    const std::vector<float>& got = in_place ? in[r] : out[r];
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(n * (n + 1) / 2 + n * (i % 5));
      ASSERT_EQ(got[i], want) << "rank " << r << " element " << i;
    }
  }
}

// Caller progress (ClientConfig::caller_progress): allreduce() and test() do the I/O while
// the caller polls, and every result is the same with it off (the progress thread alone).
TEST(EngineFake, CallersProgressTheEngineWhileTheyPollAndResultsMatchWithItOff) {
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "caller progress on" : "caller progress off");
    FakeAggregator agg(FakeOptions{});
    auto es = make_engines({&agg}, 2, [on](ClientConfig& c) { c.caller_progress = on; });
    for (size_t i = 0; i < 20; ++i) check_sum(es, 1 + 37 * i);  // up to 45 packets
    const uint64_t steps = es[0]->stats().caller_steps + es[1]->stats().caller_steps;
    if (on) {
      EXPECT_GT(steps, 0u);
    } else {
      EXPECT_EQ(steps, 0u);
    }
  }
}

// The progress thread busy-polls (spin_us) only while little is in flight: a bulk transfer is
// paced by the link, so with more than spin_max_bytes pending it sleeps in poll() between
// packets instead, however long the spin time.
TEST(EngineFake, TheProgressThreadSpinsOnlyWhileLittleIsInFlight) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2, [](ClientConfig& c) {
    c.caller_progress = false;  // the progress thread does all the I/O
    c.spin_us = 60'000'000;     // a spin that never runs out within the test
    c.spin_max_bytes = 64 << 10;
  });
  check_sum(es, 100);
  agg.set_silent(true);  // nothing completes from here on: the requests stay in flight
  const size_t small = 1000, large = 100'000;  // 4 KB, under the limit; 400 KB, over it
  std::vector<std::vector<float>> in(2, std::vector<float>(small + large, 1.0f)), out = in;
  std::vector<uint64_t> reqs;
  for (int r = 0; r < 2; ++r) {
    reqs.push_back(es[r]->allreduce(in[r].data(), out[r].data(), small, DType::kFloat32, Op::kSum));
  }
  const uint64_t before = es[0]->stats().progress_sleeps;
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(es[0]->stats().progress_sleeps, before) << "slept with only 4 KB in flight";
  for (int r = 0; r < 2; ++r) {
    reqs.push_back(es[r]->allreduce(in[r].data() + small, out[r].data() + small, large,
                                    DType::kFloat32, Op::kSum));
  }
  EXPECT_TRUE(test::wait_until([&] { return es[0]->stats().progress_sleeps > before; }))
      << "spun with 404 KB in flight";
  agg.set_silent(false);  // resends complete everything, exactly
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::string err;
    ASSERT_EQ(wait(*es[i % 2], reqs[i], &err), RequestState::kDone) << err;
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].front(), 2.0f);
    EXPECT_EQ(out[r].back(), 2.0f);
  }
}

// ClientConfig::bulk_wake: with more than spin_max_bytes in flight the progress thread pauses
// before it waits on the sockets (bulk_pauses counts the pauses); with it at 0 it never does.
// Either way every result is exact, also across a stretch where nothing comes back.
TEST(EngineFake, BulkTransfersPauseBetweenWakeUpsOnlyWhenAsked) {
  for (const auto bulk_wake : {500us, 0us}) {
    SCOPED_TRACE("bulk_wake " + std::to_string(bulk_wake.count()) + " us");
    FakeAggregator agg(FakeOptions{});
    auto es = make_engines({&agg}, 2, [bulk_wake](ClientConfig& c) {
      c.caller_progress = false;  // the progress thread does all the I/O
      c.spin_max_bytes = 64 << 10;
      c.bulk_wake = bulk_wake;
    });
    check_sum(es, 100'000);  // 400 KB: round-trip samples for the pause's bound
    agg.set_silent(true);    // the next requests stay in flight: the thread has to sleep
    const size_t count = 200'000;
    std::vector<std::vector<float>> in(2, std::vector<float>(count, 1.0f)), out = in;
    std::vector<uint64_t> reqs;
    const EngineStats before = es[0]->stats();
    for (int r = 0; r < 2; ++r) {
      reqs.push_back(
          es[r]->allreduce(in[r].data(), out[r].data(), count, DType::kFloat32, Op::kSum));
    }
    test::wait_until([&] { return es[0]->stats().progress_sleeps >= before.progress_sleeps + 3; });
    const EngineStats during = es[0]->stats();
    EXPECT_GE(during.progress_sleeps, before.progress_sleeps + 3);
    if (bulk_wake.count() > 0) {
      EXPECT_GT(during.bulk_pauses, before.bulk_pauses) << "slept without a pause";
    } else {
      EXPECT_EQ(during.bulk_pauses, 0u);
    }
    agg.set_silent(false);  // resends complete everything, exactly
    for (int r = 0; r < 2; ++r) {
      std::string err;
      ASSERT_EQ(wait(*es[r], reqs[static_cast<size_t>(r)], &err), RequestState::kDone) << err;
      for (float v : out[r]) ASSERT_EQ(v, 2.0f);
    }
  }
}

// A caller's poll claims the I/O for 1 ms while only small requests are in flight: the
// caller spins on those, and the progress thread would only take a core from it by waking to
// check the claim. With more than spin_max_bytes in flight the claim is 200 us, so that the
// thread takes the link's packets between a pacing caller's polls. The claim's length follows
// EngineStats::bulk_in_flight, which this test follows through a small request, a bulk one
// added and the bulk one done; how often the thread then dozes depends on the host's load
// and is printed, not checked.
TEST(EngineFake, ACallersClaimIsLongWhileOnlySmallRequestsAreInFlight) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2, [](ClientConfig& c) { c.spin_max_bytes = 64 << 10; });
  check_sum(es, 100);
  agg.set_silent(true);  // nothing completes from here on: the requests stay in flight
  const size_t small = 1000, large = 100'000;  // 4 KB, under the limit; 400 KB, over it
  std::vector<std::vector<float>> in(2, std::vector<float>(small + large, 1.0f)), out = in;
  std::vector<uint64_t> reqs;
  size_t used = 0;  // elements submitted
  auto submit = [&](size_t count) {
    for (int r = 0; r < 2; ++r) {
      reqs.push_back(es[r]->allreduce(in[r].data() + used, out[r].data() + used, count,
                                      DType::kFloat32, Op::kSum));
    }
    used += count;
  };
  // Rank 0 polls its oldest request (a caller's claim each time) until the I/O's owner has
  // seen more than spin_max_bytes in flight (`bulk`) or not; returns the dozes of its progress
  // thread meanwhile.
  auto poll_until_bulk_is = [&](bool bulk) -> uint64_t {
    const uint64_t before = es[0]->stats().dozes;
    const auto end = std::chrono::steady_clock::now() + 30s;  // a deadline, not a bound
    std::string err;
    while (es[0]->stats().bulk_in_flight != bulk && std::chrono::steady_clock::now() < end) {
      EXPECT_EQ(es[0]->test(reqs[0], &err), RequestState::kPending) << err;
    }
    EXPECT_EQ(es[0]->stats().bulk_in_flight, bulk);
    return es[0]->stats().dozes - before;
  };
  submit(small);
  const uint64_t before = es[0]->stats().dozes;
  for (int i = 0; i < 2000; ++i) {  // 4 KB in flight: every poll claims the long way
    std::string err;
    ASSERT_EQ(es[0]->test(reqs[0], &err), RequestState::kPending) << err;
    ASSERT_FALSE(es[0]->stats().bulk_in_flight) << "after " << i << " polls";
  }
  const uint64_t small_dozes = es[0]->stats().dozes - before;
  submit(large);
  const uint64_t bulk_dozes = poll_until_bulk_is(true);
  std::printf("dozes: %llu in 2000 polls with 4 KB in flight, %llu until 400 KB was seen\n",
              static_cast<unsigned long long>(small_dozes),
              static_cast<unsigned long long>(bulk_dozes));
  agg.set_silent(false);  // resends complete everything, exactly
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::string err;
    ASSERT_EQ(wait(*es[i % 2], reqs[i], &err), RequestState::kDone) << err;
  }
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < used; ++i) ASSERT_EQ(out[r][i], 2.0f) << "rank " << r << " at " << i;
  }
  // Nothing in flight any more: back to the long claim.
  std::string err;
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (es[0]->stats().bulk_in_flight && std::chrono::steady_clock::now() < end) {
    es[0]->test(reqs.back(), &err);
  }
  EXPECT_FALSE(es[0]->stats().bulk_in_flight);
}

// A caller that submits and then stops polling: the progress thread takes the I/O back once
// the caller's claim runs out, so the request finishes without another call.
TEST(EngineFake, TheProgressThreadTakesOverWhenTheCallerStopsPolling) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  std::vector<std::vector<float>> in(2, std::vector<float>(500, 1.0f)), out = in;
  uint64_t req[2];
  for (int r = 0; r < 2; ++r) {
    req[r] = es[r]->allreduce(in[r].data(), out[r].data(), 500, DType::kFloat32, Op::kSum);
  }
  test::wait_until([&] {  // stats() does no I/O
    return es[0]->stats().requests_completed > 0 && es[1]->stats().requests_completed > 0;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(es[r]->stats().requests_completed, 1u) << "rank " << r;
    std::string err;
    EXPECT_EQ(es[r]->test(req[r], &err), RequestState::kDone) << err;
    EXPECT_EQ(out[r][499], 2.0f);
  }
}

TEST(EngineFake, JoinsAndExposesTheGrant) {
  FakeOptions o;
  o.max_slots = 3;
  o.max_payload = 40;
  o.support_mask = 0xFF;
  o.capacity = {25000, 1000, 800, 3};
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 2);
  ASSERT_EQ(es[0]->aggregators().size(), 1u);
  const AggregatorInfo& a = es[0]->aggregators()[0];
  EXPECT_EQ(a.granted_slots, 3u);
  EXPECT_EQ(a.payload_bytes, 40u);
  EXPECT_EQ(a.support_mask, 0xFFu);
  EXPECT_EQ(a.data_ports.size(), 2u);
  EXPECT_FALSE(a.deterministic);
  // The Capacity that followed the JoinAck.
  EXPECT_TRUE(a.capacity_known);
  EXPECT_EQ(a.line_mbps, 25000u);
  EXPECT_EQ(a.max_mbps, 1000u);
  EXPECT_EQ(a.share_mbps, 800u);
  EXPECT_EQ(a.threads, 3u);
  EXPECT_EQ(es[1]->payload_bytes(), 40u);
  EXPECT_TRUE(es[0]->supports(DType::kInt8, Op::kSum));
  EXPECT_FALSE(es[0]->supports(DType::kFloat32, Op::kSum));  // bit 28 not in the mask
  EXPECT_NE(es[0]->udp_port(), 0);
  EXPECT_TRUE(es[0]->healthy());
}

// A grant update (Capacity while running, SPEC §3) is taken, not treated as unexpected: the
// engine reports the new share and stays healthy; requests still complete.
TEST(EngineFake, AGrantUpdateWhileRunningIsReported) {
  FakeOptions o;
  o.capacity = {25000, 1000, 1000, 2};
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 2);
  for (auto& e : es) {
    EXPECT_EQ(e->grants(), std::vector<uint32_t>{1000});
    EXPECT_EQ(e->stats().grant_mbps, 1000u);
    EXPECT_EQ(e->stats().grant_updates, 0u);
  }
  agg.send_grant(500, proto::CapacityReason::kJobJoined);
  for (auto& e : es) {
    test::wait_until([&] { return e->stats().grant_updates > 0; });
    EXPECT_EQ(e->stats().grant_updates, 1u);
    EXPECT_EQ(e->stats().grant_mbps, 500u);
    EXPECT_EQ(e->grants(), std::vector<uint32_t>{500});
    EXPECT_EQ(e->aggregators()[0].share_mbps, 1000u);  // as at join
    EXPECT_TRUE(e->healthy());
  }
  std::vector<std::vector<float>> in(2, std::vector<float>(64, 1.0f)), out(2);
  for (int r = 0; r < 2; ++r) out[r].resize(64);
  uint64_t h[2];
  for (int r = 0; r < 2; ++r) {
    h[r] = es[r]->allreduce(in[r].data(), out[r].data(), 64, DType::kFloat32, Op::kSum);
  }
  for (int r = 0; r < 2; ++r) {
    std::string err;
    EXPECT_EQ(es[r]->wait(h[r], std::chrono::seconds(10), &err), RequestState::kDone) << err;
    EXPECT_EQ(out[r], std::vector<float>(64, 2.0f));
  }
}

// busy_ns (the aggregation path's rate for the measured split) runs while a request is in
// flight and stands still while none is.
TEST(EngineFake, BusyTimeCountsOnlyWhileRequestsAreInFlight) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  EXPECT_EQ(es[0]->stats().busy_ns, 0u);
  const auto t0 = std::chrono::steady_clock::now();
  check_sum(es, 5000);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  const uint64_t busy = es[0]->stats().busy_ns;
  EXPECT_GT(busy, 0u);
  EXPECT_LE(busy, static_cast<uint64_t>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(es[0]->stats().busy_ns, busy);
}

// window_full_ns (whether the aggregators, not the caller, held the measured split's
// aggregator share back) runs only while contributions wait for a window slot.
TEST(EngineFake, WindowFullTimeCountsOnlyWhileContributionsWaitForASlot) {
  FakeOptions o;
  o.max_slots = 3;
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 2);
  check_sum(es, 1);  // one packet: a slot is always free
  EXPECT_EQ(es[0]->stats().window_full_ns, 0u);
  check_sum(es, 5000);  // many packets through 3 slots
  const EngineStats s = es[0]->stats();
  EXPECT_GT(s.window_full_ns, 0u);
  EXPECT_LE(s.window_full_ns, s.busy_ns);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(es[0]->stats().window_full_ns, s.window_full_ns) << "idle: the stretch is closed";
}

TEST(EngineFake, SumsManyPacketsThroughASmallWindow) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 3);
  for (size_t count : {1ul, 7ul, 16ul, 17ul, 1023ul, 5000ul}) {
    check_sum(es, count);
  }
  check_sum(es, 777, /*in_place=*/true);
  const EngineStats s = es[0]->stats();
  EXPECT_GT(s.packets_sent, 400u);
  EXPECT_EQ(s.results_accepted, s.packets_sent - s.retransmits);
  EXPECT_EQ(s.requests_completed, 7u);
}

TEST(EngineFake, JoinsAnAggregatorThatPredatesMulticastAgainForUnicast) {
  FakeOptions o;
  o.predates_multicast = true;
  FakeAggregator agg(o);
  // CONFLUX_MULTICAST=auto: ask (and offer versions, which it predates too), then join again
  // without the versions extension, then without multicast: two refusals per rank.
  auto es = make_engines({&agg}, 2);
  ASSERT_TRUE(es[0] && es[1]);
  EXPECT_EQ(agg.refused_joins(), 4u);
  EXPECT_FALSE(es[0]->aggregators()[0].multicast);
  check_sum(es, 100);

  FakeAggregator agg2(o);
  auto off = make_engines({&agg2}, 2, [](ClientConfig& c) { c.multicast = MulticastMode::kOff; });
  ASSERT_TRUE(off[0] && off[1]);
  EXPECT_EQ(agg2.refused_joins(), 2u);  // no multicast flag: only the versions refused
  check_sum(off, 100);

  FakeAggregator agg3(o);
  ClientConfig on = base_config({&agg3}, 1, 0);
  on.multicast = MulticastMode::kOn;  // forced: an aggregator that cannot is an error
  std::string err;
  EXPECT_EQ(Engine::create(on, &err), nullptr);
  EXPECT_NE(err.find("bad_message"), std::string::npos) << err;
}

// Version negotiation (SPEC.md §1) with an aggregator older than it: the engine joins it again
// without the versions extension and speaks version 1 there; a worker that speaks only later
// versions than an aggregator is refused with both ranges named.
TEST(EngineFake, JoinsAnAggregatorThatPredatesVersionsAgainForVersion1) {
  FakeOptions o;
  o.predates_versions = true;
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 2);
  ASSERT_TRUE(es[0] && es[1]);
  EXPECT_EQ(agg.refused_joins(), 2u);  // one per rank
  EXPECT_EQ(es[0]->aggregators()[0].protocol_version, 1u);
  check_sum(es, 100);

  FakeAggregator agg2(o);
  ClientConfig later = base_config({&agg2}, 1, 0);
  later.min_version = 2;  // a future plugin that dropped version 1
  later.max_version = 3;
  std::string err;
  EXPECT_EQ(Engine::create(later, &err), nullptr);
  EXPECT_NE(err.find("bad_message"), std::string::npos) << err;
}

TEST(EngineFake, StripesOverTwoAggregators) {
  FakeAggregator a(FakeOptions{}), b(FakeOptions{});
  auto es = make_engines({&a, &b}, 2);
  check_sum(es, 16 * 9 + 3);  // 10 packets: 5 on each
  // First transmissions only (a loaded machine may cause timer retransmissions).
  EXPECT_EQ(a.contributions() - a.retransmitted_contributions(), 2u * 5);
  EXPECT_EQ(b.contributions() - b.retransmitted_contributions(), 2u * 5);
}

// ResultCopy: the end of a result also lands in a second buffer, byte-exact from any offset
// (mid-packet, mid-element), packet by packet as they arrive, with loss and duplicates.
TEST(EngineFake, TheEndOfAResultAlsoLandsInTheTailCopy) {
  FakeAggregator a(FakeOptions{}), b(FakeOptions{});
  auto es = make_engines({&a, &b}, 2, [](ClientConfig& c) {
    c.faults = {0.10, 0.05, 0.05, 11};
    c.rto_initial = 1ms;
    c.rto_max = 10ms;
  });
  constexpr size_t kCount = 16 * 9 + 3;  // 10 packets of up to 64 bytes, 588 bytes
  constexpr size_t kBytes = kCount * sizeof(float);
  constexpr uint8_t kGuard = 0xA5;
  for (const size_t from : {size_t{0}, size_t{123}, size_t{64 * 9}, kBytes - 1, kBytes}) {
    std::vector<std::vector<float>> in(2, std::vector<float>(kCount)), out = in;
    std::vector<std::vector<uint8_t>> tail(2, std::vector<uint8_t>(kBytes - from + 8, kGuard));
    std::vector<uint64_t> ids;
    for (size_t r = 0; r < 2; ++r) {
      for (size_t i = 0; i < kCount; ++i) in[r][i] = static_cast<float>(r * 1000 + i);
      ids.push_back(es[r]->allreduce(in[r].data(), out[r].data(), kCount, DType::kFloat32, Op::kSum,
                                     {tail[r].data(), from}));
    }
    for (size_t r = 0; r < 2; ++r) {
      std::string err;
      ASSERT_EQ(wait(*es[r], ids[r], &err), RequestState::kDone) << err;
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(out[r][i], static_cast<float>(1000 + 2 * i));
      const auto* result = reinterpret_cast<const uint8_t*>(out[r].data());
      for (size_t k = 0; k < kBytes - from; ++k) {
        ASSERT_EQ(tail[r][k], result[from + k]) << "from " << from << " byte " << k;
      }
      for (size_t k = kBytes - from; k < tail[r].size(); ++k) {
        ASSERT_EQ(tail[r][k], kGuard) << "from " << from << ": written past the end";
      }
    }
  }
  EXPECT_GT(es[0]->stats().fault_dropped + es[1]->stats().fault_dropped, 0u);
}

TEST(EngineFake, ManyRequestsInFlightCompleteCorrectly) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  constexpr int kReqs = 20;
  std::vector<std::vector<int32_t>> in(2 * kReqs), out(2 * kReqs);
  std::vector<uint64_t> ids;
  for (int q = 0; q < kReqs; ++q) {
    for (int r = 0; r < 2; ++r) {
      auto& v = in[q * 2 + r];
      v.resize(10 + q * 13);
      std::iota(v.begin(), v.end(), q * 1000 + r);
      out[q * 2 + r].assign(v.size(), -1);
      ids.push_back(
          es[r]->allreduce(v.data(), out[q * 2 + r].data(), v.size(), DType::kInt32, Op::kSum));
    }
  }
  for (int q = kReqs - 1; q >= 0; --q) {  // poll in reverse: completion order is free
    for (int r = 0; r < 2; ++r) {
      std::string err;
      ASSERT_EQ(wait(*es[r], ids[q * 2 + r], &err), RequestState::kDone) << err;
      for (size_t i = 0; i < out[q * 2 + r].size(); ++i) {
        ASSERT_EQ(out[q * 2 + r][i], in[q * 2][i] + in[q * 2 + 1][i]);
      }
    }
  }
  std::string err;
  EXPECT_EQ(es[0]->test(ids[0], &err), RequestState::kError);  // released after kDone
  EXPECT_NE(err.find("unknown request"), std::string::npos);
}

TEST(EngineFake, WaitSleepsUntilTheRequestEndsOrTheLimit) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  std::vector<float> in0(100, 1.0f), in1(100, 2.0f), out0(100), out1(100);
  const uint64_t q0 = es[0]->allreduce(in0.data(), out0.data(), 100, DType::kFloat32, Op::kSum);
  std::string err;
  // Rank 1 has not contributed: the request cannot end, so wait() returns at its limit.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(es[0]->wait(q0, 100ms, &err), RequestState::kPending);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  // Rank 1 contributes later; the sleeping waiter is woken by the completion.
  auto late = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(50ms);
    const uint64_t q1 = es[1]->allreduce(in1.data(), out1.data(), 100, DType::kFloat32, Op::kSum);
    std::string e;
    return wait(*es[1], q1, &e);
  });
  ASSERT_EQ(es[0]->wait(q0, 20s, &err), RequestState::kDone) << err;  // woken (else kPending)
  EXPECT_EQ(late.get(), RequestState::kDone);
  for (float v : out0) ASSERT_EQ(v, 3.0f);
  // Released after kDone, like test().
  EXPECT_EQ(es[0]->wait(q0, 10ms, &err), RequestState::kError);
  EXPECT_NE(err.find("unknown request"), std::string::npos);
}

TEST(EngineFake, AbortWakesASleepingWaiter) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  std::vector<float> in(64, 1.0f), out(64);
  const uint64_t q = es[0]->allreduce(in.data(), out.data(), 64, DType::kFloat32, Op::kSum);
  auto waiter = std::async(std::launch::async, [&] {
    std::string e;
    const RequestState s = es[0]->wait(q, 30s, &e);
    return std::make_pair(s, e);
  });
  std::this_thread::sleep_for(50ms);
  es[0]->abort("test abort");
  // Woken by the abort (its reason), not by the 30 s limit (kPending, no reason).
  const auto [st, why] = waiter.get();
  EXPECT_EQ(st, RequestState::kError);
  EXPECT_NE(why.find("test abort"), std::string::npos) << why;
}

TEST(EngineFake, RecoversFromDropDuplicationAndReordering) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2, [](ClientConfig& c) {
    c.faults = {0.10, 0.05, 0.05, 7};
    c.rto_initial = 1ms;
    c.rto_max = 10ms;
  });
  check_sum(es, 4000);
  check_sum(es, 3);
  EngineStats s = es[0]->stats();
  EngineStats t = es[1]->stats();
  EXPECT_GT(s.fault_dropped + t.fault_dropped, 0u);
  EXPECT_GT(s.retransmits + t.retransmits, 0u);
  EXPECT_GT(s.fault_duplicated + t.fault_duplicated, 0u);
  EXPECT_GT(s.fault_reordered + t.fault_reordered, 0u);
  EXPECT_GT(agg.retransmitted_contributions(), 0u);
}

TEST(EngineFake, ALateRankCostsOnlyProbesNotAWindowOfResends) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2, [](ClientConfig& c) {
    c.window_slots = 8;
    c.rto_initial = 2ms;
  });
  std::vector<float> x(16 * 8, 1.f), y0(x.size()), y1(x.size());  // 8 packets, full window
  const uint64_t a = es[0]->allreduce(x.data(), y0.data(), x.size(), DType::kFloat32, Op::kSum);
  std::this_thread::sleep_for(60ms);  // rank 1 is late: 2+4+8+16+32 ms of backoff
  const uint64_t b = es[1]->allreduce(x.data(), y1.data(), x.size(), DType::kFloat32, Op::kSum);
  std::string err;
  ASSERT_EQ(wait(*es[0], a, &err), RequestState::kDone) << err;
  ASSERT_EQ(wait(*es[1], b, &err), RequestState::kDone) << err;
  EXPECT_EQ(y0, std::vector<float>(x.size(), 2.f));
  // Without probing, each of the 8 packets would be resent at every backoff step (~40).
  EXPECT_LE(es[0]->stats().retransmits, 12u);
  EXPECT_GE(es[0]->stats().retransmits, 1u);
}

TEST(EngineFake, CountZeroIsDoneAndUnsupportedFailsAtOnce) {
  FakeOptions o;
  o.support_mask = uint64_t{1} << (7 * 4);  // float32 sum only
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 1);
  std::string err;
  EXPECT_EQ(es[0]->test(es[0]->allreduce(nullptr, nullptr, 0, DType::kFloat32, Op::kSum), &err),
            RequestState::kDone);
  float x = 1, y = 0;
  EXPECT_EQ(es[0]->test(es[0]->allreduce(&x, &y, 1, DType::kFloat32, Op::kMax), &err),
            RequestState::kError);
  EXPECT_NE(err.find("do not support " + std::string(dtype_name(DType::kFloat32)) + " max"),
            std::string::npos)
      << err;
  EXPECT_TRUE(es[0]->healthy());
  check_sum(es, 100);
}

// Reduce to each root in turn: the root gets the sum, the others get acknowledgements and
// pass no receive buffer; in place on the others as well.
void check_reduce(std::vector<std::unique_ptr<Engine>>& es, size_t count) {
  const size_t n = es.size();
  for (uint32_t root = 0; root < n; ++root) {
    std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count));
    std::vector<int32_t> out(count, -1);
    std::vector<uint64_t> reqs;
    for (size_t r = 0; r < n; ++r) {
      std::iota(in[r].begin(), in[r].end(), static_cast<int32_t>(r * 1000));
      void* dst = r == root ? out.data() : (r % 2 ? in[r].data() : nullptr);
      reqs.push_back(es[r]->reduce(in[r].data(), dst, count, DType::kInt32, Op::kSum, root));
    }
    for (size_t r = 0; r < n; ++r) {
      std::string err;
      ASSERT_EQ(wait(*es[r], reqs[r], &err), RequestState::kDone) << "rank " << r << ": " << err;
      if (r != root) {  // nothing written, in place or not
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(in[r][i], static_cast<int32_t>(r * 1000 + i)) << "rank " << r;
        }
      }
    }
    for (size_t i = 0; i < count; ++i) {
      const auto want = static_cast<int32_t>(n * i + 1000 * n * (n - 1) / 2);
      ASSERT_EQ(out[i], want) << "root " << root << " element " << i;
    }
  }
}

TEST(EngineFake, ReduceDeliversToTheRootOnly) {
  FakeAggregator a{FakeOptions{}}, b{FakeOptions{}};
  auto es = make_engines({&a, &b}, 3);
  check_reduce(es, 1000);  // 63 packets of 16 elements, striped over both
  const EngineStats root = es[2]->stats(), other = es[0]->stats();
  EXPECT_EQ(root.drops[static_cast<int>(proto::DropReason::kSlotMismatch)], 0u);
  EXPECT_EQ(other.drops[static_cast<int>(proto::DropReason::kSlotMismatch)], 0u);
  check_sum(es, 1000);  // the same engines still AllReduce
}

TEST(EngineFake, AStripeStartContinuesAnEarlierRequestsStriping) {
  FakeAggregator a{FakeOptions{}}, b{FakeOptions{}};
  auto es = make_engines({&a, &b}, 2);
  // 48 int32 = 3 packets of 16 elements, starting at the second aggregator: b a b.
  std::vector<int32_t> in(48, 1), out(48, 0);
  std::vector<uint64_t> reqs;
  for (uint32_t r = 0; r < 2; ++r) {
    reqs.push_back(es[r]->reduce(in.data(), r == 0 ? out.data() : nullptr, 48, DType::kInt32,
                                 Op::kSum, 0, /*stripe_start=*/1));
  }
  for (uint32_t r = 0; r < 2; ++r) {
    std::string err;
    ASSERT_EQ(wait(*es[r], reqs[r], &err), RequestState::kDone) << err;
  }
  EXPECT_EQ(out, std::vector<int32_t>(48, 2));
  // One packet from each of the 2 ranks at a, two at b; a timer resend on a loaded machine
  // (flagged RETRANSMIT) is not a packet of its own.
  EXPECT_EQ(a.contributions() - a.retransmitted_contributions(), 2u);
  EXPECT_EQ(b.contributions() - b.retransmitted_contributions(), 4u);
}

TEST(EngineFake, ReduceWorksWithAnAggregatorThatSendsEveryoneTheResult) {
  FakeOptions o;
  o.owned = FakeOptions::Owned::kFullToAll;
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 2);
  check_reduce(es, 100);
}

TEST(EngineFake, AnAcknowledgementNeverCompletesTheRootsPacket) {
  FakeOptions o;
  o.owned = FakeOptions::Owned::kAckToAll;
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 2);
  std::vector<int32_t> in0(8, 1), in1(8, 2), out(8, -1);
  const uint64_t r0 = es[0]->reduce(in0.data(), out.data(), 8, DType::kInt32, Op::kSum, 0);
  const uint64_t r1 = es[1]->reduce(in1.data(), nullptr, 8, DType::kInt32, Op::kSum, 0);
  std::string err;
  EXPECT_EQ(wait(*es[1], r1, &err), RequestState::kDone) << err;
  EXPECT_EQ(wait(*es[0], r0, &err, 500ms), RequestState::kPending);
  EXPECT_GT(es[0]->stats().drops[static_cast<int>(proto::DropReason::kSlotMismatch)], 0u);
  EXPECT_EQ(out, std::vector<int32_t>(8, -1));
}

TEST(EngineFake, ReduceRejectsARootOutsideTheJobAndAMissingRootBuffer) {
  FakeAggregator agg{FakeOptions{}};
  auto es = make_engines({&agg}, 1);
  int32_t x = 1, y = 0;
  std::string err;
  EXPECT_EQ(es[0]->test(es[0]->reduce(&x, &y, 1, DType::kInt32, Op::kSum, 1), &err),
            RequestState::kError);
  EXPECT_NE(err.find("reduce root 1 is not a rank of the 1-rank job"), std::string::npos) << err;
  EXPECT_EQ(es[0]->test(es[0]->reduce(&x, nullptr, 1, DType::kInt32, Op::kSum, 0), &err),
            RequestState::kError);
  EXPECT_NE(err.find("null buffer"), std::string::npos) << err;
  EXPECT_TRUE(es[0]->healthy());
  EXPECT_EQ(wait(*es[0], es[0]->reduce(&x, &y, 1, DType::kInt32, Op::kSum, 0), &err),
            RequestState::kDone);
  EXPECT_EQ(y, 1);
}

TEST(EngineFake, RefusedJoinNamesTheAggregatorAndStatus) {
  FakeOptions o;
  o.join_status = proto::Status::kJobMismatch;
  FakeAggregator agg(o);
  std::string err;
  auto e = Engine::create(base_config({&agg}, 2, 0), &err);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(err.find("aggregator " + agg.endpoint() + " refused Join: job_mismatch"),
            std::string::npos)
      << err;
}

TEST(EngineFake, NoAggregatorFailsQuicklyWithAClearMessage) {
  uint16_t port;
  {
    FakeAggregator gone(FakeOptions{});
    port = gone.control_port();
  }  // closed: nothing listens on port now
  ClientConfig c;
  c.aggregators = {{"127.0.0.1", port}};
  c.n_workers = 1;
  c.connect_timeout = 200ms;  // refused connects are tried again for this long (test_join_retry)
  std::string err;
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  EXPECT_NE(err.find("aggregator 127.0.0.1:" + std::to_string(port) + ": cannot connect"),
            std::string::npos)
      << err;
  c.aggregators = {{"no-such-host.invalid", 1}};
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  EXPECT_NE(err.find("cannot resolve"), std::string::npos) << err;
}

TEST(EngineFake, JoinTimeoutWhenARankNeverComes) {
  FakeAggregator agg(FakeOptions{});
  ClientConfig c = base_config({&agg}, 2, 0);
  c.join_timeout = 200ms;
  std::string err;
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  EXPECT_NE(err.find("no JoinAck within 200 ms"), std::string::npos) << err;
}

TEST(EngineFake, AuthenticatesWithTheSharedSecret) {
  FakeOptions o;
  o.auth_required = true;
  o.secret = "s3cret";
  FakeAggregator agg(o);
  auto es = make_engines({&agg}, 2, [](ClientConfig& c) { c.secret = "s3cret"; });
  check_sum(es, 50);

  FakeAggregator agg2(o);
  std::string err;
  ClientConfig c = base_config({&agg2}, 1, 0);
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  EXPECT_NE(err.find("requires authentication"), std::string::npos) << err;
  c.secret = "wrong";
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  EXPECT_NE(err.find("auth_failed"), std::string::npos) << err;
}

TEST(EngineFake, ShutdownFailsPendingAndLaterRequests) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  std::vector<float> x(100, 1.f), y(100);
  const uint64_t id = es[0]->allreduce(x.data(), y.data(), x.size(), DType::kFloat32, Op::kSum);
  agg.send_shutdown();  // rank 1 never contributes: the request can only fail
  std::string err;
  EXPECT_EQ(wait(*es[0], id, &err, 3s), RequestState::kError);
  EXPECT_EQ(err, "aggregator " + agg.endpoint() + " shut down");
  EXPECT_FALSE(es[0]->healthy(&err));
  EXPECT_EQ(es[0]->failed_aggregator(), 0);
  EXPECT_EQ(es[0]->test(es[0]->allreduce(x.data(), y.data(), 1, DType::kFloat32, Op::kSum), &err),
            RequestState::kError);
  EXPECT_NE(err.find("shut down"), std::string::npos);
}

// poll_done (CollComm's inline completion): progresses like test() and releases a done
// request, but leaves a failed one for a later test() to report with its reason.
TEST(EngineFake, PollDoneReleasesOnlyADoneRequest) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  std::vector<float> x(100, 1.f), y0(100), y1(100);
  const uint64_t a = es[0]->allreduce(x.data(), y0.data(), x.size(), DType::kFloat32, Op::kSum);
  const uint64_t b = es[1]->allreduce(x.data(), y1.data(), x.size(), DType::kFloat32, Op::kSum);
  const auto end = std::chrono::steady_clock::now() + 10s;
  RequestState s0 = RequestState::kPending, s1 = RequestState::kPending;
  while ((s0 == RequestState::kPending || s1 == RequestState::kPending) &&
         std::chrono::steady_clock::now() < end) {
    if (s0 == RequestState::kPending) s0 = es[0]->poll_done(a);
    if (s1 == RequestState::kPending) s1 = es[1]->poll_done(b);
  }
  ASSERT_EQ(s0, RequestState::kDone);
  ASSERT_EQ(s1, RequestState::kDone);
  EXPECT_EQ(y0[99], 2.f);
  std::string err;
  EXPECT_EQ(es[0]->test(a, &err), RequestState::kError) << "released by poll_done";
  EXPECT_NE(err.find("unknown request"), std::string::npos) << err;

  const uint64_t c = es[0]->allreduce(x.data(), y0.data(), x.size(), DType::kFloat32, Op::kSum);
  agg.send_shutdown();  // rank 1 never contributes: the request can only fail
  RequestState sc = RequestState::kPending;
  while (sc == RequestState::kPending && std::chrono::steady_clock::now() < end + 3s) {
    sc = es[0]->poll_done(c);
  }
  ASSERT_EQ(sc, RequestState::kError);
  EXPECT_EQ(es[0]->poll_done(c), RequestState::kError) << "still held";
  EXPECT_EQ(es[0]->test(c, &err), RequestState::kError);
  EXPECT_EQ(err, "aggregator " + agg.endpoint() + " shut down");
  EXPECT_EQ(es[0]->test(c, &err), RequestState::kError);
  EXPECT_NE(err.find("unknown request"), std::string::npos) << "released by test";
}

TEST(EngineFake, ClosedControlConnectionFailsRequests) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  std::vector<float> x(10, 1.f), y(10);
  const uint64_t id = es[0]->allreduce(x.data(), y.data(), x.size(), DType::kFloat32, Op::kSum);
  agg.close_connections();
  std::string err;
  EXPECT_EQ(wait(*es[0], id, &err, 3s), RequestState::kError);
  EXPECT_EQ(err, "aggregator " + agg.endpoint() + " closed the control connection");
}

TEST(EngineFake, SilentAggregatorTimesOut) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2, [](ClientConfig& c) {
    c.aggregator_timeout = 400ms;
    c.heartbeat_interval = 100ms;
  });
  check_sum(es, 10);
  agg.set_silent(true);
  std::vector<float> x(10, 1.f), y(10);
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t a = es[0]->allreduce(x.data(), y.data(), 10, DType::kFloat32, Op::kSum);
  const uint64_t b = es[1]->allreduce(x.data(), y.data(), 10, DType::kFloat32, Op::kSum);
  std::string err;
  EXPECT_EQ(wait(*es[0], a, &err, 3s), RequestState::kError);
  const auto dt = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(err.find("aggregator " + agg.endpoint() + " stopped answering for"), std::string::npos)
      << err;
  EXPECT_GE(dt, 300ms);  // not before the aggregator timeout; the reason names it
  EXPECT_EQ(wait(*es[1], b, &err, 3s), RequestState::kError);
}

TEST(EngineFake, StallTimeoutFailsAPacketWithoutResult) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2, [](ClientConfig& c) { c.stall_timeout = 300ms; });
  std::vector<float> x(10, 1.f), y(10);
  const uint64_t id = es[0]->allreduce(x.data(), y.data(), 10, DType::kFloat32, Op::kSum);
  std::string err;  // rank 1 never contributes; heartbeats keep the aggregator alive
  EXPECT_EQ(wait(*es[0], id, &err, 3s), RequestState::kError);
  EXPECT_NE(err.find("returned no result for"), std::string::npos) << err;
}

TEST(EngineFake, AbortFailsPendingRequestsAndIsIdempotent) {
  FakeAggregator agg(FakeOptions{});
  auto es = make_engines({&agg}, 2);
  std::vector<float> x(1000, 1.f), y(1000);
  const uint64_t id = es[0]->allreduce(x.data(), y.data(), x.size(), DType::kFloat32, Op::kSum);
  es[0]->abort("communicator aborted");
  es[0]->abort("again");
  std::string err;
  EXPECT_EQ(es[0]->test(id, &err), RequestState::kError);
  EXPECT_EQ(err, "communicator aborted");
  EXPECT_EQ(es[0]->stats().requests_failed, 1u);
  EXPECT_EQ(es[0]->failed_aggregator(), -1);
}

TEST(EngineFake, LosingOneOfTwoAggregatorsNamesIt) {
  FakeAggregator a(FakeOptions{}), b(FakeOptions{});
  auto es = make_engines({&a, &b}, 2);
  check_sum(es, 100);
  EXPECT_EQ(es[0]->failed_aggregator(), -1);
  b.close_connections();
  std::vector<float> x(100, 1.f), y(100);
  const uint64_t id = es[0]->allreduce(x.data(), y.data(), x.size(), DType::kFloat32, Op::kSum);
  std::string err;
  EXPECT_EQ(wait(*es[0], id, &err, 3s), RequestState::kError);
  EXPECT_EQ(err, "aggregator " + b.endpoint() + " closed the control connection");
  EXPECT_EQ(es[0]->failed_aggregator(), 1);
}

TEST(EngineFake, DestructionSendsLeave) {
  FakeAggregator agg(FakeOptions{});
  {
    auto es = make_engines({&agg}, 2);
    check_sum(es, 10);
  }
  EXPECT_TRUE(test::wait_until([&] { return agg.leaves() >= 2; }));
  EXPECT_EQ(agg.leaves(), 2u);
}

}  // namespace
}  // namespace conflux::client
