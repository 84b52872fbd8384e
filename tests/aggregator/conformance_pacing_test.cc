// SPDX-License-Identifier: Apache-2.0
// Conformance: `max_mbps` paces the results a dataplane sends (a token bucket per queue), and
// while several jobs are live each job's results to its fair share (a bucket per job too,
// weighted by tenant) whenever another job's results wait as well (work-conserving); on both
// backends.
// No timing upper bound is asserted: only that the daemon cannot have sent its result bytes
// faster than the cap allows (a slow machine only makes the run longer).
#include <chrono>
#include <map>
#include <thread>

#include "aggregator/util/token_bucket.h"
#include "conformance.h"

namespace conflux::agg::testing {
namespace {

constexpr double kDatagram = 8192 + 48;  // one result datagram of these tests
constexpr const char* kAdminSecret = "pacing-test-secret";

// A daemon whose buckets are the only pacing: one datagram per send, so a bucket's debt is
// one datagram.
Config paced_config(Config cfg, int64_t max_mbps) {
  cfg.max_mbps = max_mbps;
  cfg.udp_offload = false;
  return cfg;
}

JoinSpec paced_job(uint64_t key) {
  JoinSpec spec;
  spec.job_key = key;
  spec.requested_slots = 16;
  spec.payload_bytes = 8192;
  return spec;
}

// One exact float sum of `count` elements over `w` (2 ranks), timed.
struct PacedRun {
  std::vector<std::vector<uint8_t>> in, out;
  bool ok = false;
  double elapsed = 0;
  std::chrono::steady_clock::time_point start, end;
};
void paced_allreduce(std::vector<Worker*> w, size_t count, uint64_t seed, PacedRun* run) {
  std::mt19937_64 rng(seed);
  for (size_t r = 0; r < w.size(); ++r)
    run->in.push_back(exact_values(DType::kFloat32, count, rng));
  uint64_t seq = 0, retransmits = 0;
  RunOptions opt;
  opt.rto_ms = 3000;
  opt.give_up_ms = 60000;
  run->start = std::chrono::steady_clock::now();
  run->ok = run_allreduce(w, DType::kFloat32, Op::kSum, count, run->in, &seq, &run->out,
                          &retransmits, opt);
  run->end = std::chrono::steady_clock::now();
  run->elapsed = std::chrono::duration<double>(run->end - run->start).count();
}

class DataplanePacing : public DaemonTest {
 protected:
  // A job's run of `count` floats over 2 ranks, under a daemon cap of `mbps`: every result
  // exact, and the daemon's result bytes could not have left faster than the cap allows: rate
  // x time, plus each queue's full burst and one send of debt (a datagram; a tx burst of up
  // to 256 frames with dpdk).
  double burst_debt() const { return GetParam() == "dpdk" ? 256 * kDatagram : kDatagram; }
  void expect_exact_and_paced(const PacedRun& run, size_t count, double mbps) {
    const auto expect = reference(DType::kFloat32, Op::kSum, run.in, count);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(run.out[r], expect) << "rank " << r;
    const uint64_t sent = metric_sum(metrics(), "conflux_dataplane_bytes_out_total");
    const double rate = mbps * 1e6 / 8;
    const double slack = static_cast<double>(daemon().data_ports().size()) * (65536 + burst_debt());
    EXPECT_GE(sent, 2 * count * 4);
    EXPECT_GE(run.elapsed, (static_cast<double>(sent) - slack) / rate)
        << sent << " result bytes left in " << run.elapsed << " s, faster than " << mbps
        << " Mbit/s allows";
  }
  // Runs `count` floats on jobs a and b (2 ranks each) at once: every result exact, each
  // job's grant and pacing in /metrics as given, and the two together no faster than the cap
  // of `cap_mbps` allows. Returns the scrape taken after.
  std::string two_jobs_at_once(const std::vector<std::unique_ptr<Worker>>& a,
                               const std::vector<std::unique_ptr<Worker>>& b, size_t count,
                               const uint64_t grants[2], double cap_mbps);
};

TEST_P(DataplanePacing, ResultEgressStaysUnderMaxMbps) {
  start(paced_config(base_config(), 32));  // 4 MB/s over all queues
  auto workers = join_job(paced_job(77), 2);
  const size_t count = size_t{1} << 20;  // 4 MiB of floats: 8 MiB of results to 2 workers
  PacedRun run;
  paced_allreduce(ptrs(workers), count, 9, &run);
  ASSERT_TRUE(run.ok);
  expect_exact_and_paced(run, count, 32);
}

// conflux throttle of a live job: a daemon started with no cap is capped through POST
// /admin/max-mbps/N after the job joined; the results it sends from then on are paced to the
// new cap on every queue.
TEST_P(DataplanePacing, ThrottleOfALiveJobPacesItsResults) {
  Config cfg = paced_config(base_config(), 0);  // no cap to begin with
  cfg.secret = kAdminSecret;  // admin commands from a non-loopback peer (the dpdk fixture)
  start(cfg);
  JoinSpec spec = paced_job(79);
  spec.secret = kAdminSecret;
  auto workers = join_job(spec, 2);
  int status = 0;
  http_post(static_cast<uint16_t>(daemon().metrics_port()), "/admin/max-mbps/32", &status,
            kAdminSecret);
  ASSERT_EQ(status, 200);
  const size_t count = size_t{1} << 19;  // 2 MiB of floats: 4 MiB of results
  PacedRun run;
  paced_allreduce(ptrs(workers), count, 6, &run);
  ASSERT_TRUE(run.ok);
  expect_exact_and_paced(run, count, 32);  // the new cap, from the first result on
}

// Fair share under max_mbps: with two jobs live, each job's grant is half the cap, and its
// result sends are held to it while the other job's results wait too. Both jobs run at once:
// every result exact, and together they cannot have sent faster than the cap allows.
TEST_P(DataplanePacing, TwoJobsShareTheCap) {
  start(paced_config(base_config(), 32));  // 16 Mbit/s (2 MB/s) per job while both are live
  auto a = join_job(paced_job(81), 2);
  auto b = join_job(paced_job(82), 2);
  const uint64_t grants[2] = {16, 16};
  two_jobs_at_once(a, b, size_t{1} << 19, grants, 32);  // 4 MiB of results per job
}

// No max_mbps, but a known line rate: while two jobs are live the daemon paces the results
// to the line rate and each job to its half, as under a cap of that rate (a job alone is not
// paced: nothing to share). Every result exact, together no faster than the line allows.
TEST_P(DataplanePacing, TwoJobsShareAKnownLineRateWithoutACap) {
  Config cfg = paced_config(base_config(), 0);
  cfg.line_mbps = 32;
  start(cfg);
  auto a = join_job(paced_job(85), 2);
  auto b = join_job(paced_job(86), 2);
  const uint64_t grants[2] = {16, 16};
  two_jobs_at_once(a, b, size_t{1} << 19, grants, 32);
  EXPECT_EQ(metric_sum(metrics(), "conflux_max_mbps"), 0u);  // the operator's cap: still none
}

// Tenants of weights 3 and 1 under a cap of 32 Mbit/s: the jobs' grants are 24 and 8 Mbit/s.
// Both run at once: every result exact, together no faster than the cap, and the light job's
// results, over its share most of the time, were set aside (conflux_dataplane_deferred_total)
// instead of holding the thread, then all delivered.
TEST_P(DataplanePacing, WeightedJobsShareTheCapWithResultsSetAside) {
  Config cfg = paced_config(base_config(), 32);
  cfg.tenants = {Tenant{"heavy", "heavy-secret", "", 3}, Tenant{"light", "light-secret", "", 1}};
  start(cfg);
  JoinSpec spec = paced_job(83);
  spec.secret = "heavy-secret";
  auto heavy = join_job(spec, 2);
  spec = paced_job(84);
  spec.secret = "light-secret";
  auto light = join_job(spec, 2);
  const uint64_t grants[2] = {24, 8};
  const std::string m = two_jobs_at_once(heavy, light, size_t{1} << 17, grants, 32);
  EXPECT_GT(metric_sum(m, "conflux_dataplane_deferred_total"), 0u);
  EXPECT_EQ(metric_sum(m, "conflux_dataplane_send_errors_total"), 0u);
}

// Work-conserving: a second job is joined but idle (between its collectives), so the first,
// granted half the cap, has the queue to itself: its results beyond its half are lent the idle
// job's (conflux_dataplane_borrowed_total), still within the cap, and every one exact.
TEST_P(DataplanePacing, AnIdleJobsShareIsLent) {
  start(paced_config(base_config(), 32));
  auto busy = join_job(paced_job(85), 2);
  auto idle = join_job(paced_job(86), 2);
  const size_t count = size_t{1} << 18;  // 1 MiB of floats: 2 MiB of results
  PacedRun run;
  paced_allreduce(ptrs(busy), count, 15, &run);
  ASSERT_TRUE(run.ok);
  expect_exact_and_paced(run, count, 32);  // the cap holds, whatever is lent
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_job_paced_mbps",
                       {{"conflux_job", std::to_string(busy[0]->ack.job_id)}}),
            16u);
  EXPECT_GT(metric_sum(m, "conflux_dataplane_borrowed_total"), 0u);
  EXPECT_EQ(metric_sum(m, "conflux_dataplane_send_errors_total"), 0u);
}

std::string DataplanePacing::two_jobs_at_once(const std::vector<std::unique_ptr<Worker>>& a,
                                              const std::vector<std::unique_ptr<Worker>>& b,
                                              size_t count, const uint64_t grants[2],
                                              double cap_mbps) {
  PacedRun runs[2];
  std::thread ta(paced_allreduce, ptrs(a), count, 11, &runs[0]);
  paced_allreduce(ptrs(b), count, 12, &runs[1]);
  ta.join();
  const uint32_t ids[2] = {a[0]->ack.job_id, b[0]->ack.job_id};
  const auto job_label = [&](int j) {
    return std::map<std::string, std::string>{{"conflux_job", std::to_string(ids[j])}};
  };
  // The daemon counts a send once sendmmsg has returned, so the ranks can finish before their
  // last result is counted: read the metrics once both jobs' result bytes are in (3 s at most).
  const std::string m = wait_metrics([&](const std::string& text) {
    for (int j = 0; j < 2; ++j) {
      if (metric_sum(text, "conflux_job_result_bytes_sent_total", job_label(j)) < 2 * count * 4) {
        return false;
      }
    }
    return true;
  });
  for (int j = 0; j < 2; ++j) {
    EXPECT_TRUE(runs[j].ok) << "job " << j;
    if (!runs[j].ok) continue;
    const auto expect = reference(DType::kFloat32, Op::kSum, runs[j].in, count);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(runs[j].out[r], expect) << "job " << j << " rank " << r;
    const auto job = job_label(j);
    EXPECT_EQ(metric_sum(m, "conflux_job_grant_mbps", job), grants[j]);
    EXPECT_EQ(metric_sum(m, "conflux_job_paced_mbps", job), grants[j]);
    EXPECT_GE(metric_sum(m, "conflux_job_result_bytes_sent_total", job), 2 * count * 4);
  }
  // Together: no faster than the cap, from the first run's start to the last one's end (the
  // two threads do not start at the same instant).
  const uint64_t sent = metric_sum(m, "conflux_dataplane_bytes_out_total");
  const double queues = static_cast<double>(daemon().data_ports().size());
  const double slack = queues * (65536 + burst_debt());
  const double elapsed = std::chrono::duration<double>(std::max(runs[0].end, runs[1].end) -
                                                       std::min(runs[0].start, runs[1].start))
                             .count();
  EXPECT_GE(elapsed, (static_cast<double>(sent) - slack) / (cap_mbps * 1e6 / 8))
      << sent << " result bytes left in " << elapsed << " s, faster than the cap allows";
  return m;
}

INSTANTIATE_TEST_SUITE_P(Backends, DataplanePacing, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
