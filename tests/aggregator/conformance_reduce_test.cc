// SPDX-License-Identifier: Apache-2.0
// Conformance: exact results for every (dtype, op), retransmission and loss handling.
#include <cstring>

#include "conflux/common/reduce.h"
#include "conformance.h"
#include "tests/common/ci_skip.h"

namespace conflux::agg::testing {
namespace {

class DataplaneReduce : public DaemonTest {
 protected:
  // Every (dtype, op) exact at N = 2 and 3 on a daemon started with `cfg`.
  void all_dtypes_all_ops_exact(const Config& cfg);
};

TEST_P(DataplaneReduce, AllDtypesAllOpsExact) { all_dtypes_all_ops_exact(base_config()); }

// The same with the udp threads busy-polling (busy_poll_us; dpdk ignores it): between bursts
// a thread polls instead of sleeping, and nothing is lost or taken twice.
TEST_P(DataplaneReduce, AllDtypesAllOpsExactWhileBusyPolling) {
  Config cfg = base_config();
  cfg.busy_poll_us = 20000;
  all_dtypes_all_ops_exact(cfg);
}

void DataplaneReduce::all_dtypes_all_ops_exact(const Config& cfg) {
  start(cfg);
  for (uint32_t n : {2u, 3u}) {
    JoinSpec spec;
    spec.job_key = 100 + n;
    spec.requested_slots = 8;
    spec.payload_bytes = 64;  // several packets per collective, every slot and both queues
    auto workers = join_job(spec, n);
    auto w = ptrs(workers);
    std::mt19937_64 rng(n);
    uint64_t seq = 0;
    uint64_t retransmits = 0;
    for (int d = 0; d < kNumDTypes; ++d) {
      for (int o = 0; o < kNumOps; ++o) {
        const auto dt = static_cast<DType>(d);
        const auto op = static_cast<Op>(o);
        const size_t count = 100;
        std::vector<std::vector<uint8_t>> in;
        for (uint32_t r = 0; r < n; ++r) in.push_back(exact_values(dt, count, rng));
        std::vector<std::vector<uint8_t>> out;
        ASSERT_TRUE(run_allreduce(w, dt, op, count, in, &seq, &out, &retransmits))
            << dtype_name(dt) << " " << op_name(op);
        const auto expect = reference(dt, op, in, count);
        for (uint32_t r = 0; r < n; ++r) {
          EXPECT_EQ(out[r], expect)
              << "N=" << n << " " << dtype_name(dt) << " " << op_name(op) << " rank " << r;
        }
      }
    }
  }
  EXPECT_EQ(drops("duplicate") + drops("stale_generation") + drops("slot_mismatch"), 0u);
}

// Deterministic mode: random floats, ranks sending in reverse order, bitwise equal to the
// rank-order reference.
TEST_P(DataplaneReduce, DeterministicModeMatchesRankOrderReference) {
  start();
  JoinSpec spec;
  spec.job_key = 7;
  spec.flags = proto::kJoinFlagDeterministic;
  spec.payload_bytes = 128;
  auto workers = join_job(spec, 4);
  EXPECT_EQ(workers[0]->ack.flags, proto::kJoinFlagDeterministic);
  auto w = ptrs(workers);
  std::mt19937_64 rng(99);
  uint64_t seq = 0;
  uint64_t retransmits = 0;
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBfloat16,
                   DType::kFloat8e4m3, DType::kFloat8e5m2}) {
    for (Op op : {Op::kSum, Op::kProd}) {
      const size_t count = 300;
      std::vector<std::vector<uint8_t>> in;
      for (int r = 0; r < 4; ++r) in.push_back(random_floats(dt, count, rng));
      for (bool reverse : {false, true}) {
        std::vector<std::vector<uint8_t>> out;
        RunOptions opt;
        opt.reverse_rank_order = reverse;
        ASSERT_TRUE(run_allreduce(w, dt, op, count, in, &seq, &out, &retransmits, opt));
        const auto expect = reference(dt, op, in, count);
        for (int r = 0; r < 4; ++r) {
          EXPECT_EQ(out[r], expect) << dtype_name(dt) << " " << op_name(op) << " rank " << r;
        }
      }
    }
  }
}

TEST_P(DataplaneReduce, RetransmittedContributionIsNotCountedTwice) {
  start();
  JoinSpec spec;
  spec.job_key = 8;
  auto workers = join_job(spec, 2);
  const std::vector<int32_t> a{1, 2, 3}, b{10, 20, 30};
  auto bytes = [](const std::vector<int32_t>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
  };
  ASSERT_TRUE(workers[0]->send_contrib(0, 0, 0, DType::kInt32, Op::kSum, bytes(a)));
  ASSERT_TRUE(workers[0]->send_contrib(0, 0, 0, DType::kInt32, Op::kSum, bytes(a), true));
  // The duplicate must have been handled before rank 1 completes the slot.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (drops("duplicate") != 1 && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_TRUE(workers[1]->send_contrib(0, 0, 0, DType::kInt32, Op::kSum, bytes(b)));
  for (auto& w : workers) {
    auto d = w->udp.recv(2000);
    ASSERT_TRUE(d.has_value());
    ASSERT_EQ(d->size(), 48u + 12);
    int32_t r[3];
    std::memcpy(r, d->data() + 48, 12);
    EXPECT_EQ(r[0], 11);
    EXPECT_EQ(r[1], 22);
    EXPECT_EQ(r[2], 33);
  }
  EXPECT_EQ(drops("duplicate"), 1u);
}

TEST_P(DataplaneReduce, LostResultIsServedAgainToTheAskerOnly) {
  start();
  JoinSpec spec;
  spec.job_key = 9;
  auto workers = join_job(spec, 2);
  const std::vector<float> a{1.5f, 2.f}, b{0.25f, -1.f};
  auto bytes = [](const std::vector<float>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
  };
  const auto sent0 = std::chrono::steady_clock::now();
  workers[0]->send_contrib(1, 0, 0, DType::kFloat32, Op::kSum, bytes(a));
  workers[1]->send_contrib(1, 0, 0, DType::kFloat32, Op::kSum, bytes(b));
  auto first0 = workers[0]->udp.recv(2000);
  const auto result0 = std::chrono::steady_clock::now();
  auto lost1 = workers[1]->udp.recv(2000);  // "lost": rank 1 pretends it never came
  ASSERT_TRUE(first0 && lost1);
  workers[1]->send_contrib(1, 0, 0, DType::kFloat32, Op::kSum, bytes(b), true);
  auto again = workers[1]->udp.recv(2000);
  ASSERT_TRUE(again.has_value());
  proto::DataHeader h;
  const uint8_t* p = nullptr;
  ASSERT_EQ(proto::parse_data(*again, 61440, &h, &p), proto::DropReason::kOk);
  EXPECT_EQ(h.flags, proto::kFlagRetransmit);
  EXPECT_EQ(h.slot, 1u);
  EXPECT_TRUE(std::equal(again->begin() + 48, again->end(), first0->begin() + 48));
  EXPECT_FALSE(workers[0]->udp.recv(100).has_value());  // rank 0 gets no extra copy
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_dataplane_retransmits_served_total"), 1u);
  EXPECT_EQ(metric_sum(m, "conflux_dataplane_slots_completed_total"), 1u);
  EXPECT_EQ(metric_sum(m, "conflux_job_results_sent_total"), 3u);
  // The job's gather time: from the slot's first contribution to its last, so within what
  // this test saw between sending the first and receiving the result.
  const std::string gather = "conflux_job_gather_seconds_total{conflux_job=\"";
  const size_t at = m.find(gather);
  ASSERT_NE(at, std::string::npos) << m;
  const double seconds = std::stod(m.substr(m.find("} ", at) + 2));
  EXPECT_GE(seconds, 0.0);
  EXPECT_LE(seconds, std::chrono::duration<double>(result0 - sent0).count());
}

// Owned results (SPEC.md §4): the owner alone gets the payload, every other rank a 48-byte
// acknowledgement, on both the completion fan-out and a re-served result.
TEST_P(DataplaneReduce, OwnedResultReachesOnlyItsOwner) {
  start();
  JoinSpec spec;
  spec.job_key = 10;
  auto workers = join_job(spec, 3);
  const std::vector<int32_t> in[3] = {{1, 2, 3, 4}, {10, 20, 30, 40}, {100, 200, 300, 400}};
  for (uint32_t slot : {2u, 3u}) {  // both queues of a two-queue daemon
    const int owner = static_cast<int>(slot) - 1;
    for (int r = 0; r < 3; ++r) {
      const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(in[r].data()), 16);
      ASSERT_TRUE(
          workers[r]->send_contrib(slot, 0, 0, DType::kInt32, Op::kSum, bytes, false, owner));
    }
    for (int r = 0; r < 3; ++r) {
      auto d = workers[r]->udp.recv(2000);
      ASSERT_TRUE(d.has_value()) << "slot " << slot << " rank " << r;
      proto::DataHeader h;
      const uint8_t* p = nullptr;
      ASSERT_EQ(proto::parse_data(*d, 61440, &h, &p), proto::DropReason::kOk);
      EXPECT_EQ(h.slot, slot);
      EXPECT_EQ(h.count, 4u);
      if (r == owner) {
        ASSERT_EQ(d->size(), 48u + 16);
        EXPECT_EQ(h.flags, 0);
        int32_t v[4];
        std::memcpy(v, p, 16);
        EXPECT_EQ(v[0], 111);
        EXPECT_EQ(v[3], 444);
      } else {
        EXPECT_EQ(d->size(), 48u);
        EXPECT_EQ(h.flags, proto::kFlagAck);
      }
    }
  }
  // Rank 2 lost its acknowledgement of slot 2 (owner 1): it gets the acknowledgement again.
  const std::span<const uint8_t> b2(reinterpret_cast<const uint8_t*>(in[2].data()), 16);
  ASSERT_TRUE(workers[2]->send_contrib(2, 0, 0, DType::kInt32, Op::kSum, b2, true, 1));
  auto again = workers[2]->udp.recv(2000);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->size(), 48u);
  // A contribution naming no rank of the job is dropped.
  ASSERT_TRUE(workers[0]->send_contrib(4, 0, 0, DType::kInt32, Op::kSum, b2, false, 3));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (drops("bad_contributor") != 1 && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_EQ(drops("bad_contributor"), 1u);
  for (auto& w : workers) EXPECT_FALSE(w->udp.recv(100).has_value());
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_dataplane_slots_completed_total"), 2u);
  // Two slots x (one result + two acknowledgements), plus the re-served acknowledgement.
  EXPECT_EQ(metric_sum(m, "conflux_job_results_sent_total"), 7u);
}

// A daemon dropping, duplicating and reordering received datagrams: results stay exact
// thanks to the workers' retransmissions, the bitmap and the COMPLETE bank.
TEST_P(DataplaneReduce, ExactUnderInjectedFaults) {
  Config cfg = base_config();
  cfg.fault_drop = 0.05;
  cfg.fault_dup = 0.05;
  cfg.fault_reorder = 0.05;
  start(cfg);
  JoinSpec spec;
  spec.job_key = 10;
  spec.payload_bytes = 256;
  auto workers = join_job(spec, 3);
  auto w = ptrs(workers);
  std::mt19937_64 rng(5);
  uint64_t seq = 0;
  uint64_t retransmits = 0;
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < 3; ++r) in.push_back(exact_values(DType::kFloat32, 4000, rng));
  std::vector<std::vector<uint8_t>> out;
  RunOptions opt;
  opt.rto_ms = 20;
  ASSERT_TRUE(run_allreduce(w, DType::kFloat32, Op::kSum, 4000, in, &seq, &out, &retransmits, opt));
  const auto expect = reference(DType::kFloat32, Op::kSum, in, 4000);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r], expect);
  EXPECT_GT(retransmits, 0u);
  EXPECT_GT(metric_sum(metrics(), "conflux_dataplane_faults_injected_total"), 0u);
}

// Random loss on a real wire: nftables on the workers' input hook silently drops 5% of the
// datagrams coming from the daemon (results), as a lossy fabric would. Results stay exact: the
// workers resend after a timeout and the daemon serves the result it keeps. Needs a veth pair
// (root), with every backend: dpdk runs on one anyway, udp gets its own.
TEST_P(DataplaneReduce, ExactUnderRandomLossOnTheWorkersInput) {
  if (const std::string why = use_wire(); !why.empty())
    CONFLUX_SKIP_UNLESS_CI() << "needs a veth pair: " << why;
  start();
  const std::string nft = "nft add ";
  ASSERT_TRUE(wire()->run_in_worker(nft + "table inet cfxloss"));
  struct DropTable {  // the dpdk wire outlives the test
    VethTopology* w;
    ~DropTable() { w->run_in_worker("nft delete table inet cfxloss"); }
  } drop_table{wire()};
  ASSERT_TRUE(wire()->run_in_worker(
      nft + "chain inet cfxloss input '{ type filter hook input priority 0; }'"));
  ASSERT_TRUE(wire()->run_in_worker(nft + "rule inet cfxloss input 'ip saddr " +
                                    wire()->agg_ip_text() +
                                    " meta l4proto udp numgen random mod 100 < 5 drop'"));
  JoinSpec spec;
  spec.job_key = 12;
  spec.payload_bytes = 256;
  auto workers = join_job(spec, 3);
  auto w = ptrs(workers);
  std::mt19937_64 rng(12);
  uint64_t seq = 0, retransmits = 0;
  RunOptions opt;
  opt.rto_ms = 20;
  for (DType dt : {DType::kFloat32, DType::kBfloat16, DType::kInt32}) {
    for (Op op : {Op::kSum, Op::kMax}) {
      const size_t count = 3000;
      std::vector<std::vector<uint8_t>> in;
      for (int r = 0; r < 3; ++r) in.push_back(exact_values(dt, count, rng));
      std::vector<std::vector<uint8_t>> out;
      ASSERT_TRUE(run_allreduce(w, dt, op, count, in, &seq, &out, &retransmits, opt))
          << dtype_name(dt) << " " << op_name(op);
      const auto expect = reference(dt, op, in, count);
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(out[r], expect) << dtype_name(dt) << " " << op_name(op) << " rank " << r;
      }
    }
  }
  EXPECT_GT(retransmits, 0u);
  EXPECT_GT(metric_sum(metrics(), "conflux_dataplane_retransmits_served_total"), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, DataplaneReduce, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
