// SPDX-License-Identifier: Apache-2.0
// conflux::Status (common/include/conflux/common/status.h): ok by default, a code and a message
// otherwise, prefixed() and CFX_TRY.
#include <gtest/gtest.h>

#include <utility>

#include "conflux/common/status.h"

namespace conflux {
namespace {

TEST(Status, DefaultIsOkWithoutMessage) {
  const Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kOk);
  EXPECT_EQ(st.message(), "");
}

TEST(Status, FactoriesSetCodeAndMessage) {
  const Status st = unavailable("aggregator 10.0.0.1:7470: connection refused");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_EQ(st.message(), "aggregator 10.0.0.1:7470: connection refused");
  EXPECT_EQ(invalid_argument("x").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(refused("x").code(), Status::Code::kRefused);
  EXPECT_EQ(timed_out("x").code(), Status::Code::kTimeout);
  EXPECT_EQ(system_error("x").code(), Status::Code::kSystem);
  EXPECT_EQ(internal_error("x").code(), Status::Code::kInternal);
  EXPECT_STREQ(to_string(Status::Code::kTimeout), "timed out");
}

TEST(Status, PrefixedKeepsTheCodeAndLeavesOkAlone) {
  const Status st = timed_out("no answer").prefixed("parent uplink: ");
  EXPECT_EQ(st.code(), Status::Code::kTimeout);
  EXPECT_EQ(st.message(), "parent uplink: no answer");
  const Status ok = Status().prefixed("parent uplink: ");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
}

// A step of two_steps: counts its runs and returns `result`.
Status step(int* runs, Status result) {
  ++*runs;
  return result;
}

// Runs two steps through CFX_TRY: the second only when the first is ok.
Status two_steps(Status first, Status second, int* runs) {
  CFX_TRY(step(runs, std::move(first)));
  CFX_TRY(step(runs, std::move(second)));
  return {};
}

TEST(Status, TryReturnsTheFirstFailure) {
  int runs = 0;
  EXPECT_TRUE(two_steps(Status(), Status(), &runs).ok());
  EXPECT_EQ(runs, 2);
  runs = 0;
  const Status st = two_steps(system_error("bind: in use"), refused("never run"), &runs);
  EXPECT_EQ(st.code(), Status::Code::kSystem);
  EXPECT_EQ(st.message(), "bind: in use");
  EXPECT_EQ(runs, 1);
  runs = 0;
  EXPECT_EQ(two_steps(Status(), refused("no").prefixed("join: "), &runs).message(), "join: no");
  EXPECT_EQ(runs, 2);
}

}  // namespace
}  // namespace conflux
