// SPDX-License-Identifier: Apache-2.0
// Engines joined to in-process FakeAggregators, shared by the engine unit tests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "conflux/client/engine.h"
#include "fake_aggregator.h"

namespace conflux::client::testing {

// Loopback config for `rank` of n on `aggs`: window 4, 64-byte payloads (16 floats per
// packet, so the window wraps often), no spinning, 5 s join timeout.
ClientConfig fake_engine_config(const std::vector<FakeAggregator*>& aggs, uint32_t n,
                                uint32_t rank);

// Creates n engines concurrently (create blocks until every rank joined); `tweak` edits each
// config first. A failed create is a test failure and a null entry.
std::vector<std::unique_ptr<Engine>> make_engines(
    const std::vector<FakeAggregator*>& aggs, uint32_t n,
    const std::function<void(ClientConfig&)>& tweak = {});

}  // namespace conflux::client::testing
