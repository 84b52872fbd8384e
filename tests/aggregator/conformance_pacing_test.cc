// Conformance: `max_mbps` paces the results a dataplane sends (a token bucket per queue), and
// while several jobs are live each job's results to its fair share (a bucket per job too,
// weighted by tenant).
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
};
void paced_allreduce(std::vector<Worker*> w, size_t count, uint64_t seed, PacedRun* run) {
  std::mt19937_64 rng(seed);
  for (size_t r = 0; r < w.size(); ++r)
    run->in.push_back(exact_values(DType::kFloat32, count, rng));
  uint64_t seq = 0, retransmits = 0;
  RunOptions opt;
  opt.rto_ms = 3000;
  opt.give_up_ms = 60000;
  const auto t0 = std::chrono::steady_clock::now();
  run->ok = run_allreduce(w, DType::kFloat32, Op::kSum, count, run->in, &seq, &run->out,
                          &retransmits, opt);
  run->elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class DataplanePacing : public DaemonTest {
 protected:
  // A job's run of `count` floats over 2 ranks, under a daemon cap of `mbps`: every result
  // exact, and the daemon's result bytes could not have left faster than the cap allows: rate
  // x time, plus each queue's full burst and one send of debt (a datagram; a tx burst of up
  // to 256 frames with dpdk).
  void expect_exact_and_paced(const PacedRun& run, size_t count, double mbps) {
    const auto expect = reference(DType::kFloat32, Op::kSum, run.in, count);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(run.out[r], expect) << "rank " << r;
    const uint64_t sent = metric_sum(metrics(), "conflux_dataplane_bytes_out_total");
    const double rate = mbps * 1e6 / 8;
    const double debt = GetParam() == "dpdk" ? 256 * kDatagram : kDatagram;
    const double slack = static_cast<double>(daemon().data_ports().size()) * (65536 + debt);
    EXPECT_GE(sent, 2 * count * 4);
    EXPECT_GE(run.elapsed, (static_cast<double>(sent) - slack) / rate)
        << sent << " result bytes left in " << run.elapsed << " s, faster than " << mbps
        << " Mbit/s allows";
  }
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

// Fair share under max_mbps: with two jobs live, each job's result sends are paced to half the
// cap (its grant), whatever the other does. Both jobs run at once; each job's result bytes
// cannot have left faster than its half allows over its own run.
TEST_P(DataplanePacing, TwoJobsEachStayUnderTheirShare) {
  if (GetParam() == "dpdk") GTEST_SKIP() << "per-job pacing is in the kernel UDP dataplane only";
  start(paced_config(base_config(), 32));  // 16 Mbit/s (2 MB/s) per job while both are live
  auto a = join_job(paced_job(81), 2);
  auto b = join_job(paced_job(82), 2);
  const size_t count = size_t{1} << 19;  // 2 MiB of floats: 4 MiB of results per job
  PacedRun runs[2];
  std::thread ta(paced_allreduce, ptrs(a), count, 11, &runs[0]);
  paced_allreduce(ptrs(b), count, 12, &runs[1]);
  ta.join();
  const std::string m = metrics();
  const double rate = 16e6 / 8;
  const double queues = static_cast<double>(daemon().data_ports().size());
  const double slack = queues * (65536 + kDatagram);  // each queue's burst and one datagram
  const uint32_t ids[2] = {a[0]->ack.job_id, b[0]->ack.job_id};
  for (int j = 0; j < 2; ++j) {
    ASSERT_TRUE(runs[j].ok) << "job " << j;
    const auto expect = reference(DType::kFloat32, Op::kSum, runs[j].in, count);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(runs[j].out[r], expect) << "job " << j << " rank " << r;
    const auto job = std::map<std::string, std::string>{{"job", std::to_string(ids[j])}};
    EXPECT_EQ(metric_sum(m, "conflux_job_paced_mbps", job), 16u);
    const uint64_t sent = metric_sum(m, "conflux_job_result_bytes_sent_total", job);
    EXPECT_GE(sent, 2 * count * 4) << "job " << j;
    EXPECT_GE(runs[j].elapsed, (static_cast<double>(sent) - slack) / rate)
        << "job " << j << ": " << sent << " result bytes left in " << runs[j].elapsed
        << " s, faster than its share allows";
  }
}

// Tenants of weights 3 and 1 under a cap of 32 Mbit/s: the jobs' grants are 24 and 8 Mbit/s.
// Both run at once; every result exact; neither job's result bytes left faster than its grant
// allows; and the light job's results, over its share most of the time, were set aside
// (conflux_dataplane_deferred_total) instead of holding the thread, then all delivered.
TEST_P(DataplanePacing, WeightedJobsStayUnderTheirGrantsWithResultsSetAside) {
  if (GetParam() == "dpdk") GTEST_SKIP() << "per-job pacing is in the kernel UDP dataplane only";
  Config cfg = paced_config(base_config(), 32);
  cfg.tenants = {Tenant{"heavy", "heavy-secret", "", 3}, Tenant{"light", "light-secret", "", 1}};
  start(cfg);
  JoinSpec spec = paced_job(83);
  spec.secret = "heavy-secret";
  auto heavy = join_job(spec, 2);
  spec = paced_job(84);
  spec.secret = "light-secret";
  auto light = join_job(spec, 2);
  const size_t count = size_t{1} << 17;  // 512 KiB of floats: 1 MiB of results per job
  PacedRun runs[2];
  std::thread th(paced_allreduce, ptrs(heavy), count, 13, &runs[0]);
  paced_allreduce(ptrs(light), count, 14, &runs[1]);
  th.join();
  const std::string m = metrics();
  const double queues = static_cast<double>(daemon().data_ports().size());
  const double slack = queues * (65536 + kDatagram);
  const uint32_t ids[2] = {heavy[0]->ack.job_id, light[0]->ack.job_id};
  const uint64_t grants[2] = {24, 8};
  for (int j = 0; j < 2; ++j) {
    ASSERT_TRUE(runs[j].ok) << "job " << j;
    const auto expect = reference(DType::kFloat32, Op::kSum, runs[j].in, count);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(runs[j].out[r], expect) << "job " << j << " rank " << r;
    const auto job = std::map<std::string, std::string>{{"job", std::to_string(ids[j])}};
    EXPECT_EQ(metric_sum(m, "conflux_job_grant_mbps", job), grants[j]);
    EXPECT_EQ(metric_sum(m, "conflux_job_paced_mbps", job), grants[j]);
    const uint64_t sent = metric_sum(m, "conflux_job_result_bytes_sent_total", job);
    EXPECT_GE(sent, 2 * count * 4) << "job " << j;
    EXPECT_GE(runs[j].elapsed, (static_cast<double>(sent) - slack) / (grants[j] * 1e6 / 8))
        << "job " << j << ": " << sent << " result bytes left in " << runs[j].elapsed
        << " s, faster than its grant allows";
  }
  EXPECT_GT(metric_sum(m, "conflux_dataplane_deferred_total"), 0u);
  EXPECT_EQ(metric_sum(m, "conflux_dataplane_send_errors_total"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, DataplanePacing, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
