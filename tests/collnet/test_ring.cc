// SPDX-License-Identifier: Apache-2.0
// RingAllreduce and ring_allgather over the real p2p transport, N ranks as threads.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "collnet/coll_comm.h"
#include "collnet/result_tails.h"
#include "collnet/ring_allreduce.h"
#include "collnet/ring_exchange.h"
#include "conflux/common/reduce.h"
#include "loopback_ring.h"

namespace conflux::collnet {
namespace {

using namespace std::chrono_literals;

// Runs one ring operation per rank (threads) and returns each rank's output.
std::vector<std::vector<uint8_t>> run(Ring& ring, const std::vector<std::vector<uint8_t>>& in,
                                      size_t count, DType t, Op op, size_t block, int inflight,
                                      bool in_place, const RingPlan& plan = {}) {
  const int n = int(in.size());
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(count * dtype_size(t)));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<uint8_t> scratch(block * inflight);
      if (in_place) out[r] = in[r];
      RingAllreduce op_(ring.links(r), in_place ? out[r].data() : in[r].data(), out[r].data(),
                        count, t, op, 7, block, inflight, scratch.data(), plan);
      bool done = false;
      while (!done) ASSERT_EQ(op_.progress(&done), net::Status::kOk);
    });
  }
  for (auto& th : threads) th.join();
  return out;
}

class RingTest : public ::testing::TestWithParam<int> {};

TEST_P(RingTest, Int32SumEverySplitIsExact) {
  const int n = GetParam();
  Ring ring(n);
  std::mt19937 rng(n);
  for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{1000}, size_t{65537}}) {
    for (bool in_place : {false, true}) {
      std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * 4));
      std::vector<int32_t> expect(count, 0);
      for (int r = 0; r < n; ++r) {
        auto* p = reinterpret_cast<int32_t*>(in[r].data());
        for (size_t i = 0; i < count; ++i) {
          p[i] = int32_t(rng());
          expect[i] = int32_t(uint32_t(expect[i]) + uint32_t(p[i]));
        }
      }
      // A small block forces many blocks per segment and a full window.
      const auto out = run(ring, in, count, DType::kInt32, Op::kSum, 4096, 4, in_place);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(std::memcmp(out[r].data(), expect.data(), count * 4), 0)
            << "rank " << r << " count " << count << " in_place " << in_place;
      }
    }
  }
}

TEST_P(RingTest, EveryDtypeAndOpAgreesOnEveryRank) {
  const int n = GetParam();
  Ring ring(n);
  std::mt19937 rng(99);
  const size_t count = 3001;
  for (int ti = 0; ti < kNumDTypes; ++ti) {
    for (int oi = 0; oi < kNumOps; ++oi) {
      const auto t = DType(ti);
      const auto op = Op(oi);
      const size_t es = dtype_size(t);
      std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(count * es));
      for (auto& v : in) {
        // 1 or 2: every partial sum (<= 8) and product (a power of two) is exact in every
        // type, fp8 included, so hop-by-hop rounding and one final rounding agree.
        for (size_t i = 0; i < count; ++i) {
          const float f = float(rng() % 2 + 1);
          switch (t) {
            case DType::kFloat16: {
              uint16_t h = reduce::float_to_half(f);
              std::memcpy(&v[i * 2], &h, 2);
              break;
            }
            case DType::kBfloat16: {
              uint16_t h = reduce::float_to_bf16(f);
              std::memcpy(&v[i * 2], &h, 2);
              break;
            }
            case DType::kFloat8e4m3:
              v[i] = reduce::float_to_fp8e4m3(f);
              break;
            case DType::kFloat8e5m2:
              v[i] = reduce::float_to_fp8e5m2(f);
              break;
            case DType::kFloat32:
              std::memcpy(&v[i * 4], &f, 4);
              break;
            case DType::kFloat64: {
              double d = f;
              std::memcpy(&v[i * 8], &d, 8);
              break;
            }
            default: {
              uint64_t x = uint64_t(f);
              std::memcpy(&v[i * es], &x, es);
            }  // little-endian
          }
        }
      }
      const auto out = run(ring, in, count, t, op, 1024, 3, false);
      // Expected: the same values reduced in any order (all exact here).
      std::vector<const void*> srcs;
      for (auto& v : in) srcs.push_back(v.data());
      std::vector<uint8_t> expect(count * es), scratch(count * 8);
      reduce::reduce_n(t, op, expect.data(), srcs.data(), n, count, scratch.data());
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(std::memcmp(out[r].data(), expect.data(), expect.size()), 0)
            << dtype_name(t) << " " << op_name(op) << " rank " << r;
      }
    }
  }
}

TEST_P(RingTest, AllgatherCollectsEveryRecord) {
  const int n = GetParam();
  Ring ring(n);
  std::vector<std::vector<uint64_t>> all(n, std::vector<uint64_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const uint64_t mine = 1000 + r;
      ASSERT_EQ(ring_allgather(ring.next[r].get(), ring.prev[r].get(), r, n, &mine, all[r].data(),
                               sizeof mine, 5s),
                net::Status::kOk);
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < n; ++i) EXPECT_EQ(all[r][i], uint64_t(1000 + i)) << r;
  }
}

// The split exchange's allgather, advanced by polling: several rounds back to back on one
// ring (each rank with a different record per round), every rank polling at its own pace.
TEST_P(RingTest, AsyncAllgatherRoundsCollectEveryRecord) {
  const int n = GetParam();
  Ring ring(n);
  constexpr int kRounds = 5;
  std::vector<std::vector<std::vector<uint64_t>>> got(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      AsyncRingAllgather ag(ring.next[r].get(), ring.prev[r].get(), r, n, sizeof(uint64_t));
      for (int round = 0; round < kRounds; ++round) {
        const uint64_t mine = 1000 * round + r;
        ag.start(&mine);
        bool done = false;
        while (!done) {
          ASSERT_EQ(ag.progress(&done), net::Status::kOk);
          if (r % 2 == 1) std::this_thread::sleep_for(100us);  // slower pollers
        }
        const auto* all = reinterpret_cast<const uint64_t*>(ag.all());
        got[r].emplace_back(all, all + n);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(got[r].size(), size_t{kRounds});
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < n; ++i) EXPECT_EQ(got[r][round][i], uint64_t(1000 * round + i));
    }
  }
}

// Windows of an n x per_rank buffer as NCCL's CollNetDirect hands them: whole, starting and
// ending inside a rank's block, inside one block only, and empty for some ranks.
std::vector<CollWindow> windows(int n, size_t per_rank, size_t esize) {
  const size_t b = per_rank * esize, total = b * size_t(n);
  return {{b, 0, total},
          {b, esize * 3, total - esize * 5},
          {b, b + esize, b - esize * 2},
          {b, b - esize, esize * 2},
          {b, 0, esize}};
}

TEST(OwnedRanges, SplitTheWindowByBlockOwner) {
  // 3 ranks x 10 four-byte elements; window = elements [5, 25).
  const auto owned = owned_ranges({40, 20, 80}, 3, 4);
  ASSERT_EQ(owned.size(), 3u);
  EXPECT_EQ(owned[0], (std::pair<size_t, size_t>{0, 5}));
  EXPECT_EQ(owned[1], (std::pair<size_t, size_t>{5, 15}));
  EXPECT_EQ(owned[2], (std::pair<size_t, size_t>{15, 20}));
  // A window inside rank 1's block leaves ranks 0 and 2 empty.
  const auto inner = owned_ranges({40, 44, 8}, 3, 4);
  EXPECT_EQ(inner[0].first, inner[0].second);
  EXPECT_EQ(inner[1], (std::pair<size_t, size_t>{0, 2}));
  EXPECT_EQ(inner[2].first, inner[2].second);
}

TEST_P(RingTest, ReduceScatterLeavesEachOwnerItsSums) {
  const int n = GetParam();
  Ring ring(n);
  std::mt19937 rng(7 + n);
  const size_t per_rank = 1031;
  for (const CollWindow& w : windows(n, per_rank, 4)) {
    const size_t count = w.bytes / 4;
    std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(w.bytes));
    std::vector<uint32_t> expect(count, 0);
    for (auto& v : in) {
      auto* p = reinterpret_cast<uint32_t*>(v.data());
      for (size_t i = 0; i < count; ++i) expect[i] += (p[i] = uint32_t(rng()));
    }
    const auto owned = owned_ranges(w, n, 4);
    const auto out = run(ring, in, count, DType::kUint32, Op::kSum, 1024, 3, false,
                         RingPlan::by_owner(owned, true, false));
    for (int r = 0; r < n; ++r) {
      const auto [lo, hi] = owned[size_t(r)];
      ASSERT_EQ(std::memcmp(out[r].data() + lo * 4, &expect[lo], (hi - lo) * 4), 0)
          << "rank " << r << " window " << w.offset << "+" << w.bytes;
    }
  }
}

TEST_P(RingTest, AllGatherGivesEveryRankEveryOwnersBytes) {
  const int n = GetParam();
  Ring ring(n);
  std::mt19937 rng(11 + n);
  const size_t per_rank = 2053;
  for (const CollWindow& w : windows(n, per_rank, 1)) {
    std::vector<uint8_t> whole(w.bytes);
    for (auto& b : whole) b = uint8_t(rng());
    const auto owned = owned_ranges(w, n, 1);
    // Each rank starts with its own bytes only; the rest is poison.
    std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(w.bytes, 0xEE));
    for (int r = 0; r < n; ++r) {
      const auto [lo, hi] = owned[size_t(r)];
      std::memcpy(in[r].data() + lo, whole.data() + lo, hi - lo);
    }
    const auto out = run(ring, in, w.bytes, DType::kUint8, Op::kSum, 512, 4, true,
                         RingPlan::by_owner(owned, false, true));
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(out[r], whole) << "rank " << r << " window " << w.offset << "+" << w.bytes;
    }
  }
}

TEST_P(RingTest, BroadcastReachesEveryRankFromAnyRoot) {
  const int n = GetParam();
  Ring ring(n);
  for (int root = 0; root < n; ++root) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{100000}}) {
      std::vector<std::vector<uint8_t>> msg(n);
      msg[root].resize(len);
      for (size_t i = 0; i < len; ++i) msg[root][i] = uint8_t(i * 7 + root);
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
          ASSERT_EQ(ring_broadcast(ring.next[r].get(), ring.prev[r].get(), r, n, root, &msg[r],
                                   1 << 20, 5s),
                    net::Status::kOk);
        });
      }
      for (auto& th : threads) th.join();
      for (int r = 0; r < n; ++r) EXPECT_EQ(msg[r], msg[root]) << "root " << root << " rank " << r;
    }
  }
}

TEST(ResultTails, KeepsTheEndsOfTheLastWindowOfResults) {
  ResultTails tails(100);
  std::vector<uint8_t> big(300), a(50, 2), b(60, 3);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i);
  tails.keep(1, big.data(), big.size());
  const auto* t = tails.find(1);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->total, 300u);
  EXPECT_EQ(t->offset, 200u);  // only the last window's worth of a long result
  EXPECT_EQ(std::vector<uint8_t>(t->bytes().begin(), t->bytes().end()),
            std::vector<uint8_t>(big.begin() + 200, big.end()));
  tails.keep(2, a.data(), a.size());
  EXPECT_NE(tails.find(1), nullptr);  // 50 newer bytes do not cover the window yet
  tails.keep(3, b.data(), b.size());
  EXPECT_EQ(tails.find(1), nullptr);  // 110 newer bytes do
  ASSERT_NE(tails.find(2), nullptr);
  EXPECT_EQ(std::vector<uint8_t>(tails.find(2)->bytes().begin(), tails.find(2)->bytes().end()), a);
  EXPECT_EQ(tails.find(3)->offset, 0u);
  EXPECT_EQ(tails.find(4), nullptr);
}

TEST(ResultTails, AdoptsAnEndTheEngineFilledWithoutCopyingIt) {
  ResultTails tails(100);
  EXPECT_EQ(tails.end_bytes(300), 100u);  // a long result: the last window's worth
  EXPECT_EQ(tails.end_bytes(40), 40u);    // a short one: all of it
  std::unique_ptr<uint8_t[]> end(new uint8_t[100]);
  for (size_t i = 0; i < 100; ++i) end[i] = uint8_t(200 + i);
  const uint8_t* where = end.get();
  tails.adopt(7, 300, std::move(end));
  const auto* t = tails.find(7);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->input);
  EXPECT_EQ(t->total, 300u);
  EXPECT_EQ(t->offset, 200u);
  EXPECT_EQ(t->bytes().data(), where);  // the engine's buffer itself
  ASSERT_EQ(t->bytes().size(), 100u);
  EXPECT_EQ(t->bytes()[0], 200);
  EXPECT_EQ(t->bytes()[99], 43);  // 299 mod 256
  // Adopted and copied ends age out together, by the bytes of newer results.
  std::vector<uint8_t> a(60, 1);
  tails.keep(8, a.data(), a.size());
  std::unique_ptr<uint8_t[]> small(new uint8_t[40]());
  tails.adopt(9, 40, std::move(small));
  EXPECT_EQ(tails.find(7), nullptr);  // 100 newer bytes cover the window
  EXPECT_NE(tails.find(8), nullptr);
  EXPECT_EQ(tails.find(9)->offset, 0u);
  tails.adopt(10, 0, nullptr);  // an empty result keeps nothing
  EXPECT_EQ(tails.find(10), nullptr);
}

TEST(ResultTails, KeepsWholeElementsOfAnInputWithWhatReducesIt) {
  ResultTails tails(102);  // not a multiple of 8: the end is cut to 96 bytes, 12 doubles
  std::vector<uint8_t> in(800);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i * 7);
  const std::vector<std::pair<size_t, size_t>> owned{{0, 40}, {40, 100}};
  tails.keep_input(5, in.data(), in.size(), DType::kFloat64, Op::kMax, owned);
  const auto* t = tails.find(5);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->input);
  EXPECT_EQ(t->total, 800u);
  EXPECT_EQ(t->offset, 704u);
  EXPECT_EQ(std::vector<uint8_t>(t->bytes().begin(), t->bytes().end()),
            std::vector<uint8_t>(in.begin() + 704, in.end()));
  EXPECT_EQ(t->dtype, DType::kFloat64);
  EXPECT_EQ(t->op, Op::kMax);
  EXPECT_EQ(t->owned, owned);
  tails.keep(6, in.data(), 102);  // a result end next to it keeps the byte granularity
  EXPECT_FALSE(tails.find(6)->input);
  EXPECT_EQ(tails.find(6)->offset, 0u);
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingTest, ::testing::Values(2, 3, 4));

}  // namespace
}  // namespace conflux::collnet
