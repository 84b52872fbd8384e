// SPDX-License-Identifier: Apache-2.0
// How many control connections the process's descriptors allow (RLIMIT_NOFILE). A flood of
// connections that never join must run into the control plane's own limit, where the oldest
// of them is evicted to make room, and not into EMFILE, where every new connection (a rank's
// too) is lost. control_connection_limit() is the policy, with no I/O; read_fd_budget() reads
// its inputs once, when the control plane is created (control_setup.cc).
#pragma once

#include <cstdint>

namespace conflux::agg {

struct Config;

struct FdBudget {
  uint64_t soft_nofile = 0;  // RLIMIT_NOFILE soft limit; 0: unlimited or unknown
  uint64_t in_use = 0;       // descriptors open when the control plane starts
  uint64_t spare = 0;        // kept for what opens descriptors later (spare_fds)
};

// Descriptors beyond those open at start that control connections must leave free: 32 for
// metrics requests, files read while running (/proc, /sys) and the spare of the accept path,
// plus one uplink connection per job (max_jobs) on a leaf of a reduction tree (`parent` set).
uint64_t spare_fds(const Config& cfg);

// The effective limit on open control connections: min(configured, soft_nofile - in_use -
// spare), at least 1; `configured` when soft_nofile is 0.
int64_t control_connection_limit(int64_t configured, const FdBudget& b);

// getrlimit(RLIMIT_NOFILE) and the descriptors open now (/proc/self/fd).
FdBudget read_fd_budget(uint64_t spare);

// Raises the soft RLIMIT_NOFILE to the hard limit (at most kMaxSoftNofile), as many daemons
// and systemd's LimitNOFILE= do: a login shell's soft 1024 would otherwise cap the control
// connections far below what the hard limit allows. confluxd calls it once at start. Returns
// the soft limit in force afterwards (0: unlimited or unknown).
inline constexpr uint64_t kMaxSoftNofile = 1 << 20;
uint64_t raise_nofile_soft_limit();

}  // namespace conflux::agg
