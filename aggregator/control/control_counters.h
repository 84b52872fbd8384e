// SPDX-License-Identifier: Apache-2.0
// Control-plane counters and gauges. Written by the control thread only (single writer),
// readable from any thread.
#pragma once

#include "aggregator/engine/counters.h"
#include "conflux/protocol/control.h"

namespace conflux::agg {

// Reasons a control connection is answered with Error and closed (metrics label `reason`).
enum class ControlErrorReason : uint8_t {
  kBadMagic = 0,
  kBadVersion,
  kBadType,
  kTooLong,
  kBadLength,
  kBadField,
  kReservedNonZero,
  kUnexpectedMessage,  // a well-formed message the connection's state does not allow
  kCount
};
std::string_view control_error_name(ControlErrorReason r);
inline constexpr int kNumJoinStatuses = 12;

// Why a control connection was closed at accept, before any message, or why an older one that
// had not joined was closed to make room for it (label `reason`).
enum class RefuseReason : uint8_t {
  kTotalLimit = 0,  // max_control_connections open (as far as RLIMIT_NOFILE allows)
  kAddrLimit,       // max_control_connections_per_addr open from the peer's address
  kNoFds,           // the process is out of file descriptors (EMFILE/ENFILE)
  kCount
};
std::string_view refuse_reason_name(RefuseReason r);

// How a reload of the configuration ended (label `result`).
enum class ReloadResult : uint8_t { kApplied = 0, kRefused, kError, kCount };

struct ControlCounters {
  Counter connections_total;            // control connections accepted
  Counter connections_open;             // gauge
  Counter joins_total;                  // Join messages received
  Counter join_acks[kNumJoinStatuses];  // JoinAcks sent, by status
  Counter errors[static_cast<int>(ControlErrorReason::kCount)];
  Counter worker_timeouts;       // connections closed for silence
  Counter join_deadline_closes;  // connections closed without a Join by control_join_timeout_ms
  Counter refused[static_cast<int>(RefuseReason::kCount)];  // closed at accept, by reason
  // Connections without a Join closed to make room for a new one, by the limit that needed it.
  Counter evicted[static_cast<int>(RefuseReason::kCount)];
  Counter loop_stalls;  // control loop gaps >= max(worker_timeout_ms / 2, 250 ms)
  Counter jobs_created;
  Counter jobs_deleted;
  Counter jobs_active;              // gauge
  Counter slots_in_use;             // gauge
  Counter draining;                 // gauge: 1 while drained (conflux drain)
  Counter max_mbps;                 // gauge: the cap on result egress now (0 = none)
  Counter metrics_requests;         // HTTP requests served
  Counter multicast_groups_in_use;  // gauge: groups held by live jobs (SPEC §8)
  Counter multicast_decisions[2];   // jobs decided, [0] unicast, [1] multicast
  Counter multicast_unasked_mbps;   // gauge: multicast reaching this host unasked (flooded)
  Counter multicast_flood_unicast;  // multicast jobs moved to unicast for a flooding network
  Counter config_generation;        // gauge: 1 at start, +1 per applied reload
  Counter config_reloads[static_cast<int>(ReloadResult::kCount)];
};

}  // namespace conflux::agg
