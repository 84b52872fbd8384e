// SPDX-License-Identifier: Apache-2.0
// The plugin's one test-hook seam: what the CONFLUX_FAULT_* settings do to a CollNet
// communicator (the client engine's datagram faults are client/src/fault.h). Compiled only in
// test builds (CONFLUX_TEST_HOOKS, top-level CMakeLists.txt); in a package build every hook
// below does nothing, and core/params.cc has no CONFLUX_FAULT_* setting to read.
#pragma once

#include <cstdint>

#include "collnet/coll_comm.h"
#include "conflux/client/config.h"
#include "core/params.h"
#include "net/log.h"
#include "net/status.h"

namespace conflux::collnet::hooks {

#ifdef CONFLUX_TEST_HOOKS

// The CONFLUX_FAULT_* settings apply to CONFLUX_FAULT_RANK (or every rank when it is -1).
inline bool appliesTo(const plugin::Config& c, int rank) {
  return c.faultRank < 0 || c.faultRank == rank;
}

// CONFLUX_FAULT_DROP / _MULTICAST_DROP / _RX_BLACKOUT: the datagram faults of an engine.
inline void engineFaults(const plugin::Config& c, int rank, client::ClientConfig* cfg) {
  if (!appliesTo(c, rank)) return;
  cfg->faults.drop = c.faultDrop;
  cfg->faults.multicast_drop = c.faultMulticastDrop;
  cfg->faults.rx_blackout_after = static_cast<uint64_t>(c.faultRxBlackout);
}

// The faults are for the first engine only, not for those a failover rejoin makes.
inline void clearEngineFaults(client::ClientConfig* cfg) { cfg->faults = {}; }

// CONFLUX_FAULT_ABORT_AT=N: the engine fails at the job's N-th request, counted after the
// `connect_requests` that connect makes itself.
inline void abortAt(const plugin::Config& c, int rank, uint32_t connect_requests,
                    CollOptions* opts) {
  if (appliesTo(c, rank) && c.faultAbortAt > 0) {
    opts->fault_abort_at = static_cast<uint32_t>(c.faultAbortAt) + connect_requests;
  }
}

// Whether a request may complete inline (the abort comes from the completion thread).
inline bool allowsInline(const CollOptions& o) { return o.fault_abort_at == 0; }

// Called as the completion thread reaches request `seq` in epoch `epoch` of `path` (an
// AggregatorPath): the first engine (epoch 0) is aborted at the request.
template <typename Path>
void atRequest(const CollOptions& o, uint32_t epoch, uint32_t seq, Path& path) {
  if (epoch == 0 && o.fault_abort_at != 0 && seq == o.fault_abort_at) {
    path.abort("fault injection (CONFLUX_FAULT_ABORT_AT)");
  }
}

// CONFLUX_FAULT_PROBE_FAIL: 1, this rank reports its connect probe as failed after running
// it; 2, the same, but it tells the others that it succeeded, so it declines alone (as a rank
// failing after the agreement would). Returns the probe's verdict; *told is what the others
// hear.
inline net::Status probeVerdict(const plugin::Config& c, int rank, net::Status st,
                                net::Status* told) {
  const bool fault = c.faultProbeFail != 0 && appliesTo(c, rank);
  if (st == net::Status::kOk && fault) {
    CFX_WARN(net::kLogColl, "CONFLUX_FAULT_PROBE_FAIL: rank %d reports its probe as failed", rank);
    st = net::Status::kInternalError;
  }
  *told = fault && c.faultProbeFail == 2 ? net::Status::kOk : st;
  return st;
}

#else  // package build: no test hooks

inline void engineFaults(const plugin::Config&, int, client::ClientConfig*) {}
inline void clearEngineFaults(client::ClientConfig*) {}
inline void abortAt(const plugin::Config&, int, uint32_t, CollOptions*) {}
inline constexpr bool allowsInline(const CollOptions&) { return true; }
template <typename Path>
void atRequest(const CollOptions&, uint32_t, uint32_t, Path&) {}
inline net::Status probeVerdict(const plugin::Config&, int, net::Status st, net::Status* told) {
  *told = st;
  return st;
}

#endif

}  // namespace conflux::collnet::hooks
