// Conformance: `max_mbps` paces the results a dataplane sends (a token bucket per queue).
// No timing upper bound is asserted: only that the daemon cannot have sent its result bytes
// faster than the cap allows (a slow machine only makes the run longer).
#include <chrono>
#include <map>
#include <thread>

#include "aggregator/util/token_bucket.h"
#include "conformance.h"

namespace conflux::agg::testing {
namespace {

using DataplanePacing = DaemonTest;

TEST_P(DataplanePacing, ResultEgressStaysUnderMaxMbps) {
  Config cfg = base_config();
  cfg.max_mbps = 32;        // 4 MB/s over all queues
  cfg.udp_offload = false;  // one datagram per send: the bucket's debt is one datagram
  start(cfg);
  JoinSpec spec;
  spec.job_key = 77;
  spec.requested_slots = 16;
  spec.payload_bytes = 8192;
  auto workers = join_job(spec, 2);
  auto w = ptrs(workers);
  const size_t count = size_t{1} << 20;  // 4 MiB of floats: 8 MiB of results to 2 workers
  std::mt19937_64 rng(9);
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < 2; ++r) in.push_back(exact_values(DType::kFloat32, count, rng));
  std::vector<std::vector<uint8_t>> out;
  uint64_t seq = 0, retransmits = 0;
  RunOptions opt;
  opt.rto_ms = 3000;
  opt.give_up_ms = 60000;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      run_allreduce(w, DType::kFloat32, Op::kSum, count, in, &seq, &out, &retransmits, opt));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto expect = reference(DType::kFloat32, Op::kSum, in, count);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(out[r], expect) << "rank " << r;

  // What the buckets can let out in `elapsed`: rate x time, plus each queue's full burst and
  // one send of debt (a datagram; a tx burst of up to 256 frames with dpdk).
  const uint64_t sent = metric_sum(metrics(), "conflux_dataplane_bytes_out_total");
  const double rate = 32e6 / 8;
  const double datagram = 8192 + 48;
  const double debt = GetParam() == "dpdk" ? 256 * datagram : datagram;
  const double queues = static_cast<double>(daemon().data_ports().size());
  const double slack = queues * (65536 + debt);
  EXPECT_GE(sent, 2 * count * 4);
  EXPECT_GE(elapsed, (static_cast<double>(sent) - slack) / rate)
      << sent << " result bytes left in " << elapsed << " s, faster than max_mbps allows";
}

// Fair share under max_mbps: with two jobs live, each job's result sends are paced to half the
// cap (its grant), whatever the other does. Both jobs run at once; each job's result bytes
// cannot have left faster than its half allows over its own run.
TEST_P(DataplanePacing, TwoJobsEachStayUnderTheirShare) {
  if (GetParam() == "dpdk") GTEST_SKIP() << "per-job pacing is in the kernel UDP dataplane only";
  Config cfg = base_config();
  cfg.max_mbps = 32;        // 16 Mbit/s (2 MB/s) per job while both are live
  cfg.udp_offload = false;  // one datagram per send: a bucket's debt is one datagram
  start(cfg);
  JoinSpec spec;
  spec.requested_slots = 16;
  spec.payload_bytes = 8192;
  spec.job_key = 81;
  auto a = join_job(spec, 2);
  spec.job_key = 82;
  auto b = join_job(spec, 2);
  const size_t count = size_t{1} << 19;  // 2 MiB of floats: 4 MiB of results per job
  struct Run {
    std::vector<std::vector<uint8_t>> in, out;
    bool ok = false;
    double elapsed = 0;
  };
  Run runs[2];
  std::mt19937_64 rng(11);
  for (Run& r : runs) {
    for (int k = 0; k < 2; ++k) r.in.push_back(exact_values(DType::kFloat32, count, rng));
  }
  RunOptions opt;
  opt.rto_ms = 3000;
  opt.give_up_ms = 60000;
  const auto go = [&](std::vector<Worker*> w, Run* r) {
    uint64_t seq = 0, retransmits = 0;
    const auto t0 = std::chrono::steady_clock::now();
    r->ok =
        run_allreduce(w, DType::kFloat32, Op::kSum, count, r->in, &seq, &r->out, &retransmits, opt);
    r->elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::thread ta(go, ptrs(a), &runs[0]);
  go(ptrs(b), &runs[1]);
  ta.join();
  const std::string m = metrics();
  const double rate = 16e6 / 8;
  const double queues = static_cast<double>(daemon().data_ports().size());
  const double slack = queues * (65536 + 8192 + 48);  // each queue's burst and one datagram
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

INSTANTIATE_TEST_SUITE_P(Backends, DataplanePacing, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
