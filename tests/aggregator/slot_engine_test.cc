// SPDX-License-Identifier: Apache-2.0
// SlotEngine and JobTable without sockets: the aggregator slot state machine of SPEC.md §4.
#include "aggregator/engine/slot_engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "aggregator/engine/job_table.h"
#include "conflux/common/reduce.h"
#include "gtest/gtest.h"
#include "test_client.h"

namespace conflux::agg {
namespace {

using proto::DataHeader;
using proto::DropReason;

class SlotEngineTest : public ::testing::Test {
 protected:
  static constexpr unsigned kQueues = 2;

  void make_job(uint32_t n_workers, uint32_t slots, bool deterministic = false,
                uint32_t payload = 64) {
    id_ = jobs_.allocate_id();
    JobParams p;
    p.id = id_;
    p.token = 0xfeedULL;
    p.n_workers = n_workers;
    p.slots = slots;
    p.payload_bytes = payload;
    p.deterministic = deterministic;
    for (uint32_t r = 0; r < n_workers; ++r) p.workers.push_back(worker_addr(r));
    jobs_.publish(std::make_unique<Job>(std::move(p), kQueues));
  }

  // A job of 2 ranks, 4 slots and 64-byte payloads whose contributions must be signed with
  // `key` (data MAC, SPEC.md §6), and which signs its results with it.
  void publish_mac_job(uint32_t id, uint64_t token, const proto::DataKey& key) {
    JobParams p;
    p.id = id;
    p.token = token;
    p.n_workers = 2;
    p.slots = 4;
    p.payload_bytes = 64;
    p.workers = {worker_addr(0), worker_addr(1)};
    p.mac_key = key;
    jobs_.publish(std::make_unique<Job>(std::move(p), kQueues));
  }

  // Where rank r registered at join (10.0.0.1:5000+r).
  static sockaddr_in worker_addr(uint32_t r) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x0a000001);
    a.sin_port = htons(static_cast<uint16_t>(5000 + r));
    return a;
  }
  static Source src_of(uint32_t r) { return Source::of(worker_addr(r)); }

  DataHeader hdr(uint16_t c, uint32_t slot, uint32_t gen, uint32_t count = 4,
                 DType dt = DType::kInt32) {
    DataHeader h;
    h.job_id = id_;
    h.job_token = 0xfeedULL;
    h.contributor = c;
    h.slot = slot;
    h.generation = gen;
    h.offset = 0;
    h.count = count;
    h.dtype = dt;
    h.op = Op::kSum;
    return h;
  }

  DropReason contrib(const DataHeader& h, std::vector<int32_t> v) {
    return engine_.on_contrib(h, reinterpret_cast<const uint8_t*>(v.data()), src_of(h.contributor),
                              out_);
  }

  // Entry i as it goes on the wire (a lent payload gathered between header and trailer).
  std::vector<uint8_t> wire_of(size_t i) const {
    std::vector<uint8_t> w;
    out_[i].for_each_part([&](const uint8_t* p, size_t n) { w.insert(w.end(), p, p + n); });
    return w;
  }
  std::vector<int32_t> result_of(size_t i) const {
    const std::vector<uint8_t> w = wire_of(i);
    std::vector<int32_t> v((w.size() - proto::kDataHeaderSize) / 4);
    std::memcpy(v.data(), w.data() + proto::kDataHeaderSize, v.size() * 4);
    return v;
  }
  DataHeader header_of(size_t i) const {
    DataHeader h;
    const uint8_t* p = nullptr;
    EXPECT_EQ(proto::parse_data({out_[i].data, out_[i].len}, 61440, &h, &p), DropReason::kOk);
    return h;
  }

  JobTable jobs_{8, kQueues};
  QueueCounters counters_;
  SlotEngine engine_{jobs_, 0, kQueues, 8192, counters_};
  ResultBatch out_{16, 48 + 8192};
  uint32_t id_ = 0;
};

TEST_F(SlotEngineTest, SumsEveryContributorOnceAndFansOut) {
  make_job(3, 4);
  EXPECT_EQ(contrib(hdr(0, 0, 0), {1, 2, 3, 4}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(2, 0, 0), {10, 20, 30, 40}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(2, 0, 0), {10, 20, 30, 40}), DropReason::kDuplicate);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(contrib(hdr(1, 0, 0), {100, 200, 300, 400}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kAllRanks);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{111, 222, 333, 444}));
  const DataHeader r = header_of(0);
  EXPECT_EQ(r.type, proto::PacketType::kResult);
  EXPECT_EQ(r.flags, 0);
  EXPECT_EQ(r.job_id, id_);
  EXPECT_EQ(r.generation, 0u);
  EXPECT_EQ(counters_.slots_completed.get(), 1u);
  EXPECT_EQ(jobs_.find(id_)->counters(0).drops.get(), 1u);  // the duplicate, counted per job
}

// A backend's own buffers (ResultBatch::Space, as the DPDK dataplane's mbufs): the engine
// writes each result straight into one, the entry names it, a space taken and never
// committed is reused for the next result and given back with the batch, and a space that
// has none left makes the result a send error (the worker asks again) instead of a crash.
struct CountingSpace {
  std::vector<std::unique_ptr<uint8_t[]>> buffers;
  size_t left = 1000, given_back = 0;

  static uint8_t* take(void* ctx, void** handle) {
    auto* s = static_cast<CountingSpace*>(ctx);
    if (s->left == 0) return nullptr;
    --s->left;
    s->buffers.push_back(std::make_unique<uint8_t[]>(48 + 8192));
    *handle = s->buffers.back().get();
    return s->buffers.back().get();
  }
  static void give_back(void* ctx, void* handle) {
    auto* s = static_cast<CountingSpace*>(ctx);
    EXPECT_EQ(handle, s->buffers.back().get());
    ++s->given_back;
  }
  ResultBatch::Space space() { return {this, &take, &give_back}; }
};

TEST_F(SlotEngineTest, ResultsAreWrittenIntoTheBackendsSpace) {
  make_job(2, 4);
  CountingSpace cs;
  {
    ResultBatch out(16, 48 + 8192, cs.space());
    auto send = [&](uint16_t c, uint32_t slot, std::vector<int32_t> v) {
      return engine_.on_contrib(hdr(c, slot, 0), reinterpret_cast<const uint8_t*>(v.data()),
                                src_of(c), out);
    };
    EXPECT_EQ(send(0, 0, {1, 2, 3, 4}), DropReason::kOk);
    EXPECT_EQ(send(1, 0, {10, 20, 30, 40}), DropReason::kOk);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(cs.buffers.size(), 1u);
    EXPECT_EQ(out[0].data, cs.buffers[0].get());
    EXPECT_EQ(out[0].handle, cs.buffers[0].get());
    std::vector<int32_t> got(4);
    std::memcpy(got.data(), out[0].data + proto::kDataHeaderSize, 16);
    EXPECT_EQ(got, (std::vector<int32_t>{11, 22, 33, 44}));
    // The next result takes a new space; a reserve() without a commit keeps its space for
    // the next one, and the batch gives it back when it goes.
    EXPECT_EQ(send(0, 2, {1, 1, 1, 1}), DropReason::kOk);
    EXPECT_EQ(send(1, 2, {2, 2, 2, 2}), DropReason::kOk);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].handle, cs.buffers[1].get());
    uint8_t* pending = out.reserve();
    EXPECT_EQ(pending, cs.buffers[2].get());
    EXPECT_EQ(out.reserve(), pending);
    EXPECT_EQ(cs.buffers.size(), 3u);
    out.clear();  // transmitted: the committed spaces now belong to the backend
    EXPECT_EQ(cs.given_back, 0u);
  }
  EXPECT_EQ(cs.given_back, 1u);
  EXPECT_EQ(cs.buffers.size(), 3u);

  cs.left = 0;  // the pool is empty
  ResultBatch dry(16, 48 + 8192, cs.space());
  const uint64_t errors = counters_.send_errors.get();
  std::vector<int32_t> v{5, 5, 5, 5};
  EXPECT_EQ(
      engine_.on_contrib(hdr(0, 0, 1), reinterpret_cast<const uint8_t*>(v.data()), src_of(0), dry),
      DropReason::kOk);
  EXPECT_EQ(
      engine_.on_contrib(hdr(1, 0, 1), reinterpret_cast<const uint8_t*>(v.data()), src_of(1), dry),
      DropReason::kOk);
  EXPECT_TRUE(dry.empty());
  EXPECT_EQ(counters_.send_errors.get(), errors + 1);
}

TEST_F(SlotEngineTest, GatherTimeIsFromTheFirstContributionToTheLast) {
  // Two generations of slot 2 (queue 0's): the second rank comes 20 ms after the first in each, so
  // the job's gather time is at least 40 ms over 2 completed generations (a lower bound: sleeps
  // only overrun).
  make_job(2, 4);
  for (uint32_t gen = 0; gen < 2; ++gen) {
    contrib(hdr(0, 2, gen), {1, 1, 1, 1});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    contrib(hdr(1, 2, gen), {2, 2, 2, 2});
  }
  ASSERT_EQ(out_.size(), 2u);
  const JobQueueCounters& c = jobs_.find(id_)->counters(0);
  EXPECT_EQ(c.slots_completed.get(), 2u);
  EXPECT_GE(c.gather_ns.get(), 40'000'000u);
  EXPECT_LT(c.gather_ns.get(), 10'000'000'000u);
  EXPECT_EQ(counters_.gather_ns.get(), c.gather_ns.get());  // the thread's, over all jobs
  // A generation whose contributions come back to back adds little.
  const uint64_t before = c.gather_ns.get();
  contrib(hdr(0, 0, 0), {1, 1, 1, 1});
  contrib(hdr(1, 0, 0), {1, 1, 1, 1});
  EXPECT_EQ(c.slots_completed.get(), 3u);
  EXPECT_LT(c.gather_ns.get() - before, 20'000'000u);
}

TEST_F(SlotEngineTest, CompleteBankResendsToTheAskerOnly) {
  make_job(2, 4);
  contrib(hdr(0, 2, 0), {1, 1, 1, 1});
  contrib(hdr(1, 2, 0), {2, 2, 2, 2});
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(contrib(hdr(1, 2, 0), {2, 2, 2, 2}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_EQ(out_[1].rank, 1);
  EXPECT_EQ(header_of(1).flags, proto::kFlagRetransmit);
  EXPECT_EQ(result_of(1), (std::vector<int32_t>{3, 3, 3, 3}));
  EXPECT_EQ(counters_.retransmits_served.get(), 1u);
  EXPECT_EQ(jobs_.find(id_)->counters(0).unicast_resends.get(), 1u);
  EXPECT_EQ(jobs_.find(id_)->counters(0).drops.get(), 0u);  // a served resend is no drop
  EXPECT_EQ(counters_.slots_completed.get(), 1u);
}

DataHeader owned_by(DataHeader h, uint16_t owner) {
  h.flags |= proto::kFlagOwned;
  h.owner = owner;
  return h;
}

TEST_F(SlotEngineTest, OwnedResultGoesToTheOwnerAndAcksToTheOthers) {
  make_job(3, 4);
  EXPECT_EQ(contrib(owned_by(hdr(0, 0, 0), 2), {1, 2, 3, 4}), DropReason::kOk);
  EXPECT_EQ(contrib(owned_by(hdr(2, 0, 0), 2), {10, 20, 30, 40}), DropReason::kOk);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(contrib(owned_by(hdr(1, 0, 0), 2), {100, 200, 300, 400}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 2u);
  // The owner gets the payload ...
  EXPECT_EQ(out_[0].rank, 2);
  EXPECT_EQ(out_[0].len, proto::kDataHeaderSize + 16);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{111, 222, 333, 444}));
  EXPECT_EQ(header_of(0).flags, 0);
  EXPECT_EQ(header_of(0).owner, 0);  // results name no owner
  // ... every other rank one 48-byte acknowledgement that echoes the slot.
  EXPECT_EQ(out_[1].rank, ResultBatch::kAllRanks);
  EXPECT_EQ(out_[1].except, 2);
  EXPECT_EQ(out_[1].len, proto::kDataHeaderSize);
  const DataHeader ack = header_of(1);
  EXPECT_EQ(ack.flags, proto::kFlagAck);
  EXPECT_EQ(ack.count, 4u);
  EXPECT_EQ(ack.slot, 0u);
  EXPECT_EQ(ack.generation, 0u);
  EXPECT_EQ(counters_.slots_completed.get(), 1u);

  // A lost acknowledgement is served again as one; a lost result as the result.
  EXPECT_EQ(contrib(owned_by(hdr(0, 0, 0), 2), {1, 2, 3, 4}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 3u);
  EXPECT_EQ(out_[2].rank, 0);
  EXPECT_EQ(out_[2].len, proto::kDataHeaderSize);
  EXPECT_EQ(header_of(2).flags, proto::kFlagAck | proto::kFlagRetransmit);
  EXPECT_EQ(contrib(owned_by(hdr(2, 0, 0), 2), {10, 20, 30, 40}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 4u);
  EXPECT_EQ(out_[3].rank, 2);
  EXPECT_EQ(header_of(3).flags, proto::kFlagRetransmit);
  EXPECT_EQ(result_of(3), (std::vector<int32_t>{111, 222, 333, 444}));
  EXPECT_EQ(counters_.retransmits_served.get(), 2u);
}

TEST_F(SlotEngineTest, OwnerIsPartOfTheShapeAndMustBeARank) {
  make_job(2, 4);
  EXPECT_EQ(contrib(owned_by(hdr(0, 0, 0), 2), {1, 1, 1, 1}), DropReason::kBadContributor);
  EXPECT_EQ(contrib(owned_by(hdr(0, 0, 0), 1), {1, 1, 1, 1}), DropReason::kOk);
  // Another owner, or none, for the same generation: the ranks disagree; nothing is added.
  EXPECT_EQ(contrib(owned_by(hdr(1, 0, 0), 0), {2, 2, 2, 2}), DropReason::kSlotMismatch);
  EXPECT_EQ(contrib(hdr(1, 0, 0), {2, 2, 2, 2}), DropReason::kSlotMismatch);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(contrib(owned_by(hdr(1, 0, 0), 1), {2, 2, 2, 2}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{3, 3, 3, 3}));
  // The next generation on the other bank may be shared again.
  EXPECT_EQ(contrib(hdr(0, 0, 2), {5, 5, 5, 5}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(1, 0, 2), {5, 5, 5, 5}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 3u);
  EXPECT_EQ(out_[2].rank, ResultBatch::kAllRanks);
  EXPECT_EQ(out_[2].except, -1);
}

TEST_F(SlotEngineTest, OneRankOwnsItsOwnResultWithoutAcks) {
  make_job(1, 2);
  EXPECT_EQ(contrib(owned_by(hdr(0, 0, 0), 0), {4, 3, 2, 1}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, 0);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{4, 3, 2, 1}));
}

TEST_F(SlotEngineTest, TwoBanksReuseAndStaleGenerations) {
  make_job(2, 2);  // slot 0 is queue 0's
  for (uint32_t g = 0; g < 6; ++g) {
    EXPECT_EQ(contrib(hdr(0, 0, g), {int32_t(g), 0, 0, 0}), DropReason::kOk) << g;
    EXPECT_EQ(contrib(hdr(1, 0, g), {1, 0, 0, 0}), DropReason::kOk) << g;
    ASSERT_EQ(out_.size(), g + 1);
    EXPECT_EQ(result_of(g)[0], int32_t(g) + 1);
    EXPECT_EQ(header_of(g).generation, g);
  }
  // Bank 0 holds generation 4, bank 1 generation 5.
  EXPECT_EQ(contrib(hdr(0, 0, 2), {0, 0, 0, 0}), DropReason::kStaleGeneration);
  EXPECT_EQ(contrib(hdr(0, 0, 3), {0, 0, 0, 0}), DropReason::kStaleGeneration);
  EXPECT_EQ(contrib(hdr(0, 0, 10), {0, 0, 0, 0}), DropReason::kSlotMismatch);  // > 2 ahead
  // Generation 6 reuses bank 0 while generation 5's result stays servable in bank 1.
  EXPECT_EQ(contrib(hdr(0, 0, 6), {7, 0, 0, 0}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(1, 0, 5), {1, 0, 0, 0}), DropReason::kOk);  // re-served
  EXPECT_EQ(out_[out_.size() - 1].rank, 1);
  EXPECT_EQ(result_of(out_.size() - 1)[0], 6);
  // 8 is two ahead of a bank still collecting 6: not allowed.
  EXPECT_EQ(contrib(hdr(1, 0, 8), {0, 0, 0, 0}), DropReason::kSlotMismatch);
}

// A batch that lends payloads (the kernel-UDP dataplane's) sends each result from its bank.
// Generations 0..5 on one slot in one batch reuse each bank twice: before a bank is written
// again, the entries that still read it get their own copy, so every result stays as it was.
TEST_F(SlotEngineTest, LentResultsAreTakenBackBeforeTheirBankIsWrittenAgain) {
  out_.lend_payloads();
  ASSERT_TRUE(out_.lends());
  make_job(2, 2);
  for (uint32_t g = 0; g < 6; ++g) {
    EXPECT_EQ(contrib(hdr(0, 0, g), {int32_t(g), 10, 20, 30}), DropReason::kOk) << g;
    EXPECT_EQ(contrib(hdr(1, 0, g), {1, 1, 1, 1}), DropReason::kOk) << g;
    ASSERT_EQ(out_.size(), g + 1);
    EXPECT_NE(out_[g].body, nullptr) << g;  // lent, not copied
    EXPECT_EQ(out_[g].len, proto::kDataHeaderSize + 16);
  }
  for (uint32_t g = 0; g < 6; ++g) {
    // Banks 0 and 1 were written again for generations 2..5: 0..3 were taken back.
    EXPECT_EQ(out_[g].body == nullptr, g < 4) << g;
    EXPECT_EQ(result_of(g), (std::vector<int32_t>{int32_t(g) + 1, 11, 21, 31})) << g;
    EXPECT_EQ(header_of(g).generation, g);
  }
  // A re-served result is lent again; a new batch needs nothing taken back.
  EXPECT_EQ(contrib(hdr(1, 0, 5), {1, 1, 1, 1}), DropReason::kOk);
  EXPECT_EQ(out_[6].body, out_[5].body);
  out_.clear();
  EXPECT_EQ(contrib(hdr(0, 0, 6), {7, 0, 0, 0}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(1, 0, 6), {1, 0, 0, 0}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{8, 0, 0, 0}));
}

// A lent result of a job with a data MAC: the trailer follows the header in the batch and
// signs the payload in the bank; taken back, the datagram is contiguous and still verifies.
TEST_F(SlotEngineTest, LentResultOfAMacJobKeepsItsTrailer) {
  out_.lend_payloads();
  id_ = jobs_.allocate_id();
  const proto::DataKey key = proto::derive_data_key("secret", id_, 0xfeedULL);
  publish_mac_job(id_, 0xfeedULL, key);
  proto::DataMac mac;
  ASSERT_TRUE(mac.set_key(key));
  uint64_t seq = 0;
  auto signed_contrib = [&](uint16_t c, uint32_t gen, int32_t first) {
    DataHeader h = hdr(c, 0, gen);
    h.flags |= proto::kFlagMac;
    std::vector<int32_t> v{first, 2, 3, 4};
    std::vector<uint8_t> d = testing::make_datagram(h, {reinterpret_cast<uint8_t*>(v.data()), 16});
    d.resize(d.size() + proto::kMacTrailerSize);
    EXPECT_TRUE(mac.sign(d.data(), d.data() + proto::kDataHeaderSize, 16, c, ++seq,
                         d.data() + proto::kDataHeaderSize + 16));
    return engine_.on_datagram(d, src_of(c), out_);
  };
  const auto verifies = [&](size_t i) {
    const std::vector<uint8_t> w = wire_of(i);
    return w.size() == proto::kDataHeaderSize + 16 + proto::kMacTrailerSize &&
           mac.verify(w.data(), w.data() + proto::kDataHeaderSize, 16,
                      w.data() + proto::kDataHeaderSize + 16);
  };
  EXPECT_EQ(signed_contrib(0, 0, 1), DropReason::kOk);
  EXPECT_EQ(signed_contrib(1, 0, 2), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_NE(out_[0].body, nullptr);
  EXPECT_EQ(out_[0].len, proto::kDataHeaderSize + 16 + proto::kMacTrailerSize);
  EXPECT_TRUE(verifies(0));
  // Generation 2 writes bank 0 again: entry 0 is taken back, whole and still signed.
  EXPECT_EQ(signed_contrib(0, 2, 5), DropReason::kOk);
  EXPECT_EQ(out_[0].body, nullptr);
  EXPECT_TRUE(verifies(0));
  EXPECT_EQ(result_of(0)[0], 3);
  EXPECT_EQ(std::vector<uint8_t>(out_[0].data, out_[0].data + out_[0].len), wire_of(0));
}

TEST_F(SlotEngineTest, FreshSlotAcceptsOnlyGenerationZeroOrOne) {
  make_job(2, 4);
  EXPECT_EQ(contrib(hdr(0, 0, 2), {0, 0, 0, 0}), DropReason::kSlotMismatch);
  EXPECT_EQ(contrib(hdr(0, 0, 1), {0, 0, 0, 0}), DropReason::kOk);
}

TEST_F(SlotEngineTest, GenerationWrapsModulo2To32) {
  make_job(1, 2);
  Bank& b = jobs_.find(id_)->slot(0).banks[0];
  b.state = BankState::kComplete;
  b.generation = 0xFFFFFFFEu;
  b.count = 4;
  b.result_data = b.accum.ensure(64);
  EXPECT_EQ(contrib(hdr(0, 0, 0), {5, 0, 0, 0}), DropReason::kOk);  // 0xFFFFFFFE + 2
  ASSERT_EQ(out_.size(), 1u);  // n_workers = 1 completes at once
  EXPECT_EQ(result_of(0)[0], 5);
  EXPECT_EQ(contrib(hdr(0, 0, 0xFFFFFFFEu), {0, 0, 0, 0}), DropReason::kStaleGeneration);
}

TEST_F(SlotEngineTest, ShapeMismatchesAreDropped) {
  make_job(2, 4);
  contrib(hdr(0, 0, 0), {1, 2, 3, 4});
  EXPECT_EQ(contrib(hdr(1, 0, 0, 3), {1, 2, 3}), DropReason::kSlotMismatch);  // count
  DataHeader h = hdr(1, 0, 0, 4, DType::kFloat32);
  EXPECT_EQ(contrib(h, {1, 2, 3, 4}), DropReason::kSlotMismatch);  // dtype mid-slot
  h = hdr(1, 0, 0);
  h.op = Op::kMax;
  EXPECT_EQ(contrib(h, {1, 2, 3, 4}), DropReason::kSlotMismatch);
  h = hdr(1, 0, 0);
  h.offset = 4;
  EXPECT_EQ(contrib(h, {1, 2, 3, 4}), DropReason::kSlotMismatch);
  EXPECT_EQ(contrib(hdr(1, 0, 0), {1, 1, 1, 1}), DropReason::kOk);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{2, 3, 4, 5}));
}

TEST_F(SlotEngineTest, StatelessRejections) {
  make_job(2, 5);
  DataHeader h = hdr(0, 0, 0);
  h.type = proto::PacketType::kResult;
  EXPECT_EQ(contrib(h, {0, 0, 0, 0}), DropReason::kWrongDirection);
  h = hdr(0, 0, 0);
  h.job_id = id_ + (1u << JobTable::kIndexBits);  // same index, other incarnation
  EXPECT_EQ(contrib(h, {0, 0, 0, 0}), DropReason::kUnknownJob);
  h = hdr(0, 0, 0);
  h.job_token ^= 1;
  EXPECT_EQ(contrib(h, {0, 0, 0, 0}), DropReason::kBadToken);
  EXPECT_EQ(contrib(hdr(0, 6, 0), {0, 0, 0, 0}), DropReason::kSlotOutOfRange);
  EXPECT_EQ(contrib(hdr(0, 1, 0), {0, 0, 0, 0}), DropReason::kWrongQueue);  // queue 1's slot
  EXPECT_EQ(contrib(hdr(2, 0, 0), {0, 0, 0, 0}), DropReason::kBadContributor);
  std::vector<int32_t> big(32);
  EXPECT_EQ(contrib(hdr(0, 0, 0, 32), big), DropReason::kOversized);  // job payload is 64 B
  EXPECT_TRUE(out_.empty());
}

// Source binding (SPEC.md §4): a contribution with the right job id, token and contributor
// from any other address or port is dropped as wrong_source, before it touches the slot, and
// does not displace the real contribution or serve a result to the forger.
TEST_F(SlotEngineTest, ContributionsAreBoundToTheRegisteredSource) {
  make_job(2, 4);
  const std::vector<int32_t> garbage{-7, -7, -7, -7};
  auto forged = [&](uint16_t c, uint32_t gen, Source from, bool retransmit = false) {
    DataHeader h = hdr(c, 0, gen);
    if (retransmit) h.flags = proto::kFlagRetransmit;
    return engine_.on_contrib(h, reinterpret_cast<const uint8_t*>(garbage.data()), from, out_);
  };
  Source other_port = src_of(0);
  other_port.port = htons(6000);
  Source other_ip = src_of(1);
  other_ip.ip = htonl(0x0a000002);
  // Forgeries for both ranks, from another port, another address, the other rank's address
  // and no address at all: none counts as the contribution.
  EXPECT_EQ(forged(0, 0, other_port), DropReason::kWrongSource);
  EXPECT_EQ(forged(1, 0, other_ip), DropReason::kWrongSource);
  EXPECT_EQ(forged(1, 0, src_of(0)), DropReason::kWrongSource);
  EXPECT_EQ(forged(0, 0, Source{}), DropReason::kWrongSource);
  EXPECT_EQ(jobs_.find(id_)->counters(0).packets_in.get(), 0u);  // not accepted for the job
  EXPECT_EQ(contrib(hdr(0, 0, 0), {1, 2, 3, 4}), DropReason::kOk);
  EXPECT_EQ(forged(1, 0, other_port), DropReason::kWrongSource);  // mid-slot
  EXPECT_EQ(contrib(hdr(1, 0, 0), {10, 20, 30, 40}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{11, 22, 33, 44}));
  out_.clear();
  // A resend from a foreign source is not served; from the rank's own source it is.
  EXPECT_EQ(forged(1, 0, other_port, true), DropReason::kWrongSource);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(counters_.retransmits_served.get(), 0u);
  // Bad tokens are still bad tokens, whatever the source (the token is checked first), and
  // an out-of-range contributor is bad_contributor.
  DataHeader h = hdr(0, 0, 0);
  h.job_token ^= 1;
  EXPECT_EQ(
      engine_.on_contrib(h, reinterpret_cast<const uint8_t*>(garbage.data()), other_port, out_),
      DropReason::kBadToken);
  EXPECT_EQ(forged(2, 0, other_port), DropReason::kBadContributor);
}

TEST_F(SlotEngineTest, OnDatagramCountsEveryDrop) {
  make_job(1, 2);
  const std::vector<uint8_t> junk(20, 0xab);
  EXPECT_EQ(engine_.on_datagram(junk, src_of(0), out_), DropReason::kTruncated);
  std::vector<int32_t> v{1, 2, 3, 4};
  auto d = testing::make_datagram(hdr(0, 0, 0), {reinterpret_cast<uint8_t*>(v.data()), 16});
  EXPECT_EQ(engine_.on_datagram(d, src_of(0), out_), DropReason::kOk);
  EXPECT_EQ(engine_.on_datagram(d, src_of(1), out_), DropReason::kWrongSource);
  EXPECT_EQ(counters_.packets_in.get(), 3u);
  EXPECT_EQ(counters_.bytes_in.get(), 20u + 2 * (48 + 16));
  EXPECT_EQ(counters_.drops[int(DropReason::kTruncated)].get(), 1u);
  EXPECT_EQ(counters_.drops[int(DropReason::kWrongSource)].get(), 1u);
  EXPECT_EQ(jobs_.find(id_)->counters(0).packets_in.get(), 1u);
}

// Data MAC (SPEC.md §6): a job with a key takes only contributions its contributor signed
// with it, and signs every result (sender kAggSender | queue, a fresh sequence number each).
TEST_F(SlotEngineTest, DataMacJobTakesOnlySignedContributionsAndSignsResults) {
  make_job(2, 4);
  jobs_.retire(id_);
  id_ = jobs_.allocate_id();
  const proto::DataKey key = proto::derive_data_key("secret", id_, 0xfeedULL);
  publish_mac_job(id_, 0xfeedULL, key);
  proto::DataMac mac;
  ASSERT_TRUE(mac.set_key(key));
  // A CONTRIB of rank c signed as `sender` (nullopt: no trailer); `tamper` flips a payload bit.
  auto datagram = [&](uint16_t c, std::optional<uint32_t> sender, bool tamper = false,
                      uint64_t seq = 1, proto::DataMac* signer = nullptr) {
    DataHeader h = hdr(c, 0, 0);
    if (sender) h.flags |= proto::kFlagMac;
    std::vector<int32_t> v{1 + c, 2, 3, 4};
    std::vector<uint8_t> d = testing::make_datagram(h, {reinterpret_cast<uint8_t*>(v.data()), 16});
    if (sender) {
      d.resize(d.size() + proto::kMacTrailerSize);
      EXPECT_TRUE((signer != nullptr ? *signer : mac)
                      .sign(d.data(), d.data() + proto::kDataHeaderSize, 16, *sender, seq,
                            d.data() + proto::kDataHeaderSize + 16));
    }
    if (tamper) d[proto::kDataHeaderSize] ^= 1;
    return d;
  };
  EXPECT_EQ(engine_.on_datagram(datagram(0, std::nullopt), src_of(0), out_), DropReason::kBadMac);
  EXPECT_EQ(engine_.on_datagram(datagram(0, 1), src_of(0), out_),
            DropReason::kBadMac);  // as rank 1
  EXPECT_EQ(engine_.on_datagram(datagram(0, 0, true), src_of(0), out_), DropReason::kBadMac);
  proto::DataMac other;
  ASSERT_TRUE(other.set_key(proto::derive_data_key("secret", id_, 0xbeefULL)));
  // Signed with another job's key.
  EXPECT_EQ(engine_.on_datagram(datagram(0, 0, false, 1, &other), src_of(0), out_),
            DropReason::kBadMac);
  EXPECT_EQ(counters_.drops[int(DropReason::kBadMac)].get(), 4u);
  EXPECT_EQ(jobs_.find(id_)->counters(0).packets_in.get(), 0u);
  // Signed right but from a foreign source: source binding still holds.
  Source other_port = src_of(0);
  other_port.port = htons(6000);
  EXPECT_EQ(engine_.on_datagram(datagram(0, 0), other_port, out_), DropReason::kWrongSource);
  EXPECT_EQ(engine_.on_datagram(datagram(0, 0), src_of(0), out_), DropReason::kOk);
  EXPECT_EQ(engine_.on_datagram(datagram(1, 1, false, 5), src_of(1), out_), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  // The result: flag, trailer, a tag the workers' key verifies, the queue's sender id.
  const ResultBatch::Entry& r = out_[0];
  ASSERT_EQ(r.len, proto::kDataHeaderSize + 16 + proto::kMacTrailerSize);
  EXPECT_TRUE(header_of(0).mac());
  const uint8_t* trailer = r.data + proto::kDataHeaderSize + 16;
  EXPECT_EQ(proto::DataMac::sender_of(trailer), proto::kAggSender | 0u);
  EXPECT_TRUE(mac.verify(r.data, r.data + proto::kDataHeaderSize, 16, trailer));
  std::vector<int32_t> sum(4);
  std::memcpy(sum.data(), r.data + proto::kDataHeaderSize, 16);
  EXPECT_EQ(sum, (std::vector<int32_t>{3, 4, 6, 8}));
  // A resend is signed again under a new sequence number.
  const std::vector<uint8_t> first_trailer(trailer, trailer + proto::kMacTrailerSize);
  out_.clear();
  EXPECT_EQ(engine_.on_datagram(datagram(1, 1, false, 6), src_of(1), out_), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  const uint8_t* trailer2 = out_[0].data + proto::kDataHeaderSize + 16;
  EXPECT_TRUE(mac.verify(out_[0].data, out_[0].data + proto::kDataHeaderSize, 16, trailer2));
  EXPECT_NE(std::memcmp(first_trailer.data() + 4, trailer2 + 4, 8), 0);
}

// Data MAC with several jobs interleaved on one queue: each job's contributions are checked
// and its results signed under its own key, and a job is keyed once, not once per datagram,
// while no more than KeyedMac::kEntries (4) interleave; with more, keys are made again but
// every result is still signed right.
TEST_F(SlotEngineTest, DataMacKeysEachOfAFewInterleavedJobsOnce) {
  struct MacJob {
    uint32_t id;
    uint64_t token;
    proto::DataMac mac;
    uint64_t seq = 0;
  };
  const auto run = [&](int n_jobs, int rounds) {
    std::vector<std::unique_ptr<MacJob>> js;
    for (int j = 0; j < n_jobs; ++j) {
      auto m = std::make_unique<MacJob>();
      m->id = jobs_.allocate_id();
      m->token = 0x1000u + static_cast<uint64_t>(j);
      const proto::DataKey key = proto::derive_data_key("secret", m->id, m->token);
      EXPECT_TRUE(m->mac.set_key(key));
      publish_mac_job(m->id, m->token, key);
      js.push_back(std::move(m));
    }
    const auto send = [&](MacJob& m, uint16_t c, uint32_t gen) {
      DataHeader h = hdr(c, 0, gen);
      h.job_id = m.id;
      h.job_token = m.token;
      h.flags |= proto::kFlagMac;
      const std::vector<int32_t> v{static_cast<int32_t>(m.id % 1000) + c, 1, 2, 3};
      std::vector<uint8_t> d =
          testing::make_datagram(h, {reinterpret_cast<const uint8_t*>(v.data()), 16});
      d.resize(d.size() + proto::kMacTrailerSize);
      EXPECT_TRUE(m.mac.sign(d.data(), d.data() + proto::kDataHeaderSize, 16, c, ++m.seq,
                             d.data() + proto::kDataHeaderSize + 16));
      return engine_.on_datagram(d, src_of(c), out_);
    };
    for (int g = 0; g < rounds; ++g) {
      out_.clear();
      for (uint16_t c : {0, 1}) {
        for (auto& m : js) EXPECT_EQ(send(*m, c, static_cast<uint32_t>(g)), DropReason::kOk);
      }
      ASSERT_EQ(out_.size(), js.size());
      for (size_t i = 0; i < js.size(); ++i) {
        const MacJob& m = *js[i];
        const DataHeader h = header_of(i);
        EXPECT_EQ(h.job_id, m.id);
        const uint8_t* trailer = out_[i].data + proto::kDataHeaderSize + 16;
        EXPECT_TRUE(
            js[i]->mac.verify(out_[i].data, out_[i].data + proto::kDataHeaderSize, 16, trailer))
            << "job " << i << " round " << g;
        std::vector<int32_t> sum = result_of(i);
        sum.resize(4);  // the trailer follows
        EXPECT_EQ(sum, (std::vector<int32_t>{2 * static_cast<int32_t>(m.id % 1000) + 1, 2, 4, 6}));
      }
    }
    for (auto& m : js) jobs_.retire(m->id);
  };
  run(3, 4);  // 24 contributions and 12 results of 3 jobs, interleaved
  EXPECT_EQ(engine_.mac_rekeys(), 3u);
  run(5, 2);  // more jobs than kept keys: made again, still right
  EXPECT_GT(engine_.mac_rekeys(), 3u + 5u);
  EXPECT_EQ(counters_.drops[int(DropReason::kBadMac)].get(), 0u);
}

TEST_F(SlotEngineTest, MacOnAJobWithoutAKeyIsDropped) {
  make_job(1, 2);
  DataHeader h = hdr(0, 0, 0);
  h.flags = proto::kFlagMac;
  std::vector<int32_t> v{1, 2, 3, 4};
  auto d = testing::make_datagram(h, {reinterpret_cast<uint8_t*>(v.data()), 16});
  d.resize(d.size() + proto::kMacTrailerSize);
  EXPECT_EQ(engine_.on_datagram(d, src_of(0), out_), DropReason::kBadMac);
  EXPECT_TRUE(out_.empty());
}

// Deterministic mode: every arrival order gives the same bits, equal to the rank-order
// reference (init rank 0, accumulate 1, 2, ...; round once).
TEST_F(SlotEngineTest, DeterministicModeIsOrderIndependent) {
  constexpr uint32_t kN = 5;
  constexpr uint32_t kCount = 16;
  for (DType dt : {DType::kFloat32, DType::kBfloat16, DType::kFloat16, DType::kFloat64}) {
    jobs_.retire(id_);
    make_job(kN, 2, /*deterministic=*/true, 128);
    const size_t es = dtype_size(dt);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-3.f, 3.f);
    std::vector<std::vector<uint8_t>> in(kN, std::vector<uint8_t>(kCount * es));
    for (auto& buf : in) {
      for (uint32_t i = 0; i < kCount; ++i) {
        const float f = dist(rng) * 1.3e-3f * float(i + 1);
        if (dt == DType::kFloat32) std::memcpy(&buf[i * 4], &f, 4);
        if (dt == DType::kFloat64) {
          const double x = double(f) / 3.0;
          std::memcpy(&buf[i * 8], &x, 8);
        }
        if (dt == DType::kBfloat16) {
          const uint16_t x = reduce::float_to_bf16(f);
          std::memcpy(&buf[i * 2], &x, 2);
        }
        if (dt == DType::kFloat16) {
          const uint16_t x = reduce::float_to_half(f);
          std::memcpy(&buf[i * 2], &x, 2);
        }
      }
    }
    std::vector<uint8_t> acc(kCount * 8), expect(kCount * es);
    reduce::ref::init(dt, acc.data(), in[0].data(), kCount);
    for (uint32_t r = 1; r < kN; ++r)
      reduce::ref::accumulate(dt, Op::kSum, acc.data(), in[r].data(), kCount);
    reduce::ref::finish(dt, expect.data(), acc.data(), kCount);

    std::vector<uint32_t> order(kN);
    std::iota(order.begin(), order.end(), 0);
    uint32_t gen = 0;
    do {
      out_.clear();
      for (uint32_t r : order) {
        DataHeader h = hdr(static_cast<uint16_t>(r), 0, gen, kCount, dt);
        ASSERT_EQ(engine_.on_contrib(h, in[r].data(), src_of(r), out_), DropReason::kOk);
      }
      ASSERT_EQ(out_.size(), 1u);
      ASSERT_EQ(0, std::memcmp(out_[0].data + 48, expect.data(), expect.size()))
          << dtype_name(dt) << " order " << order[0] << order[1] << order[2] << order[3];
      ++gen;
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

TEST(JobTableTest, IdsAreUniqueAndMemoryWaitsForQuiescence) {
  JobTable t(2, 1);
  t.online(0);
  const uint32_t a = t.allocate_id();
  const uint32_t b = t.allocate_id();
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(t.allocate_id(), 0u);  // capacity 2
  JobParams p;
  p.id = a;
  p.n_workers = 1;
  p.slots = 1;
  p.payload_bytes = 8;
  t.publish(std::make_unique<Job>(p, 1));
  ASSERT_NE(t.find(a), nullptr);
  t.retire(a);
  EXPECT_EQ(t.find(a), nullptr);
  EXPECT_EQ(t.reclaim(), 1u);  // queue 0 has not passed a quiescent point yet
  t.quiescent(0);
  EXPECT_EQ(t.reclaim(), 0u);
  const uint32_t c = t.allocate_id();
  EXPECT_NE(c, a);  // same index, new incarnation
  EXPECT_EQ(t.find(a), nullptr);
}

// --- Reduction tree (SPEC.md §7): child contributors on a parent, the leaf's uplink ---------

class TreeSlotEngineTest : public SlotEngineTest {
 protected:
  // A child aggregator standing for `weight` ranks, whose data ports are 6000+10r, 6001+10r.
  static sockaddr_in child_port(uint32_t r, uint32_t slot) {
    sockaddr_in a = worker_addr(r);
    a.sin_port = htons(static_cast<uint16_t>(6000 + 10 * r + slot % 2));
    return a;
  }
  // Root: 4 ranks, children at ranks 0 and 2 of weight 2 each.
  void make_root(bool deterministic = false) {
    id_ = jobs_.allocate_id();
    JobParams p = base(4, deterministic);
    for (uint32_t r : {0u, 2u}) {
      p.members.push_back(r);
      p.weight[r] = 2;
      p.workers[r] = child_port(r, 0);
      p.child_addrs[r] = {child_port(r, 0), child_port(r, 1)};
    }
    p.served = 4;
    jobs_.publish(std::make_unique<Job>(std::move(p), kQueues));
  }
  // Leaf: ranks 0 and 1 of 4 joined here; job 77 at the parent (10.0.0.9:7000/7001). With
  // data MAC keys for the leaf's own job and for the parent's job when given.
  void make_leaf(std::optional<proto::DataKey> own_key = std::nullopt,
                 std::optional<proto::DataKey> parent_key = std::nullopt, bool direct = false) {
    id_ = jobs_.allocate_id();
    JobParams p = base(4, false);
    p.mac_key = own_key;
    for (uint32_t r : {0u, 1u}) {
      p.members.push_back(r);
      p.weight[r] = 1;
      p.workers[r] = worker_addr(r);
    }
    p.served = 2;
    auto up = std::make_shared<JobParams::Uplink>();
    up->job_id = kParentJob;
    up->token = kParentToken;
    up->contributor = 0;
    up->mac_key = parent_key;
    up->direct = direct;
    for (uint16_t port : {7000, 7001}) {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(0x0a000009);
      a.sin_port = htons(port);
      up->ports.push_back(a);
    }
    p.uplink = up;
    jobs_.publish(std::make_unique<Job>(std::move(p), kQueues));
  }
  JobParams base(uint32_t n, bool deterministic) const {
    JobParams p;
    p.id = id_;
    p.token = 0xfeedULL;
    p.n_workers = n;
    p.slots = 4;
    p.payload_bytes = 64;
    p.deterministic = deterministic;
    p.workers.resize(n);
    p.weight.assign(n, 0);
    p.child_addrs.resize(n);
    return p;
  }
  std::vector<sockaddr_in> destinations(size_t i) const {
    std::vector<sockaddr_in> d;
    out_[i].for_each_destination([&](const sockaddr_in& a) { d.push_back(a); });
    return d;
  }
  // The parent's RESULT for slot `slot`, from the parent's port for it.
  DropReason parent_result(uint32_t slot, uint32_t gen, std::vector<int32_t> v, uint16_t flags = 0,
                           uint32_t port = 0) {
    DataHeader h = parent_header(slot, gen, static_cast<uint32_t>(v.size()));
    h.flags = flags;
    return engine_.on_contrib(h, reinterpret_cast<const uint8_t*>(v.data()),
                              port != 0 ? parent_port(port) : parent_source(slot), out_);
  }
  // A datagram [h, v] with a trailer signed by `signer` as `sender`.
  static std::vector<uint8_t> signed_datagram(DataHeader h, const std::vector<int32_t>& v,
                                              proto::DataMac& signer, uint32_t sender,
                                              uint64_t seq) {
    h.flags |= proto::kFlagMac;
    const size_t n = v.size() * sizeof(int32_t);
    std::vector<uint8_t> d =
        testing::make_datagram(h, {reinterpret_cast<const uint8_t*>(v.data()), n});
    d.resize(d.size() + proto::kMacTrailerSize);
    EXPECT_TRUE(signer.sign(d.data(), d.data() + proto::kDataHeaderSize, n, sender, seq,
                            d.data() + proto::kDataHeaderSize + n));
    return d;
  }
  // The parent's RESULT header for `slot`.
  DataHeader parent_header(uint32_t slot, uint32_t gen, uint32_t count = 4) {
    DataHeader h = hdr(0, slot, gen, count);
    h.type = proto::PacketType::kResult;
    h.job_id = kParentJob;
    h.job_token = kParentToken;
    return h;
  }
  // From the parent's data address (10.0.0.9): its port for `slot`, or any `port`.
  static Source parent_source(uint32_t slot) { return parent_port(7000 + slot % 2); }
  static Source parent_port(uint32_t port) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(0x0a000009);
    from.sin_port = htons(static_cast<uint16_t>(port));
    return Source::of(from);
  }
  DropReason child_contrib(uint16_t c, uint32_t slot, std::vector<int32_t> v, uint32_t port_of) {
    return engine_.on_contrib(hdr(c, slot, 0), reinterpret_cast<const uint8_t*>(v.data()),
                              Source::of(child_port(c, port_of)), out_);
  }
  // A member's resend (RETRANSMIT) of its contribution to `slot` of generation `gen`.
  DropReason member_resend(uint16_t c, uint32_t slot, uint32_t gen, std::vector<int32_t> v) {
    DataHeader again = hdr(c, slot, gen);
    again.flags = proto::kFlagRetransmit;
    return contrib(again, std::move(v));
  }
  static bool same(const sockaddr_in& a, const sockaddr_in& b) {
    return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
  }

  static constexpr uint32_t kParentJob = 77;
  static constexpr uint64_t kParentToken = 0xabcULL;
};

TEST_F(TreeSlotEngineTest, ParentCountsEachChildByItsWeightOnTheSlotsPort) {
  make_root();
  // Slot 2 is served by port [2 % 2] = 6000+10c of each child; the other port is not its own.
  EXPECT_EQ(child_contrib(0, 2, {1, 2, 3, 4}, 1), DropReason::kWrongSource);
  // A rank that did not join here (rank 1 sits under child 0) has no address at all.
  EXPECT_EQ(engine_.on_contrib(hdr(1, 2, 0), nullptr, src_of(1), out_), DropReason::kWrongSource);
  EXPECT_EQ(child_contrib(0, 2, {1, 2, 3, 4}, 2), DropReason::kOk);
  EXPECT_TRUE(out_.empty()) << "weight 2 of 4: not complete";
  EXPECT_EQ(child_contrib(0, 2, {1, 2, 3, 4}, 2), DropReason::kDuplicate);
  EXPECT_EQ(child_contrib(2, 2, {10, 20, 30, 40}, 2), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{11, 22, 33, 44}));
  const auto d = destinations(0);
  ASSERT_EQ(d.size(), 2u) << "one result per child, not per rank";
  EXPECT_TRUE(same(d[0], child_port(0, 2)));
  EXPECT_TRUE(same(d[1], child_port(2, 2)));
}

TEST_F(TreeSlotEngineTest, DeterministicParentReducesInChildOrderWhateverTheArrival) {
  make_root(/*deterministic=*/true);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(16), b(16);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  std::vector<float> want(16);
  const void* srcs[2] = {a.data(), b.data()};
  std::vector<uint8_t> scratch(16 * 8);
  reduce::reduce_n(DType::kFloat32, Op::kSum, want.data(), srcs, 2, 16, scratch.data());
  auto send = [&](uint16_t c, const std::vector<float>& v) {
    return engine_.on_contrib(hdr(c, 0, 0, 16, DType::kFloat32),
                              reinterpret_cast<const uint8_t*>(v.data()),
                              Source::of(child_port(c, 0)), out_);
  };
  EXPECT_EQ(send(2, b), DropReason::kOk);  // child 2 first
  EXPECT_EQ(send(0, a), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(std::memcmp(out_[0].data + proto::kDataHeaderSize, want.data(), 64), 0);
}

TEST_F(TreeSlotEngineTest, LeafSendsOnePartialUpAndFansTheParentsResultOut) {
  make_leaf();
  EXPECT_EQ(contrib(hdr(0, 2, 0), {1, 2, 3, 4}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(1, 2, 0), {10, 20, 30, 40}), DropReason::kOk);
  // Complete here: the partial goes up as this leaf's contribution, nothing goes down yet.
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kParent);
  const DataHeader up = header_of(0);
  EXPECT_EQ(up.type, proto::PacketType::kContrib);
  EXPECT_EQ(up.job_id, kParentJob);
  EXPECT_EQ(up.job_token, kParentToken);
  EXPECT_EQ(up.contributor, 0);
  EXPECT_EQ(up.slot, 2u);
  EXPECT_EQ(up.flags, 0);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{11, 22, 33, 44}));
  auto d = destinations(0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(ntohs(d[0].sin_port), 7000) << "the parent's port for slot 2";
  out_.clear();
  // A RESULT from anywhere but the parent's port for the slot, or for another parent job.
  EXPECT_EQ(parent_result(2, 0, {111, 222, 333, 444}, 0, 7001), DropReason::kWrongSource);
  DataHeader other = hdr(0, 2, 0);
  other.type = proto::PacketType::kResult;
  other.job_id = kParentJob + 1;
  EXPECT_EQ(engine_.on_contrib(other, nullptr, src_of(0), out_), DropReason::kWrongDirection);
  // The parent's result goes to this leaf's members only.
  EXPECT_EQ(parent_result(2, 0, {111, 222, 333, 444}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(header_of(0).type, proto::PacketType::kResult);
  EXPECT_EQ(header_of(0).job_id, id_);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{111, 222, 333, 444}));
  d = destinations(0);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_TRUE(same(d[0], worker_addr(0)));
  EXPECT_TRUE(same(d[1], worker_addr(1)));
  out_.clear();
  EXPECT_EQ(parent_result(2, 0, {111, 222, 333, 444}, proto::kFlagRetransmit),
            DropReason::kDuplicate);
  // A member that lost it asks again: served from the leaf's complete bank.
  EXPECT_EQ(member_resend(1, 2, 0, {10, 20, 30, 40}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, 1);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{111, 222, 333, 444}));
}

// Data MAC across levels (SPEC.md §7): the members sign with the leaf's job key; the partial
// goes up signed with the parent's job key as the leaf's contributor id, each queue in its own
// sequence range; only a RESULT a parent thread signed with that key comes down.
TEST_F(TreeSlotEngineTest, LeafSignsItsPartialWithTheParentsKeyAndTakesOnlySignedResults) {
  const proto::DataKey own = proto::derive_data_key("tree", 1, 0xfeedULL);
  const proto::DataKey parent = proto::derive_data_key("tree", kParentJob, kParentToken);
  make_leaf(own, parent);
  proto::DataMac own_mac, parent_mac;
  ASSERT_TRUE(own_mac.set_key(own));
  ASSERT_TRUE(parent_mac.set_key(parent));
  const std::vector<int32_t> a{1, 2, 3, 4}, b{10, 20, 30, 40}, sum{11, 22, 33, 44};
  // Slot 3 lives on queue 1: an engine for that queue.
  SlotEngine q1{jobs_, 1, kQueues, 8192, counters_};
  auto member = [&](SlotEngine& e, uint16_t c, uint32_t slot, const std::vector<int32_t>& v,
                    proto::DataMac& signer) {
    return e.on_datagram(signed_datagram(hdr(c, slot, 0), v, signer, c, 1), src_of(c), out_);
  };
  // Signed with the parent's key instead of the leaf's: not this job's member traffic.
  EXPECT_EQ(member(engine_, 0, 2, a, parent_mac), DropReason::kBadMac);
  for (auto [e, slot] : {std::pair{&engine_, 2u}, std::pair{&q1, 3u}}) {
    EXPECT_EQ(member(*e, 0, slot, a, own_mac), DropReason::kOk);
    EXPECT_EQ(member(*e, 1, slot, b, own_mac), DropReason::kOk);
  }
  ASSERT_EQ(out_.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ResultBatch::Entry& up = out_[i];
    EXPECT_EQ(up.rank, ResultBatch::kParent);
    ASSERT_EQ(up.len, proto::kDataHeaderSize + 16 + proto::kMacTrailerSize);
    EXPECT_TRUE(header_of(i).mac());
    EXPECT_EQ(header_of(i).type, proto::PacketType::kContrib);
    EXPECT_EQ(std::memcmp(up.data + proto::kDataHeaderSize, sum.data(), 16), 0);
    const uint8_t* trailer = up.data + proto::kDataHeaderSize + 16;
    EXPECT_EQ(proto::DataMac::sender_of(trailer), 0u) << "the leaf's contributor id";
    EXPECT_TRUE(parent_mac.verify(up.data, up.data + proto::kDataHeaderSize, 16, trailer));
    EXPECT_FALSE(own_mac.verify(up.data, up.data + proto::kDataHeaderSize, 16, trailer));
    uint64_t seq = 0;
    for (int k = 0; k < 8; ++k) seq = seq << 8 | trailer[4 + k];
    EXPECT_EQ(seq, (uint64_t{i} << Job::kUpMacSeqShift) + 1) << "queue " << i;
  }
  out_.clear();
  // Down: unsigned, signed with the leaf's own key, signed as a rank, and tampered with.
  const std::vector<int32_t> total{111, 222, 333, 444};
  const DataHeader down = parent_header(2, 0);
  std::vector<uint8_t> plain = testing::make_datagram(
      down, {reinterpret_cast<const uint8_t*>(total.data()), total.size() * 4});
  EXPECT_EQ(engine_.on_datagram(plain, parent_source(2), out_), DropReason::kBadMac);
  EXPECT_EQ(engine_.on_datagram(signed_datagram(down, total, own_mac, proto::kAggSender | 1, 1),
                                parent_source(2), out_),
            DropReason::kBadMac);
  EXPECT_EQ(
      engine_.on_datagram(signed_datagram(down, total, parent_mac, 0, 1), parent_source(2), out_),
      DropReason::kBadMac);
  std::vector<uint8_t> tampered = signed_datagram(down, total, parent_mac, proto::kAggSender, 1);
  tampered[proto::kDataHeaderSize] ^= 1;
  EXPECT_EQ(engine_.on_datagram(tampered, parent_source(2), out_), DropReason::kBadMac);
  EXPECT_TRUE(out_.empty()) << "no forged result reaches a member";
  // The parent's own: fanned out to the members, signed with the leaf's key by this queue.
  EXPECT_EQ(engine_.on_datagram(signed_datagram(down, total, parent_mac, proto::kAggSender | 1, 9),
                                parent_source(2), out_),
            DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(header_of(0).type, proto::PacketType::kResult);
  EXPECT_EQ(std::memcmp(out_[0].data + proto::kDataHeaderSize, total.data(), 16), 0);
  const uint8_t* trailer = out_[0].data + proto::kDataHeaderSize + 16;
  EXPECT_EQ(proto::DataMac::sender_of(trailer), proto::kAggSender | 0u);
  EXPECT_TRUE(own_mac.verify(out_[0].data, out_[0].data + proto::kDataHeaderSize, 16, trailer));
}

TEST_F(TreeSlotEngineTest, AParentResultWithAMacIsDroppedWhenThatLinkHasNone) {
  make_leaf();
  for (uint16_t c : {0, 1}) EXPECT_EQ(contrib(hdr(c, 0, 0), {1, 1, 1, 1}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_FALSE(header_of(0).mac()) << "no key at the parent: the partial goes up unsigned";
  out_.clear();
  proto::DataMac mac;
  ASSERT_TRUE(mac.set_key(proto::derive_data_key("tree", kParentJob, kParentToken)));
  EXPECT_EQ(engine_.on_datagram(
                signed_datagram(parent_header(0, 0), {4, 4, 4, 4}, mac, proto::kAggSender, 1),
                parent_source(0), out_),
            DropReason::kBadMac);
  EXPECT_TRUE(out_.empty());
}

TEST_F(TreeSlotEngineTest, MemberResendWhileForwardedAsksTheParentAgain) {
  make_leaf();
  EXPECT_EQ(contrib(hdr(0, 0, 0), {1, 1, 1, 1}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(1, 0, 0), {2, 2, 2, 2}), DropReason::kOk);
  out_.clear();
  // A duplicate of a first send is not a request; a RETRANSMIT is: the partial goes up again.
  EXPECT_EQ(contrib(hdr(1, 0, 0), {2, 2, 2, 2}), DropReason::kDuplicate);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(member_resend(1, 0, 0, {2, 2, 2, 2}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kParent);
  EXPECT_EQ(header_of(0).flags, proto::kFlagRetransmit);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{3, 3, 3, 3}));
  EXPECT_EQ(counters_.uplink_resends.get(), 1u);
}

// A leaf's bf16 partial is rounded into the bank's result buffer, where the parent's result
// lands too. Lent to the batch (twice: sent up, then again for a member that asked), it is
// taken back before the parent's result arriving in the same batch overwrites it.
TEST_F(TreeSlotEngineTest, LentPartialIsTakenBackBeforeTheParentsResultLands) {
  out_.lend_payloads();
  make_leaf();
  const auto bf16 = [&](uint16_t c, uint16_t v, bool resend = false) {
    DataHeader h = hdr(c, 0, 0, 4, DType::kBfloat16);
    if (resend) h.flags = proto::kFlagRetransmit;
    const std::vector<uint16_t> p(4, v);
    return engine_.on_contrib(h, reinterpret_cast<const uint8_t*>(p.data()), src_of(c), out_);
  };
  const auto payload = [&](size_t i) {
    const std::vector<uint8_t> w = wire_of(i);
    std::vector<uint16_t> v((w.size() - proto::kDataHeaderSize) / 2);
    std::memcpy(v.data(), w.data() + proto::kDataHeaderSize, v.size() * 2);
    return v;
  };
  EXPECT_EQ(bf16(0, 0x3f80), DropReason::kOk);  // 1.0
  EXPECT_EQ(bf16(1, 0x4000), DropReason::kOk);  // 2.0
  EXPECT_EQ(bf16(1, 0x4000, true), DropReason::kOk);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_NE(out_[1].body, nullptr);
  const std::vector<uint16_t> partial(4, 0x4040);  // 3.0
  EXPECT_EQ(payload(0), partial);
  EXPECT_EQ(payload(1), partial);
  DataHeader r = parent_header(0, 0, 4);
  r.dtype = DType::kBfloat16;
  const std::vector<uint16_t> total(4, 0x4100);  // 8.0
  EXPECT_EQ(
      engine_.on_contrib(r, reinterpret_cast<const uint8_t*>(total.data()), parent_source(0), out_),
      DropReason::kOk);
  ASSERT_EQ(out_.size(), 3u);
  EXPECT_EQ(out_[0].body, nullptr);  // taken back: both still carry the partial
  EXPECT_EQ(payload(0), partial);
  EXPECT_EQ(payload(1), partial);
  EXPECT_EQ(payload(2), total);  // the result for the members, lent from the bank
  EXPECT_NE(out_[2].body, nullptr);
}

TEST_F(TreeSlotEngineTest, MembersAskingTogetherSendOneRequestUp) {
  make_leaf();
  EXPECT_EQ(contrib(hdr(0, 0, 0), {1, 1, 1, 1}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(1, 0, 0), {2, 2, 2, 2}), DropReason::kOk);
  out_.clear();
  const auto resend = [&](uint16_t c) { return member_resend(c, 0, 0, {1, 1, 1, 1}); };
  // Both members time out on the one result: one request goes up, and its answer will go to
  // both of them.
  EXPECT_EQ(resend(0), DropReason::kOk);
  EXPECT_EQ(resend(1), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kParent);
  EXPECT_EQ(counters_.uplink_resends.get(), 1u);
  EXPECT_EQ(counters_.uplink_resends_held.get(), 1u);
  // A member asking again: that request or its answer was lost, so it goes up again.
  EXPECT_EQ(resend(1), DropReason::kOk);
  EXPECT_EQ(out_.size(), 2u);
  EXPECT_EQ(resend(0), DropReason::kOk);  // new round: held behind member 1's
  EXPECT_EQ(out_.size(), 2u);
  EXPECT_EQ(counters_.uplink_resends.get(), 2u);
  // The parent's answer goes to every member.
  out_.clear();
  EXPECT_EQ(parent_result(0, 0, {3, 3, 3, 3}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kAllRanks);
}

TEST_F(TreeSlotEngineTest, LeafReusesASlotOnlyOnceTheParentsResultCame) {
  make_leaf();
  for (uint16_t c : {0, 1}) EXPECT_EQ(contrib(hdr(c, 0, 0), {1, 1, 1, 1}), DropReason::kOk);
  // Generation 1 in the other bank is independent.
  for (uint16_t c : {0, 1}) EXPECT_EQ(contrib(hdr(c, 0, 1), {1, 1, 1, 1}), DropReason::kOk);
  // Generation 2 cannot come before every rank had result 0 (SPEC.md §7): rejected.
  EXPECT_EQ(contrib(hdr(0, 0, 2), {1, 1, 1, 1}), DropReason::kSlotMismatch);
  EXPECT_EQ(parent_result(0, 0, {4, 4, 4, 4}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(0, 0, 2), {1, 1, 1, 1}), DropReason::kOk);
  // A late result of generation 0 is stale now.
  EXPECT_EQ(parent_result(0, 0, {4, 4, 4, 4}), DropReason::kStaleGeneration);
}

TEST_F(TreeSlotEngineTest, LeafWithResultsStraightDownReusesAForwardedSlot) {
  make_leaf(std::nullopt, std::nullopt, /*direct=*/true);
  for (uint32_t g : {0u, 1u}) {
    for (uint16_t c : {0, 1}) EXPECT_EQ(contrib(hdr(c, 0, g), {1, 1, 1, 1}), DropReason::kOk);
  }
  // The members got result 0 from the parent, not from here: their generation 2 is proof
  // enough (SPEC.md §7), and the FORWARDED bank collects again.
  out_.clear();
  EXPECT_EQ(contrib(hdr(0, 0, 2), {5, 5, 5, 5}), DropReason::kOk);
  EXPECT_EQ(contrib(hdr(1, 0, 2), {6, 6, 6, 6}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kParent);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{11, 11, 11, 11}));
  // A result of generation 0 re-served by the parent now is stale; a resend of generation 1
  // (still FORWARDED in the other bank) asks the parent again.
  EXPECT_EQ(parent_result(0, 0, {4, 4, 4, 4}), DropReason::kStaleGeneration);
  EXPECT_EQ(member_resend(0, 0, 1, {1, 1, 1, 1}), DropReason::kOk);
  // A parent's answer completes it here, and the members get it from this leaf.
  out_.clear();
  EXPECT_EQ(parent_result(0, 1, {4, 4, 4, 4}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kAllRanks);
}

TEST_F(TreeSlotEngineTest, ParentSendsEachDirectChildsResultToItsGroupWithItsOwnIds) {
  make_root();
  Job* job = jobs_.find(id_);
  ASSERT_NE(job, nullptr);
  sockaddr_in group{};
  group.sin_family = AF_INET;
  group.sin_addr.s_addr = htonl(0xEF4D0001);
  group.sin_port = htons(7480);
  ASSERT_TRUE(job->set_direct(2, group, 31, 0x3131ULL));
  EXPECT_FALSE(job->set_direct(2, group, 32, 0x3232ULL)) << "once per child";
  EXPECT_EQ(child_contrib(0, 2, {1, 2, 3, 4}, 2), DropReason::kOk);
  EXPECT_EQ(child_contrib(2, 2, {10, 20, 30, 40}, 2), DropReason::kOk);
  // Child 2's result goes to its group with its job's id and token; child 0 gets its own as
  // before (the entry for the others skips child 2).
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_TRUE(out_[0].direct);
  EXPECT_EQ(header_of(0).job_id, 31u);
  EXPECT_EQ(header_of(0).job_token, 0x3131ULL);
  EXPECT_EQ(header_of(0).type, proto::PacketType::kResult);
  EXPECT_EQ(result_of(0), (std::vector<int32_t>{11, 22, 33, 44}));
  auto d = destinations(0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(same(d[0], group));
  EXPECT_EQ(header_of(1).job_id, id_);
  d = destinations(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(same(d[0], child_port(0, 2)));
  EXPECT_EQ(counters_.direct_results.get(), 1u);
  // A child that lost it asks again through its ports and is served there, by unicast.
  out_.clear();
  DataHeader again = hdr(2, 2, 0);
  again.flags = proto::kFlagRetransmit;
  const std::vector<int32_t> v = {10, 20, 30, 40};
  EXPECT_EQ(engine_.on_contrib(again, reinterpret_cast<const uint8_t*>(v.data()),
                               Source::of(child_port(2, 2)), out_),
            DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_FALSE(out_[0].direct);
  EXPECT_EQ(header_of(0).job_id, id_);
  d = destinations(0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(same(d[0], child_port(2, 2)));
}

TEST_F(TreeSlotEngineTest, AChildTurningDirectBeforeTheBatchLeavesStillGetsItsResult) {
  make_root();
  EXPECT_EQ(child_contrib(0, 2, {1, 2, 3, 4}, 2), DropReason::kOk);
  EXPECT_EQ(child_contrib(2, 2, {10, 20, 30, 40}, 2), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  // DirectDown is taken (control thread) while the result waits in the batch: it still goes
  // to both children's ports, as it was made.
  sockaddr_in group{};
  group.sin_family = AF_INET;
  group.sin_addr.s_addr = htonl(0xEF4D0001);
  group.sin_port = htons(7480);
  ASSERT_TRUE(jobs_.find(id_)->set_direct(2, group, 31, 0x3131ULL));
  EXPECT_EQ(destinations(0).size(), 2u);
}

TEST_F(TreeSlotEngineTest, AJobSendsStraightDownForAtMostItsLimitOfChildren) {
  id_ = jobs_.allocate_id();
  JobParams p = base(8, false);
  p.all_members();
  Job job(std::move(p), kQueues);
  sockaddr_in g{};
  for (uint32_t r = 0; r < Job::kMaxDirectChildren; ++r) EXPECT_TRUE(job.set_direct(r, g, r, r));
  EXPECT_FALSE(job.set_direct(Job::kMaxDirectChildren, g, 9, 9));
  EXPECT_EQ(job.n_direct(), Job::kMaxDirectChildren);
}

TEST_F(TreeSlotEngineTest, OwnedSlotGoesUpWholeAndAnOwnerElsewhereLeavesAcksHere) {
  make_leaf();
  // Rank 3, the owner, sits under the other leaf.
  EXPECT_EQ(contrib(owned_by(hdr(0, 0, 0), 3), {1, 1, 1, 1}), DropReason::kOk);
  EXPECT_EQ(contrib(owned_by(hdr(1, 0, 0), 3), {1, 1, 1, 1}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(header_of(0).flags & proto::kFlagOwned, 0) << "the parent serves every child";
  out_.clear();
  EXPECT_EQ(parent_result(0, 0, {4, 4, 4, 4}), DropReason::kOk);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].rank, ResultBatch::kAllRanks);
  EXPECT_EQ(header_of(0).flags, proto::kFlagAck);
  EXPECT_EQ(destinations(0).size(), 2u);
}

}  // namespace
}  // namespace conflux::agg
