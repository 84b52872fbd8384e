// SPDX-License-Identifier: Apache-2.0
// End to end: a real confluxd and N real conflux-allreduce-worker processes on 127.0.0.1.
// Each worker checks every element against the contributor-order reference itself and
// exits non-zero on any wrong element or engine error.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "e2e_fixture.h"
#include "e2e_harness.h"
#include "tests/common/ci_skip.h"
#include "util/proc.h"

namespace conflux::client::e2e {
namespace {

using namespace std::chrono_literals;

// Options every test passes: no busy polling (this runs on small CI machines).
// Options every test passes unless it sets them: no busy polling (this runs on small CI
// machines), one timed iteration, no warmup.
std::vector<std::string> args(std::vector<std::string> extra) {
  std::vector<std::string> a = std::move(extra);
  for (const char* opt : {"--spin-us", "--iters", "--warmup"}) {
    if (std::find(a.begin(), a.end(), opt) == a.end()) {
      a.push_back(opt);
      a.push_back(std::string(opt) == "--iters" ? "1" : "0");
    }
  }
  return a;
}

void expect_all_ok(const std::vector<WorkerResult>& rs, const std::string& verified) {
  for (const WorkerResult& w : rs) {
    ASSERT_TRUE(w.exited_ok) << explain(rs);
  }
  EXPECT_NE(rs[0].out.find(verified), std::string::npos) << rs[0].out;
}

class E2E : public DaemonFixture {
 protected:
  std::vector<WorkerResult> run(uint32_t n, std::vector<std::string> extra,
                                std::chrono::milliseconds timeout = 60s) {
    return run_workers(dir_, d_.endpoint(), n, args(std::move(extra)), timeout);
  }
};

TEST_F(E2E, EveryDtypeAndOpThreeRanks) {
  start_daemon();
  auto rs = run(3, {"--dtype", "all", "--op", "all", "--count", "1,7,1023,4096"});
  expect_all_ok(rs, "verified: all 192 results correct");
  EXPECT_EQ(d_.stop(), "exit 0");
}

class E2ESizes : public E2E, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(E2ESizes, Float32AndBf16SumSizeSweep) {
  start_daemon();
  auto rs = run(GetParam(), {"--dtype", "float,bfloat16", "--count", "1,7,1023,4096,1048579"});
  expect_all_ok(rs, "verified: all 10 results correct");
}
INSTANTIATE_TEST_SUITE_P(Ranks, E2ESizes, ::testing::Values(2u, 3u, 8u));

// UDP segmentation offload on both sides (the default) and off on both: the same exact
// results, through loss, duplication and reordering; with it on, the daemon and the workers
// really sent GSO batches and took GRO-coalesced ones (loopback carries GSO skbs whole).
class E2EOffload : public E2E, public ::testing::WithParamInterface<bool> {};

TEST_P(E2EOffload, EveryDtypeAndOpExactWithAndWithoutGsoGro) {
  const bool on = GetParam();
  start_daemon({on ? "--udp-offload=true" : "--udp-offload=false"});
  auto rs = run(4, {"--udp-offload", on ? "1" : "0", "--dtype", "all", "--op", "all", "--count",
                    "1,1023,70000", "--fault-drop", "0.01", "--fault-dup", "0.01",
                    "--fault-reorder", "0.01"});
  expect_all_ok(rs, "verified: all 144 results correct");
  const double daemon_gso = d_.metric("conflux_dataplane_gso_sends_total");
  const double daemon_gro = d_.metric("conflux_dataplane_gro_receives_total");
  double worker_gso = 0, worker_gro = 0;
  for (const WorkerResult& w : rs) {
    EXPECT_EQ(json_number(w.json, "gso_fallbacks"), 0) << w.json;
    worker_gso += json_number(w.json, "gso_sends");
    worker_gro += json_number(w.json, "gro_receives");
  }
  if (on) {
    EXPECT_GT(daemon_gso, 0);
    EXPECT_GT(daemon_gro, 0);
    EXPECT_GT(worker_gso, 0);
    EXPECT_GT(worker_gro, 0);
  } else {
    EXPECT_EQ(daemon_gso, 0);
    EXPECT_EQ(daemon_gro, 0);
    EXPECT_EQ(worker_gso, 0);
    EXPECT_EQ(worker_gro, 0);
  }
}
INSTANTIATE_TEST_SUITE_P(UdpOffload, E2EOffload, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "on" : "off"; });

// Caller progress (ClientConfig::caller_progress) on and off, with the engine's busy poll: the
// same exact results through loss, duplication and reordering; with it on the callers did
// I/O themselves, with it off they never did.
class E2ECallerProgress : public E2E, public ::testing::WithParamInterface<bool> {};

TEST_P(E2ECallerProgress, EveryDtypeAndOpExactWithTheCallerDoingTheIoOrNot) {
  const bool on = GetParam();
  start_daemon();
  auto rs = run(4, {"--caller-progress", on ? "1" : "0", "--spin-us", "50", "--dtype", "all",
                    "--op", "all", "--count", "1,1023,70000", "--fault-drop", "0.01", "--fault-dup",
                    "0.01", "--fault-reorder", "0.01"});
  expect_all_ok(rs, "verified: all 144 results correct");
  double caller_steps = 0;
  for (const WorkerResult& w : rs) caller_steps += json_number(w.json, "caller_steps");
  if (on) {
    EXPECT_GT(caller_steps, 0);
  } else {
    EXPECT_EQ(caller_steps, 0);
  }
}
INSTANTIATE_TEST_SUITE_P(CallerProgress, E2ECallerProgress, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "on" : "off"; });

// The data MAC (SPEC.md §6) on every packet both ways, with loss, duplicates and reordering
// (resends are signed afresh) and GSO/GRO on: every result exact and no packet dropped as
// bad_mac on either side; then owned results (a Reduce to rank 1: payload to the owner,
// signed acknowledgements to the others); then a worker without the secret cannot join.
TEST_F(E2E, DataMacEveryDtypeAndOpExactUnderFaults) {
  start_daemon({"--secret", "mac-secret", "--data-mac=true"});
  const std::vector<std::string> args = {
      "--secret",        "mac-secret",   "--dtype",      "all",  "--op",        "all",
      "--count",         "1,1023,70000", "--fault-drop", "0.01", "--fault-dup", "0.01",
      "--fault-reorder", "0.01",         "--log-level",  "info"};
  auto rs = run(4, args);
  expect_all_ok(rs, "verified: all 144 results correct");
  EXPECT_NE((rs[0].out + rs[0].err).find("data MAC"), std::string::npos) << rs[0].out << rs[0].err;
  auto owned_args = args;
  owned_args.insert(owned_args.end(), {"--root", "1"});
  auto owned = run(4, owned_args);
  for (const WorkerResult& w : owned) EXPECT_TRUE(w.exited_ok) << w.out << w.err;
  for (const WorkerResult& w : rs) {
    EXPECT_EQ(w.json.find("\"bad_mac\""), std::string::npos) << w.json;  // drops listed if any
  }
  std::string err;
  const std::string m = tools::http_get(d_.metrics_port, "/metrics", &err);
  EXPECT_EQ(tools::prometheus_sum(m, "conflux_dataplane_drops_total", "reason=\"bad_mac\""), 0);
  auto no_secret = run(1, {"--count", "100"}, 10s);
  EXPECT_FALSE(no_secret[0].exited_ok);
}

// The data MAC and multicast together: the signed results that go to the job's group verify
// on every rank (one tag per result, whatever the number of receivers).
TEST_F(E2E, DataMacResultsByMulticastVerify) {
  start_daemon({"--secret", "mac-secret", "--data-mac=true", "--multicast-range=239.77.0.0/16"});
  auto rs = run(3, {"--secret", "mac-secret", "--dtype", "float,int32,bf16", "--op", "sum,max",
                    "--count", "1,1023,70000"});
  expect_all_ok(rs, "verified: all 18 results correct");
  for (const WorkerResult& w : rs) {
    EXPECT_GT(json_number(w.json, "multicast_results"), 0) << w.json;
    EXPECT_EQ(w.json.find("\"bad_mac\""), std::string::npos) << w.json;
    // The group's socket takes the trailer too (a truncated result would be dropped as
    // oversized and come again by unicast after a timeout).
    EXPECT_EQ(w.json.find("\"oversized\""), std::string::npos) << w.json;
  }
}

TEST_F(E2E, DeterministicModeIsBitwiseTheRankOrderReference) {
  // Random float inputs: any other summation order would differ in the last bits. The
  // daemon reorders its input to make arrival order differ from rank order.
  start_daemon({"--fault-reorder", "0.3"});
  auto rs = run(4, {"--deterministic", "--inputs", "random", "--dtype",
                    "half,float,double,bfloat16,f8e4m3,f8e5m2", "--op", "sum,prod", "--count",
                    "1,1023,70000"});
  expect_all_ok(rs, "verified: all 36 results correct");
}

TEST_F(E2E, InPlaceAndMultiplePayloadSizes) {
  start_daemon();
  auto rs = run(2, {"--in-place", "--payload", "1000", "--window", "7", "--dtype",
                    "int8,int64,half", "--op", "sum,max", "--count", "1,999,5000"});
  expect_all_ok(rs, "verified: all 18 results correct");
}

// --pause-ms (a training step's compute between collectives): the job stays joined through
// the pauses, every result is right, and the reported time counts the AllReduces only.
TEST_F(E2E, PausesBetweenIterationsKeepTheJobAndAreNotTimed) {
  start_daemon();
  auto rs = run(2, {"--count", "1000", "--iters", "3", "--warmup", "0", "--pause-ms", "300"});
  expect_all_ok(rs, "verified: all 1 results correct");
  for (const WorkerResult& r : rs) {
    EXPECT_GE(r.seconds, 0.9) << "three pauses of 300 ms";
    const double us = json_number(r.json, "time_us");
    EXPECT_GT(us, 0);
    EXPECT_LT(us, 250000) << "the pause was counted in the time";
  }
  EXPECT_EQ(d_.metric("conflux_jobs_created_total"), 1) << "the job was joined once";
}

// Reduce (owned results): the root verifies the sum; the other ranks verify that their
// receive buffer stayed untouched, and they receive acknowledgements only (48 bytes per
// packet, against the whole result at the root).
TEST_F(E2E, ReduceSendsTheResultToTheRootOnly) {
  start_daemon({"--fault-drop", "0.02"});  // re-served results and acknowledgements too
  auto rs = run(3, {"--root", "1", "--rto-us", "1000", "--rto-max-ms", "20", "--dtype",
                    "float,int32", "--op", "sum,max", "--count", "1,1023,262147"});
  expect_all_ok(rs, "verified: all 12 results correct");
  EXPECT_NE(rs[0].out.find("Reduce to rank 1"), std::string::npos) << rs[0].out;
  const double root_in = json_number(rs[1].json, "bytes_received");
  EXPECT_GT(root_in, 2.0 * 4 * (262147 + 1023 + 1) * 4) << "2 runs x 4 (dtype, op) x bytes";
  for (int r : {0, 2}) {
    const double in = json_number(rs[static_cast<size_t>(r)].json, "bytes_received");
    const double packets = json_number(rs[static_cast<size_t>(r)].json, "packets_received");
    EXPECT_GT(packets, 0);
    EXPECT_EQ(in, 48 * packets) << "rank " << r << " received payload: " << rs[r].json;
  }
}

TEST_F(E2E, ReduceRootOutsideTheJobIsAUsageError) {
  start_daemon();
  auto rs = run(2, {"--root", "2"});
  for (const WorkerResult& w : rs) {
    EXPECT_TRUE(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 2) << w.err;
    EXPECT_NE(w.err.find("--root 2 is not a rank (--nranks 2)"), std::string::npos) << w.err;
  }
}

class E2ELoss : public E2E, public ::testing::WithParamInterface<const char*> {};

TEST_P(E2ELoss, ExactResultsDespiteDropDuplicationAndReordering) {
  start_daemon();
  auto rs = run(3, {"--fault-drop", GetParam(), "--fault-dup", "0.02", "--fault-reorder", "0.02",
                    "--rto-us", "1000", "--rto-max-ms", "20", "--dtype", "float,int32", "--count",
                    "1,7,1023,4096,262147"});
  expect_all_ok(rs, "verified: all 10 results correct");
  for (const WorkerResult& w : rs) {
    EXPECT_GT(json_number(w.json, "fault_dropped"), 0) << w.json;
    EXPECT_GT(json_number(w.json, "retransmits"), 0) << w.json;
  }
}
INSTANTIATE_TEST_SUITE_P(DropRate, E2ELoss, ::testing::Values("0.01", "0.1"));

TEST_F(E2E, ExactResultsDespiteLossInsideTheDaemon) {
  start_daemon({"--fault-drop", "0.05", "--fault-dup", "0.05", "--fault-reorder", "0.05"});
  auto rs = run(3, {"--rto-us", "1000", "--rto-max-ms", "20", "--dtype", "float", "--count",
                    "1,4096,100003"});
  expect_all_ok(rs, "verified: all 3 results correct");
}

TEST_F(E2E, KilledDaemonFailsEveryWorkerWithinTheTimeout) {
  start_daemon();
  auto pids = start_workers(dir_, d_.endpoint(), 3,
                            args({"--aggregator-timeout-ms", "2000", "--count", "262144", "--iters",
                                  "1000000", "--timeout-s", "30"}));
  // Kill only once data flows.
  ASSERT_TRUE(wait_packets_in(d_, 2000, 20s)) << "workers did not start";
  ASSERT_EQ(::kill(d_.pid, SIGKILL), 0);
  auto rs = wait_workers(dir_, pids, 10s);
  for (const WorkerResult& w : rs) {
    EXPECT_FALSE(w.timed_out);
    EXPECT_TRUE(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 1) << w.err;
    // Detected through the closed connection (the message), not the 30 s run limit.
    EXPECT_NE(w.err.find("aggregator " + d_.endpoint() + " closed the control connection"),
              std::string::npos)
        << w.err;
  }
}

TEST_F(E2E, StoppedDaemonSendsShutdownAndWorkersFailAtOnce) {
  start_daemon();
  auto pids = start_workers(dir_, d_.endpoint(), 2,
                            args({"--count", "65536", "--iters", "1000000", "--timeout-s", "30"}));
  ASSERT_TRUE(wait_packets_in(d_, 1000, 20s)) << "workers did not start";
  ASSERT_EQ(::kill(d_.pid, SIGTERM), 0);
  auto rs = wait_workers(dir_, pids, 10s);
  for (const WorkerResult& w : rs) {
    EXPECT_TRUE(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 1) << w.err;
    // By the daemon's Shutdown (the message), not a timeout.
    EXPECT_NE(w.err.find("aggregator " + d_.endpoint() + " shut down"), std::string::npos) << w.err;
  }
  EXPECT_EQ(d_.stop(), "exit 0");
}

TEST_F(E2E, FrozenDaemonIsDetectedAfterTheAggregatorTimeout) {
  start_daemon();
  auto pids = start_workers(dir_, d_.endpoint(), 2,
                            args({"--aggregator-timeout-ms", "2000", "--count", "65536", "--iters",
                                  "1000000", "--timeout-s", "30"}));
  ASSERT_TRUE(wait_packets_in(d_, 1000, 20s)) << "workers did not start";
  ASSERT_EQ(::kill(d_.pid, SIGSTOP), 0);  // alive for TCP, but silent
  auto rs = wait_workers(dir_, pids, 10s);
  for (const WorkerResult& w : rs) {
    EXPECT_TRUE(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 1) << w.err;
    EXPECT_GE(w.seconds, 1.5);  // not before the 2 s aggregator timeout, which the error names
    EXPECT_NE(w.err.find("aggregator " + d_.endpoint() + " stopped answering for 2"),
              std::string::npos)
        << w.err;
  }
}

// The daemon itself stops (SIGSTOP) for twice its worker timeout while the workers keep
// heartbeating: on SIGCONT it must read their pending input and forgive its own gap, not
// close every member as silent; the job then finishes exactly.
TEST_F(E2E, PausedDaemonKeepsItsHeartbeatingWorkers) {
  start_daemon({"--worker-timeout-ms", "1000"});
  auto pids = start_workers(dir_, d_.endpoint(), 2,
                            args({"--aggregator-timeout-ms", "20000", "--heartbeat-ms", "200",
                                  "--count", "65536", "--iters", "400", "--timeout-s", "60"}));
  ASSERT_TRUE(wait_packets_in(d_, 1000, 20s)) << "workers did not start";
  // A stop that lands between the end of one turn of the control loop and the start of the
  // next is not seen as a gap (nor does it need to be: the pending input is read before any
  // silence is judged). Stop again, at most twice more, until the daemon has seen one.
  for (int stop = 0; stop < 3 && d_.metric("conflux_control_loop_stalls_total") < 1; ++stop) {
    ASSERT_EQ(::kill(d_.pid, SIGSTOP), 0);
    std::this_thread::sleep_for(2000ms);
    ASSERT_EQ(::kill(d_.pid, SIGCONT), 0);
    std::this_thread::sleep_for(200ms);  // a few turns of the loop
  }
  auto rs = wait_workers(dir_, pids, 60s);
  expect_all_ok(rs, "verified: all 1 results correct");
  // The stall was seen (the counter: its log line is rate-limited, and on a loaded machine an
  // earlier stall may have taken this second's line).
  EXPECT_GE(d_.metric("conflux_control_loop_stalls_total"), 1);
  EXPECT_EQ(d_.stop(), "exit 0");
  const std::string log = tools::read_file(d_.log);
  EXPECT_EQ(log.find("silent for"), std::string::npos) << log;
}

TEST_F(E2E, NoAggregatorReachableFailsQuickly) {
  uint16_t port;
  {
    DaemonProcess gone;
    ASSERT_EQ(gone.start(dir_), "");
    port = gone.control_port;
    gone.stop();
  }
  const std::string ep = "127.0.0.1:" + std::to_string(port);
  // Refused connects are tried again for the connect timeout (an aggregator restarting).
  auto rs = run_workers(dir_, ep, 1, args({"--connect-timeout-ms", "500"}), 10s);
  EXPECT_TRUE(WIFEXITED(rs[0].status) && WEXITSTATUS(rs[0].status) == 1);
  EXPECT_NE(rs[0].err.find("aggregator " + ep + ": cannot connect: Connection refused"),
            std::string::npos)
      << rs[0].err;
}

TEST_F(E2E, SharedSecretAuthentication) {
  start_daemon({"--secret", "hunter2"});
  auto ok = run(2, {"--secret", "hunter2", "--count", "100"});
  expect_all_ok(ok, "verified: all 1 results correct");
  auto bad = run(1, {"--secret", "wrong", "--count", "100"}, 10s);
  EXPECT_FALSE(bad[0].exited_ok);
  EXPECT_NE(bad[0].err.find("refused Join: auth_failed"), std::string::npos) << bad[0].err;
}

TEST_F(E2E, LauncherStripesOverTwoDaemons) {
  if (launcher_path().empty()) {
    // Not discovered by ctest in such a build (tests/client/CMakeLists.txt).
    CONFLUX_SKIP_UNLESS_CI() << "bench tools not built (CONFLUX_BUILD_BENCH=OFF)";
  }
  const std::string json = dir_ + "/launch.json";
  std::vector<std::string> argv = {
      launcher_path(), "--daemons",      "2", "-n", "2", "--json", json,
      "--log-dir",     dir_ + "/launch", "--"};
  for (const std::string& a : args({"--count", "1,100000"})) {
    argv.push_back(a);
  }
  std::string err;
  const pid_t pid = tools::spawn(argv, dir_ + "/launch.out", dir_ + "/launch.err", &err);
  ASSERT_GT(pid, 0) << err;
  int st = 0;
  ASSERT_TRUE(tools::wait_exit(pid, 60s, &st));
  const std::string out = tools::read_file(dir_ + "/launch.out");
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << out << tools::read_file(dir_ + "/launch.err");
  EXPECT_NE(out.find("verified: all 2 results correct"), std::string::npos) << out;
  const std::string j = tools::read_file(json);
  EXPECT_NE(j.find("\"ok\":true"), std::string::npos) << j;
  // Both daemons carried packets (striping): two per-thread sections with traffic.
  size_t pos = 0, busy = 0;
  while ((pos = j.find("\"packets_in_per_s_total\":", pos)) != std::string::npos) {
    pos += 25;
    if (std::strtod(j.c_str() + pos, nullptr) > 0) {
      ++busy;
    }
  }
  EXPECT_EQ(busy, 2u) << j;
}

// Weighted striping: with weights 3,1 the first daemon takes three packets of every four, on
// every rank, and the results are exact.
TEST_F(E2E, StripeWeightsSplitThePacketsThreeToOne) {
  DaemonProcess a, b;
  ASSERT_EQ(start_in("a", a, {"--multicast-range", "239.81.0.0/26"}), "");
  ASSERT_EQ(start_in("b", b, {"--multicast-range", "239.82.0.0/26"}), "");
  // 1,000,000 float32 in 8192 B packets: 489 per rank, 367 to a and 122 to b.
  const auto rs = run_workers(dir_, a.endpoint() + "," + b.endpoint(), 2,
                              args({"--stripe-weights", "3,1", "--count", "1000000", "--dtype",
                                    "float,int32", "--op", "sum,max"}));
  expect_all_ok(rs, "verified: all 4 results correct");
  const double in_a = a.packets_in();
  const double in_b = b.packets_in();
  ASSERT_GT(in_b, 0) << "the lighter stripe carried nothing";
  // Resends (none expected on loopback) could only move the ratio a little.
  EXPECT_NEAR(in_a / in_b, 367.0 / 122.0, 0.15) << in_a << " : " << in_b;
  EXPECT_GE(in_a, 4 * 2 * 367.0);
  EXPECT_GE(in_b, 4 * 2 * 122.0);
  EXPECT_EQ(a.stop(), "exit 0");
  EXPECT_EQ(b.stop(), "exit 0");
}

TEST_F(E2E, StripeWeightsThatDoNotMatchTheAggregatorsAreAUsageError) {
  DaemonProcess a;
  ASSERT_EQ(start_in("a", a, {}), "");
  const auto rs = run_workers(dir_, a.endpoint(), 1, args({"--stripe-weights", "3,1"}));
  ASSERT_FALSE(rs[0].exited_ok);
  EXPECT_NE((rs[0].out + rs[0].err).find("one weight per aggregator (2 for 1)"), std::string::npos)
      << rs[0].out << rs[0].err;
}

TEST_F(E2E, LargeFloat32Sum64MiElements) {
  start_daemon();
  auto rs = run(2, {"--count", "64Mi"}, 120s);
  expect_all_ok(rs, "verified: all 1 results correct");
}

}  // namespace
}  // namespace conflux::client::e2e
