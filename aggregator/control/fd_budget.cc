// SPDX-License-Identifier: Apache-2.0
#include "aggregator/control/fd_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>

#include "aggregator/config.h"

namespace conflux::agg {
namespace {

constexpr uint64_t kSpareFds = 32;

// Open descriptors of this process, not counting the one that lists them; 0 when /proc is
// not there (then the spare alone is kept).
uint64_t open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  uint64_t n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n > 0 ? n - 1 : 0;
}

}  // namespace

uint64_t spare_fds(const Config& cfg) {
  return kSpareFds + (cfg.parent.empty() ? 0 : static_cast<uint64_t>(cfg.max_jobs));
}

int64_t control_connection_limit(int64_t configured, const FdBudget& b) {
  if (b.soft_nofile == 0) return configured;
  const uint64_t kept = b.in_use + b.spare;
  const uint64_t room = b.soft_nofile > kept ? b.soft_nofile - kept : 0;
  const auto allowed = static_cast<int64_t>(std::min<uint64_t>(room, INT64_MAX));
  return std::max<int64_t>(1, std::min(configured, allowed));
}

uint64_t raise_nofile_soft_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  const rlim_t want = lim.rlim_max == RLIM_INFINITY
                          ? static_cast<rlim_t>(kMaxSoftNofile)
                          : std::min<rlim_t>(lim.rlim_max, kMaxSoftNofile);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return lim.rlim_cur == RLIM_INFINITY ? 0 : lim.rlim_cur;
}

FdBudget read_fd_budget(uint64_t spare) {
  FdBudget b;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    b.soft_nofile = lim.rlim_cur;
  }
  b.in_use = open_fds();
  b.spare = spare;
  return b;
}

}  // namespace conflux::agg
