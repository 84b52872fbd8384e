// SPDX-License-Identifier: Apache-2.0
// Skips that CI must not accept. A test that cannot run because this machine lacks a tool, a
// permission or a build option that scripts/setup.sh and scripts/test.sh provide skips with the
// reason on a developer machine, but FAILS when CONFLUX_CI=1 (.ci/run exports it), so that a CI
// run cannot pass with part of the suite skipped. Skips that the kernel or the CPU forces
// (no 802.1Q, an ISA this CPU lacks) use plain GTEST_SKIP(); README.md lists them.
#pragma once

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace conflux::testing {

// True when CONFLUX_CI is set to anything but "" or "0".
inline bool under_ci() {
  const char* v = std::getenv("CONFLUX_CI");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

inline ::testing::TestPartResult::Type ci_skip_result() {
  return under_ci() ? ::testing::TestPartResult::kFatalFailure : ::testing::TestPartResult::kSkip;
}

inline const char* ci_skip_prefix() {
  return under_ci() ? "a skip that CONFLUX_CI=1 forbids (scripts/setup.sh installs every tool the "
                      "tests need; CI runs as root with every build option): "
                    : "";
}

}  // namespace conflux::testing

// GTEST_SKIP() << why, or a fatal failure << why under CONFLUX_CI=1. Use it where GTEST_SKIP()
// may be used (a void function: a TEST body, SetUp) and stream the reason after it.
#define CONFLUX_SKIP_UNLESS_CI()                                                             \
  return ::testing::internal::AssertHelper(::conflux::testing::ci_skip_result(), __FILE__,   \
                                           __LINE__, ::conflux::testing::ci_skip_prefix()) = \
             ::testing::Message()
