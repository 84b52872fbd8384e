// SPDX-License-Identifier: Apache-2.0
// CollNet connect, phase 1 (rendezvous): the handles NCCL exchanges, the worker rings every
// rank builds to rank+1 (the main ring's lanes, the failover ring, the split ring, and the
// setup pair that carries connect's own agreements), the job's key, and which ranks share
// each aggregator (a reduction tree's leaves). Runs on NCCL's thread that calls connect.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "collnet/coll_comm.h"
#include "collnet/tree_layout.h"
#include "conflux/common/status.h"
#include "core/params.h"
#include "core/plugin_state.h"
#include "net/transport.h"
#include "net/wire.h"

namespace conflux::plugin::connect {

constexpr uint32_t kHandleMagic = 0x4346434e;  // "CFCN"
struct CollHandle {
  uint32_t magic;
  uint32_t version;
  uint8_t ring[net::wire::kHandleBytes];
};
static_assert(sizeof(CollHandle) <= size_t(nccl::NCCL_NET_HANDLE_MAXSIZE));

struct CollListen {
  static constexpr uint32_t kMagic = 0x434c5354;
  uint32_t magic = kMagic;
  int dev = 0;
  std::unique_ptr<net::ListenComm> ring;
  std::optional<uint64_t> comm_id;  // NCCL's commId (v11 contexts), the tuner's key
};

// What the rendezvous gives the later phases.
struct Rendezvous {
  collnet::CollRings rings;  // the communicator's, once it exists
  // The connection pair that carries connect's own exchanges (served counts, hop time, joins,
  // verdicts, probe outcomes). It stays with connect, which runs them on NCCL's thread, and
  // closes when connect returns: the communicator's rings belong to its threads.
  std::unique_ptr<net::SendComm> next;
  std::unique_ptr<net::RecvComm> prev;
  uint64_t key = 0;          // the job's key: identical on every rank, unique per communicator
  collnet::TreeCounts tree;  // ranks under each aggregator (and each level above it)
  // CONFLUX_AGGREGATORS with its dns: entries resolved (client/discovery.h), by rank 0 for
  // every rank that has rank 0's list; or why they could not be (`discovery`: the join then
  // declines).
  std::string aggregators;
  std::string stripe_weights;  // rank 0's CONFLUX_STRIPE_WEIGHTS, the same on every rank
  conflux::Status discovery;
};

// Checks every rank's handle, builds the rings (nranks > 1), derives the key, resolves the
// aggregator list (rank 0, sent around the ring) and exchanges the aggregator names. Logs one
// warning naming the rank and the step that failed.
Status rendezvous(const PluginState& s, const CollListen& l, void* const* handles, int rank,
                  int nranks, std::chrono::milliseconds timeout, Rendezvous* out);

}  // namespace conflux::plugin::connect
