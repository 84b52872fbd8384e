// SPDX-License-Identifier: Apache-2.0
// How many control connections RLIMIT_NOFILE leaves room for (aggregator/control/fd_budget.h).
#include "aggregator/control/fd_budget.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "aggregator/config.h"
#include "gtest/gtest.h"

namespace conflux::agg {
namespace {

TEST(FdBudget, TheLimitIsWhatTheDescriptorsLeaveAndNeverMoreThanConfigured) {
  // soft limit - open at start - spare
  EXPECT_EQ(control_connection_limit(4096, {1024, 13, 32}), 979);
  EXPECT_EQ(control_connection_limit(4096, {256, 13, 32}), 211);
  EXPECT_EQ(control_connection_limit(100, {1024, 13, 32}), 100);  // the config is the bound
  EXPECT_EQ(control_connection_limit(4096, {0, 13, 32}), 4096);   // unlimited or unknown
  // Nothing left: one connection still, EMFILE eviction does the rest.
  EXPECT_EQ(control_connection_limit(4096, {40, 13, 32}), 1);
  EXPECT_EQ(control_connection_limit(4096, {45, 13, 32}), 1);
  EXPECT_EQ(control_connection_limit(4096, {46, 13, 32}), 1);
  EXPECT_EQ(control_connection_limit(4096, {47, 13, 32}), 2);
}

TEST(FdBudget, ALeafOfATreeKeepsOneDescriptorPerJobForItsUplinks) {
  Config cfg;
  cfg.max_jobs = 64;
  EXPECT_EQ(spare_fds(cfg), 32u);
  cfg.parent = "127.0.0.1:7470";
  EXPECT_EQ(spare_fds(cfg), 96u);
}

TEST(FdBudget, ReadsTheSoftLimitAndCountsOpenDescriptors) {
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  const FdBudget before = read_fd_budget(7);
  EXPECT_EQ(before.spare, 7u);
  if (lim.rlim_cur != RLIM_INFINITY) {
    EXPECT_EQ(before.soft_nofile, lim.rlim_cur);
  }
  EXPECT_GE(before.in_use, 3u);  // stdin, stdout, stderr at least
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(read_fd_budget(7).in_use, before.in_use + 1);
  close(fd);
}

TEST(FdBudget, TheSoftDescriptorLimitIsRaisedToTheHardOne) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  // Start from a low soft limit under the same hard one, as a login shell would leave it.
  rlimit low = before;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const uint64_t soft = raise_nofile_soft_limit();
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  const uint64_t want = before.rlim_max == RLIM_INFINITY
                            ? kMaxSoftNofile
                            : std::min<uint64_t>(before.rlim_max, kMaxSoftNofile);
  EXPECT_EQ(now.rlim_cur, want);
  EXPECT_EQ(soft, want);
  EXPECT_EQ(now.rlim_max, before.rlim_max);  // the hard limit is left alone
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
}

}  // namespace
}  // namespace conflux::agg
