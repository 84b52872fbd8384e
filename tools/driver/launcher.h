// SPDX-License-Identifier: Apache-2.0
// Fork mode (--nranks N): N rank processes on this machine, each its own "node".
#pragma once

#include "driver/options.h"

namespace conflux::driver {

// Binds the bootstrap on 127.0.0.1 (free port), forks N children running run_rank() and
// waits. A child that fails (non-zero exit or signal) is reported; the others then exit on
// their own (liveness watch) or are killed after a grace period; past --timeout (+ grace)
// every child is killed. Children die with the parent (PR_SET_PDEATHSIG). Returns the exit
// code: 0 only if every rank exited 0.
int run_forked(const Options& o);

// Env mode: one rank from CONFLUX_DRIVER_RANK / _NRANKS / _ROOT=host:port.
int run_from_env(const Options& o);

}  // namespace conflux::driver
