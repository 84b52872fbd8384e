// SPDX-License-Identifier: Apache-2.0
// Process-wide DPDK state: the EAL (initialized once per process: rte_eal_init cannot run
// twice) and the mbuf pools (kept for the life of the process so that a port reconfigured by
// a later dataplane never refers to a freed pool). Main thread only.
#pragma once

#include <cstdint>
#include <string>

#include "conflux/common/status.h"

struct rte_mempool;

namespace conflux::agg::dpdk {

// Runs rte_eal_init with the whitespace-separated `args` (no quoting) the first time; later
// calls return its outcome again (a warning is logged when their args differ). Ok, or
// system_error when rte_eal_init failed.
Status eal_init_once(const std::string& args);

// A pktmbuf pool with at least `n` mbufs of `data_room` bytes on `socket`, created on first
// use and reused by later calls asking for no more. nullptr + *err on failure.
rte_mempool* shared_pool(const char* kind, uint32_t n, uint16_t data_room, int socket,
                         std::string* err);

}  // namespace conflux::agg::dpdk
