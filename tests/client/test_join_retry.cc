// SPDX-License-Identifier: Apache-2.0
// The join's retries of a control connection (nccl_plugin/client/src/connect_retry.h, join.cc):
// an aggregator that drops the connection before it answers, or is not listening yet, is
// connected to again with backoff within the join timeout; one that says no is not.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conflux/client/engine.h"
#include "connect_retry.h"
#include "engine_fixture.h"
#include "fake_aggregator.h"

namespace conflux::client {
namespace {

using namespace std::chrono_literals;
using testing::FakeAggregator;
using testing::FakeOptions;

constexpr int64_t kMs = 1'000'000;

TEST(ConnectBackoff, WaitsDoubleFrom10To500MsWithJitterInTheUpperHalf) {
  ConnectBackoff b(0, 3600'000 * kMs, 3600'000 * kMs, 42);
  int64_t now = 0;
  for (int k = 0; k < 12; ++k) {
    const int64_t full = std::min<int64_t>(500 * kMs, (10 * kMs) << k);
    const int64_t at = b.next_attempt(ConnectFailure::kDropped, now);
    ASSERT_GE(at - now, full / 2) << k;
    ASSERT_LE(at - now, full) << k;
    now = at;
  }
  EXPECT_EQ(b.failures(), 12);
  EXPECT_EQ(b.retries(), 12);
}

TEST(ConnectBackoff, JitterSpreadsTheRanks) {
  ConnectBackoff a(0, 3600'000 * kMs, 0, 1), b(0, 3600'000 * kMs, 0, 2);
  int same = 0;
  for (int k = 0; k < 10; ++k) {
    same +=
        a.next_attempt(ConnectFailure::kDropped, 0) == b.next_attempt(ConnectFailure::kDropped, 0);
  }
  EXPECT_LT(same, 3);
}

TEST(ConnectBackoff, AnAnswerThatSaysNoIsFinal) {
  ConnectBackoff b(0, 3600'000 * kMs, 3600'000 * kMs, 7);
  EXPECT_EQ(b.next_attempt(ConnectFailure::kFinal, 0), -1);
  EXPECT_EQ(b.failures(), 1);
  EXPECT_EQ(b.retries(), 0);
}

TEST(ConnectBackoff, DroppedUntilTheDeadlineRefusedOnlyForItsBudget) {
  // Deadline 2 s, refused budget 300 ms.
  ConnectBackoff b(0, 2000 * kMs, 300 * kMs, 9);
  int64_t now = 0;
  int refused = 0;
  for (int64_t at; (at = b.next_attempt(ConnectFailure::kRefused, now)) >= 0; now = at) {
    EXPECT_LT(at, 300 * kMs);
    ++refused;
  }
  EXPECT_GE(refused, 3);  // 10, 20, 40, 80 ms (halved at worst): at least 5, 10, 20, 40
  // Dropped attempts go on from there until the deadline, never past it.
  int dropped = 0;
  for (int64_t at; (at = b.next_attempt(ConnectFailure::kDropped, now)) >= 0; now = at) {
    EXPECT_LT(at, 2000 * kMs);
    ++dropped;
  }
  EXPECT_GE(dropped, 2);
  EXPECT_EQ(b.next_attempt(ConnectFailure::kDropped, 2000 * kMs), -1);
}

// Log lines of the engines, any thread.
struct Log {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  LogFn fn() {
    return [this](LogLevel l, std::string_view m) {
      std::lock_guard<std::mutex> g(mu);
      lines.emplace_back(l, std::string(m));
    };
  }
  size_t count(LogLevel l, const std::string& needle) {
    std::lock_guard<std::mutex> g(mu);
    size_t n = 0;
    for (const auto& [level, text] : lines)
      n += level == l && text.find(needle) != std::string::npos;
    return n;
  }
};

// A busy aggregator closes the first connections at accept (before the ServerHello), as
// confluxd did under a flood: both ranks connect again and join; each rank that had to says
// so in one warning and one line when it got through.
TEST(JoinRetry, ConnectionsClosedBeforeTheServerHelloAreTriedAgain) {
  FakeOptions o;
  o.close_before_hello = 5;
  FakeAggregator agg(o);
  Log log;
  auto es = testing::make_engines({&agg}, 2, [&](ClientConfig& c) { c.log = log.fn(); });
  ASSERT_NE(es[0], nullptr);
  ASSERT_NE(es[1], nullptr);
  EXPECT_EQ(agg.connections(), 7u);
  const size_t warned = log.count(LogLevel::kWarn, "no ServerHello");
  EXPECT_GE(warned, 1u);
  EXPECT_LE(warned, 2u);  // one per rank at most, however many attempts
  EXPECT_EQ(log.count(LogLevel::kWarn, "connecting again with backoff"), warned);
  EXPECT_EQ(log.count(LogLevel::kInfo, "connected after"), warned);
}

// The connection is dropped after the Join was sent, before any answer (the aggregator evicted
// it before reading the Join): the rank joins again on a new connection.
TEST(JoinRetry, AConnectionDroppedBeforeTheJoinAckIsJoinedAgain) {
  FakeOptions o;
  o.close_on_join = 1;
  FakeAggregator agg(o);
  Log log;
  auto es = testing::make_engines({&agg}, 2, [&](ClientConfig& c) { c.log = log.fn(); });
  ASSERT_NE(es[0], nullptr);
  ASSERT_NE(es[1], nullptr);
  EXPECT_EQ(agg.connections(), 3u);
  EXPECT_EQ(log.count(LogLevel::kWarn, "during Join"), 1u);
}

// The aggregator is not listening yet when the rank starts (refused connects) and starts
// 300 ms later: the rank waits for it within connect_timeout.
TEST(JoinRetry, AnAggregatorThatStartsLateIsWaitedFor) {
  uint16_t port;
  {
    FakeAggregator gone(FakeOptions{});
    port = gone.control_port();
  }  // nothing listens on port now
  ClientConfig c;
  c.aggregators = {{"127.0.0.1", port}};
  c.job_key = 42;
  c.n_workers = 1;
  c.bind_addr = "127.0.0.1";
  c.spin_us = 0;
  c.connect_timeout = 3s;
  c.join_timeout = 5s;
  Log log;
  c.log = log.fn();
  const auto t0 = std::chrono::steady_clock::now();
  auto joined = std::async(std::launch::async, [c] {
    std::string err;
    auto e = Engine::create(c, &err);
    EXPECT_NE(e, nullptr) << err;
    return e != nullptr;
  });
  std::this_thread::sleep_for(300ms);
  FakeOptions o;
  o.control_port = port;
  FakeAggregator late(o);
  ASSERT_EQ(late.control_port(), port);
  EXPECT_TRUE(joined.get());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_EQ(late.connections(), 1u);
  EXPECT_EQ(log.count(LogLevel::kWarn, "Connection refused; connecting again"), 1u);
}

// Nothing listens, for good: refused connects are tried for connect_timeout only, and the
// error says how many attempts were made.
TEST(JoinRetry, RefusedConnectsGiveUpAfterConnectTimeout) {
  uint16_t port;
  {
    FakeAggregator gone(FakeOptions{});
    port = gone.control_port();
  }
  ClientConfig c;
  c.aggregators = {{"127.0.0.1", port}};
  c.n_workers = 1;
  c.connect_timeout = 300ms;
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  const auto took = std::chrono::steady_clock::now() - t0;
  // Not before the connect timeout; giving up at all is what the error's attempt count says
  // (a rank that never gave up would hit the test's timeout, not an assertion).
  EXPECT_GE(took, 150ms);
  EXPECT_NE(err.find("cannot connect: Connection refused (after "), std::string::npos) << err;
}

// An aggregator that drops every connection: the rank gives up at the join deadline (join
// timeout + 1 s), having warned once.
TEST(JoinRetry, AlwaysDroppedGivesUpAtTheJoinTimeout) {
  FakeOptions o;
  o.close_before_hello = 1'000'000;
  FakeAggregator agg(o);
  ClientConfig c = testing::fake_engine_config({&agg}, 1, 0);
  c.join_timeout = 300ms;
  Log log;
  c.log = log.fn();
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(Engine::create(c, &err), nullptr);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 800ms);  // not before the join deadline; the error names what ended it
  EXPECT_NE(err.find("no ServerHello: closed the control connection (after "), std::string::npos)
      << err;
  EXPECT_GE(agg.connections(), 5u);
  EXPECT_EQ(log.count(LogLevel::kWarn, "connecting again"), 1u);
}

// Answers that say no are final: one connection, an error at once, no retry logged.
TEST(JoinRetry, ARefusalIsNotTriedAgain) {
  struct Case {
    const char* what;
    FakeOptions opt;
    std::string secret;  // the worker's
    std::string expect;
  };
  std::vector<Case> cases;
  {
    FakeOptions o;
    o.join_status = proto::Status::kJobMismatch;
    cases.push_back({"JoinAck job_mismatch", o, "", "refused Join: job_mismatch"});
  }
  {
    FakeOptions o;
    o.hello_error = proto::Error{proto::Status::kVersionMismatch, "speaks version 9"};
    cases.push_back({"Error instead of the ServerHello", o, "",
                     "refused the connection: version_mismatch (speaks version 9)"});
  }
  {
    FakeOptions o;
    o.auth_required = true;
    o.secret = "right";
    cases.push_back({"wrong secret", o, "wrong", "refused Join: auth_failed"});
  }
  for (Case& k : cases) {
    SCOPED_TRACE(k.what);
    FakeAggregator agg(k.opt);
    ClientConfig c = testing::fake_engine_config({&agg}, 1, 0);
    c.secret = k.secret;
    Log log;
    c.log = log.fn();
    std::string err;
    EXPECT_EQ(Engine::create(c, &err), nullptr);  // at once: one connection, no attempts
    EXPECT_NE(err.find(k.expect), std::string::npos) << err;
    EXPECT_EQ(err.find("attempts"), std::string::npos) << err;
    EXPECT_EQ(agg.connections(), 1u);
    EXPECT_EQ(log.count(LogLevel::kWarn, "connecting again"), 0u);
  }
}

}  // namespace
}  // namespace conflux::client
