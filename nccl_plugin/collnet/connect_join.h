// SPDX-License-Identifier: Apache-2.0
// CollNet connect, phase 3 (join): every rank joins the job on the aggregators of
// CONFLUX_AGGREGATORS (client::Engine), and the ranks agree over the setup pair on the entries
// they all joined, so a striped job goes on without an aggregator that refused it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "collnet/connect_ring.h"
#include "collnet/tree_layout.h"
#include "conflux/client/engine.h"
#include "conflux/common/status.h"
#include "core/params.h"

namespace conflux::plugin::connect {

// The engine's settings for this rank (also the re-join's base, connect_agree.h) into *out;
// invalid_argument when CONFLUX_AGGREGATORS or CONFLUX_STRIPE_WEIGHTS cannot be used.
conflux::Status engine_config(const Config& c, uint64_t key, int nranks, int rank,
                              const collnet::TreeCounts& tree, client::ClientConfig* out);

// client::Engine::create as a Status: *out gets the engine, or the error says why the
// aggregators of `cfg` could not be joined (unavailable).
conflux::Status create_engine(const client::ClientConfig& cfg,
                              std::unique_ptr<client::Engine>* out);

// Joins and agrees; *out: the engine on the entries every rank joined, or the error says why
// not. Every rank takes part in the agreement exactly once, whatever happens to its own join.
conflux::Status join(const Config& cfg, Rendezvous& rv, int rank, int nranks,
                     std::chrono::milliseconds timeout, std::unique_ptr<client::Engine>* out);

}  // namespace conflux::plugin::connect
