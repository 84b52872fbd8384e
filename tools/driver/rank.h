// SPDX-License-Identifier: Apache-2.0
// One rank of the driver: everything a single NCCL process would do with the plugin.
#pragma once

#include "driver/options.h"
#include "driver/sockets.h"

namespace conflux::driver {

// Runs rank `rank` of `nranks` to completion and returns the process exit code: 0 when every
// result verified, 1 on wrong results or any error (printed to stderr with the rank). Rank 0
// serves the bootstrap on `listen_fd` if >= 0, else on `root`. Must run in a process of its own
// (it loads the plugin, sets CONFLUX_* variables and may _exit on fatal errors).
int run_rank(const Options& o, int rank, int nranks, const Endpoint& root, int listen_fd);

}  // namespace conflux::driver
