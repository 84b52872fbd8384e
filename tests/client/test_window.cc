// SPDX-License-Identifier: Apache-2.0
// The worker's slot window and result validation (SPEC.md §4, worker state machine).
#include <gtest/gtest.h>

#include "window.h"

namespace conflux::client {
namespace {

using proto::DropReason;

proto::DataHeader result_for(const SlotWindow& w, uint32_t slot) {
  const SlotEntry& e = w.entry(slot);
  proto::DataHeader h;
  h.type = proto::PacketType::kResult;
  h.slot = slot;
  h.generation = e.generation;
  h.offset = e.offset;
  h.count = e.count;
  h.dtype = e.dtype;
  h.op = e.op;
  return h;
}

uint32_t claim(SlotWindow& w, uint64_t offset, uint32_t count) {
  const uint32_t s = w.claim();
  SlotEntry& e = w.entry(s);
  e.offset = offset;
  e.count = count;
  e.dtype = DType::kFloat32;
  e.op = Op::kSum;
  return s;
}

TEST(SlotWindow, SelfClockingWindowOfW) {
  SlotWindow w(3);
  EXPECT_EQ(w.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(w.can_send());
    EXPECT_EQ(claim(w, i * 10, 10), i);
  }
  EXPECT_EQ(w.outstanding(), 3u);
  EXPECT_FALSE(w.can_send());  // packet 3 needs packet 0's result
  w.complete(1);               // results may come out of order...
  EXPECT_FALSE(w.can_send());  // ...but packet 3 uses slot 0
  w.complete(0);
  ASSERT_TRUE(w.can_send());
  EXPECT_EQ(claim(w, 30, 10), 0u);
  EXPECT_EQ(w.entry(0).generation, 1u);
  EXPECT_EQ(w.next_seq(), 4u);
  EXPECT_EQ(w.outstanding(), 2u);
}

TEST(SlotWindow, AcceptsTheMatchingResult) {
  SlotWindow w(4);
  const uint32_t s = claim(w, 0, 2048);
  uint32_t got = 99;
  EXPECT_EQ(w.match(result_for(w, s), &got), DropReason::kOk);
  EXPECT_EQ(got, s);
}

TEST(SlotWindow, DropsMismatchedResultsByReason) {
  SlotWindow w(4);
  const uint32_t s = claim(w, 4096, 2048);
  uint32_t got = 0;
  proto::DataHeader h = result_for(w, s);

  h.slot = 4;
  EXPECT_EQ(w.match(h, &got), DropReason::kSlotOutOfRange);
  h = result_for(w, s);
  h.slot = 1;  // never used
  EXPECT_EQ(w.match(h, &got), DropReason::kSlotMismatch);
  h = result_for(w, s);
  h.offset = 0;
  EXPECT_EQ(w.match(h, &got), DropReason::kSlotMismatch);
  h = result_for(w, s);
  h.count = 2047;
  EXPECT_EQ(w.match(h, &got), DropReason::kSlotMismatch);
  h = result_for(w, s);
  h.dtype = DType::kInt32;
  EXPECT_EQ(w.match(h, &got), DropReason::kSlotMismatch);
  h = result_for(w, s);
  h.op = Op::kMax;
  EXPECT_EQ(w.match(h, &got), DropReason::kSlotMismatch);
  h = result_for(w, s);
  h.generation = 1;  // from the future
  EXPECT_EQ(w.match(h, &got), DropReason::kSlotMismatch);
}

TEST(SlotWindow, DuplicateAndStaleResults) {
  SlotWindow w(1);
  uint32_t got = 0;
  claim(w, 0, 1);
  const proto::DataHeader g0 = result_for(w, 0);
  ASSERT_EQ(w.match(g0, &got), DropReason::kOk);
  w.complete(0);
  // The same result again while the slot is free: duplicate.
  EXPECT_EQ(w.match(g0, &got), DropReason::kDuplicate);
  claim(w, 1, 1);  // generation 1 waiting
  // Generation 0 again while 1 waits: duplicate of the previous result.
  EXPECT_EQ(w.match(g0, &got), DropReason::kDuplicate);
  const proto::DataHeader g1 = result_for(w, 0);
  ASSERT_EQ(w.match(g1, &got), DropReason::kOk);
  w.complete(0);
  claim(w, 2, 1);  // generation 2 waiting
  EXPECT_EQ(w.match(g0, &got), DropReason::kStaleGeneration);
  EXPECT_EQ(w.match(g1, &got), DropReason::kDuplicate);
  w.complete(0);
  EXPECT_EQ(w.match(g0, &got), DropReason::kStaleGeneration);
}

TEST(SlotWindow, CompleteTwiceIsHarmlessAndClearFreesAll) {
  SlotWindow w(2);
  claim(w, 0, 1);
  claim(w, 1, 1);
  w.complete(0);
  w.complete(0);
  EXPECT_EQ(w.outstanding(), 1u);
  w.clear();
  EXPECT_EQ(w.outstanding(), 0u);
  EXPECT_TRUE(w.can_send());
  EXPECT_EQ(w.entry(1).req, nullptr);
}

}  // namespace
}  // namespace conflux::client
