// SPDX-License-Identifier: Apache-2.0
// Unit tests of conflux-nccl-driver's own logic: the input generator and verifier (a driver
// whose check cannot fail proves nothing) and the size/flag parsing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "conflux/common/reduce.h"
#include "driver/chunks.h"
#include "driver/data.h"
#include "driver/idle.h"
#include "driver/options.h"
#include "driver/pxn.h"
#include "util/proc.h"

namespace conflux::driver {
namespace {

// Reduces all ranks' inputs in rank order with the library's reference (per-step rounding
// through reduce_inplace, as the ring does), which exact inputs must make exact.
std::vector<unsigned char> ring_like_result(const InputSpec& s, size_t count) {
  const size_t es = dtype_size(s.dtype);
  std::vector<unsigned char> acc(count * es), in(count * es);
  fill_input(s, 0, 0, count, acc.data());
  for (int r = 1; r < s.nranks; ++r) {
    fill_input(s, r, 0, count, in.data());
    reduce::reduce_inplace(s.dtype, s.op, acc.data(), in.data(), count);
  }
  return acc;
}

struct Case {
  int dtype;
  int op;
  int nranks;
};

class ExactInputs : public ::testing::TestWithParam<Case> {};

TEST_P(ExactInputs, RankOrderReductionVerifiesWithZeroWrong) {
  const Case c = GetParam();
  InputSpec s{static_cast<DType>(c.dtype), static_cast<Op>(c.op), c.nranks, 7, InputKind::kExact};
  const size_t count = 3001;
  auto res = ring_like_result(s, count);
  EXPECT_EQ(count_wrong(s, res.data(), count), 0u);
  // Reverse order (another ring position) must be just as exact.
  const size_t es = dtype_size(s.dtype);
  std::vector<unsigned char> acc(count * es), in(count * es);
  fill_input(s, c.nranks - 1, 0, count, acc.data());
  for (int r = c.nranks - 2; r >= 0; --r) {
    fill_input(s, r, 0, count, in.data());
    reduce::reduce_inplace(s.dtype, s.op, acc.data(), in.data(), count);
  }
  EXPECT_EQ(count_wrong(s, acc.data(), count), 0u);
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (int t = 0; t < kNumDTypes; ++t)
    for (int o = 0; o < kNumOps; ++o)
      for (int n : {1, 2, 3, 4, 9, 33}) v.push_back(Case{t, o, n});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllTypesOpsRanks, ExactInputs, ::testing::ValuesIn(all_cases()));

TEST(Verifier, DetectsOneCorruptedElementPerType) {
  for (int t = 0; t < kNumDTypes; ++t) {
    InputSpec s{static_cast<DType>(t), Op::kSum, 4, 3, InputKind::kExact};
    const size_t count = 257, es = dtype_size(s.dtype);
    auto res = ring_like_result(s, count);
    ASSERT_EQ(count_wrong(s, res.data(), count), 0u) << dtype_name(s.dtype);
    res[100 * es] ^= 0x40;  // flip an exponent/high-value bit of element 100
    EXPECT_EQ(count_wrong(s, res.data(), count), 1u) << dtype_name(s.dtype);
  }
}

TEST(Verifier, PoisonedBufferIsAllWrongForFloats) {
  for (DType t : {DType::kFloat16, DType::kFloat32, DType::kBfloat16, DType::kFloat8e4m3,
                  DType::kFloat8e5m2, DType::kFloat64}) {
    InputSpec s{t, Op::kMax, 2, 1, InputKind::kExact};
    std::vector<unsigned char> buf(64 * dtype_size(t));
    poison(t, buf.data(), 64);
    EXPECT_EQ(count_wrong(s, buf.data(), 64), 64u) << dtype_name(t);
  }
}

TEST(Verifier, RandomInputsRequireTheRankOrderBits) {
  InputSpec s{DType::kFloat32, Op::kSum, 5, 11, InputKind::kRandom};
  const size_t count = 5000;
  std::vector<float> in(count), ref(count);
  std::vector<std::vector<float>> all(5, std::vector<float>(count));
  std::vector<const void*> srcs;
  for (int r = 0; r < 5; ++r) {
    fill_input(s, r, 0, count, all[r].data());
    srcs.push_back(all[r].data());
  }
  reduce::reduce_n(s.dtype, s.op, ref.data(), srcs.data(), 5, count, nullptr);
  EXPECT_EQ(count_wrong(s, ref.data(), count), 0u);
  // Summing in the reverse order changes some low bits: the bitwise check must notice.
  std::vector<float> rev(all[4]);
  for (int r = 3; r >= 0; --r)
    reduce::reduce_inplace(s.dtype, s.op, rev.data(), all[r].data(), count);
  EXPECT_GT(count_wrong(s, rev.data(), count), 0u);
}

TEST(Inputs, DeterministicAndRankDependent) {
  InputSpec s{DType::kInt32, Op::kSum, 4, 5, InputKind::kExact};
  std::vector<int32_t> a(100), b(100), c(100), tail(10);
  fill_input(s, 1, 0, 100, a.data());
  fill_input(s, 1, 0, 100, b.data());
  fill_input(s, 2, 0, 100, c.data());
  fill_input(s, 1, 90, 10, tail.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(0, std::memcmp(tail.data(), a.data() + 90, 10 * sizeof(int32_t)));
}

TEST(Options, BytesWithSuffixes) {
  size_t v = 0;
  EXPECT_TRUE(parse_bytes("4", &v));
  EXPECT_EQ(v, 4u);
  EXPECT_TRUE(parse_bytes("64K", &v));
  EXPECT_EQ(v, 65536u);
  EXPECT_TRUE(parse_bytes("64M", &v));
  EXPECT_EQ(v, size_t{64} << 20);
  EXPECT_TRUE(parse_bytes("2G", &v));
  EXPECT_EQ(v, size_t{2} << 30);
  EXPECT_FALSE(parse_bytes("", &v));
  EXPECT_FALSE(parse_bytes("12X", &v));
  EXPECT_FALSE(parse_bytes("-1", &v));
  EXPECT_FALSE(parse_bytes("99999999999999999999G", &v));
}

TEST(Options, SizeListAndFlags) {
  const char* argv[] = {"d",         "--minbytes",    "4",  "-e",         "1K", "--stepfactor=4",
                        "--modes",   "ring,collnet",  "-d", "float,bf16", "-o", "all",
                        "--inplace", "--mixed-chunks"};
  Options o;
  ASSERT_TRUE(parse_options(14, const_cast<char**>(argv), &o).ok());
  EXPECT_EQ(size_list(o), (std::vector<size_t>{4, 16, 64, 256, 1024}));
  EXPECT_EQ(o.modes.size(), 2u);
  EXPECT_EQ(o.dtypes.size(), 2u);
  EXPECT_EQ(o.ops.size(), 4u);
  EXPECT_TRUE(o.inplace);
  EXPECT_TRUE(o.mixed_chunks);
  const char* bad[] = {"d", "--modes", "tree"};
  Options o2;
  Status st = parse_options(3, const_cast<char**>(bad), &o2);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--modes"), std::string::npos);
}

TEST(Options, TreeLeavesAndCloseStagger) {
  const char* argv[] = {"d", "--nranks", "4", "--tree-leaves", "3,1", "--close-stagger-ms", "50"};
  Options o;
  ASSERT_TRUE(parse_options(7, const_cast<char**>(argv), &o).ok());
  EXPECT_EQ(o.tree_leaves, (std::vector<uint32_t>{3, 1}));
  EXPECT_EQ(o.close_stagger_ms, 50);
  const char* sum_off[] = {"d", "--nranks", "4", "--tree-leaves", "2,1"};
  Options o2;
  Status st = parse_options(5, const_cast<char**>(sum_off), &o2);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--tree-leaves"), std::string::npos) << st.message();
  const char* zero[] = {"d", "--tree-leaves", "2,0"};
  Options o3;
  st = parse_options(3, const_cast<char**>(zero), &o3);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--tree-leaves"), std::string::npos) << st.message();
}

TEST(Options, ServiceCollNetOnlyWithCollNetAllReduceModes) {
  const char* argv[] = {"d", "--modes", "collnet,hybrid", "--service-collnet", "3"};
  Options o;
  ASSERT_TRUE(parse_options(5, const_cast<char**>(argv), &o).ok());
  EXPECT_EQ(o.service_collnet, 3);
  for (const char* mode : {"ring", "reducescatter", "pxn"}) {
    const char* other[] = {"d", "--modes", mode, "--service-collnet", "1"};
    Options o2;
    const Status st = parse_options(5, const_cast<char**>(other), &o2);
    EXPECT_FALSE(st.ok()) << mode;
    EXPECT_NE(st.message().find("--service-collnet"), std::string::npos) << st.message();
  }
  const char* many[] = {"d", "--service-collnet", "17"};
  Options o3;
  EXPECT_FALSE(parse_options(3, const_cast<char**>(many), &o3).ok());
}

// The requests of one AllReduce cover it in order, without gap or overlap, for every way
// the end can fall: uniform, and --mixed-chunks (small, big, small, ...) ending on an exact
// period, inside a small request, inside a big one.
TEST(ChunkPlan, RequestsCoverTheMessageInOrder) {
  for (const size_t small : {size_t{0}, size_t{3}}) {
    for (size_t count = 1; count <= 40; ++count) {
      const ChunkPlan p{count, 7, small};
      SCOPED_TRACE("count " + std::to_string(count) + " small " + std::to_string(small));
      size_t at = 0;
      for (size_t i = 0; i < p.requests(); ++i) {
        ASSERT_EQ(p.first(i), at);
        ASSERT_GT(p.elems(i), 0u);
        ASSERT_LE(p.elems(i), (small > 0 && i % 2 == 0) ? small : size_t{7});
        if (i + 1 < p.requests()) {
          EXPECT_EQ(p.elems(i),
                    (small > 0 && i % 2 == 0) ? small : size_t{7});  // only the last is short
        }
        at += p.elems(i);
      }
      EXPECT_EQ(at, count);
    }
  }
  const ChunkPlan mixed{25, 7, 3};  // 3 7 | 3 7 | 3 2
  EXPECT_EQ(mixed.requests(), 6u);
  EXPECT_EQ(mixed.first(5), 23u);
  EXPECT_EQ(mixed.elems(5), 2u);
}

// The pacing of a polling loop (idle.h): --idle-sleep-us at first and for requests completing
// less than 8 x that apart; longer only after a quarter of the wait so far and an eighth of
// the recent gaps between progress, and never past kMaxIdlePauseUs.
TEST(IdlePacer, SleepsLongerOnlyWhileCompletionsAreFarApart) {
  // Just after progress, or with no gap known yet: the configured sleep.
  EXPECT_EQ(idle_pause_us(50, 0, 8000), 50);
  EXPECT_EQ(idle_pause_us(50, 4000, 0), 50);
  // Small requests (gap 300 us): never more than the configured sleep.
  EXPECT_EQ(idle_pause_us(50, 250, 300), 50);
  // A 1 MiB chunk every 8 ms: a quarter of the wait, then an eighth of the gap.
  EXPECT_EQ(idle_pause_us(50, 1000, 8000), 250);
  EXPECT_EQ(idle_pause_us(50, 6000, 8000), 1000);
  // A gap of 80 ms: capped.
  EXPECT_EQ(idle_pause_us(50, 40000, 80000), kMaxIdlePauseUs);
  // A configured sleep above the cap is kept as it is.
  EXPECT_EQ(idle_pause_us(5000, 40000, 80000), 5000);
}

// The host's busy time over a window is CPUs x wall time less the idle time: a thread that
// spins through the window shows (other load only adds to it), and no window shows more than
// every CPU busy.
TEST(HostCpuWindow, CountsASpinningThread) {
  tools::HostCpuWindow w;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  volatile uint64_t spins = 0;
  while (std::chrono::steady_clock::now() < until) spins = spins + 1;
  w.stop();
  const double busy = w.per_gb(1.0);
  ASSERT_GE(busy, 0.0) << "/proc/stat unreadable";
  EXPECT_GE(busy, 0.5) << "a 600 ms spin";
  EXPECT_LE(busy, static_cast<double>(std::thread::hardware_concurrency()) * w.seconds() + 0.05);
  EXPECT_EQ(w.per_gb(0.0), -1.0);
}

// NCCL's net transport (src/transport/net.cc): a plugin with maxRecvs > 1 gets one connection
// per peer shared by every sender, its receives grouped by at most maxRecvs parts; maxRecvs 1
// gets a connection per sender and irecvs of one part.
TEST(PxnLayout, FollowsNcclSharingRuleForMaxRecvs) {
  PxnLayout l = pxn_layout(4, 8);
  EXPECT_EQ(l.conns, 1);
  EXPECT_EQ(l.sender_conn, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(l.group_parts, (std::vector<int>{4}));
  EXPECT_EQ(l.group_conn, (std::vector<int>{0}));
  l = pxn_layout(4, 1);
  EXPECT_EQ(l.conns, 4);
  EXPECT_EQ(l.sender_conn, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(l.group_first, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(l.group_parts, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(l.group_conn, (std::vector<int>{0, 1, 2, 3}));
  l = pxn_layout(4, 3);  // still shared: groups of 3 and 1 on the one connection
  EXPECT_EQ(l.conns, 1);
  EXPECT_EQ(l.group_first, (std::vector<int>{0, 3}));
  EXPECT_EQ(l.group_parts, (std::vector<int>{3, 1}));
  EXPECT_EQ(l.group_conn, (std::vector<int>{0, 0}));
  l = pxn_layout(2, 2);
  EXPECT_EQ(l.conns, 1);
  EXPECT_EQ(l.group_parts, (std::vector<int>{2}));
  EXPECT_EQ(describe_pxn_layout(pxn_layout(2, 1), 1),
            "maxRecvs 1: 2 senders per peer over 2 connections (one per sender), 2 receive "
            "group(s) of 1 part(s) per irecv");
}

}  // namespace
}  // namespace conflux::driver
