// SPDX-License-Identifier: Apache-2.0
// One TCP connection served by the control thread: a control channel to a worker or an HTTP
// request to the metrics endpoint. Plain data; the control plane drives it.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <vector>

#include "aggregator/control/job_manager.h"

namespace conflux::agg {

struct Connection {
  enum class Kind : uint8_t { kControl, kMetrics };
  enum class State : uint8_t {
    kHello,    // ServerHello sent, waiting for Join
    kPending,  // Join accepted, waiting for the other ranks
    kMember,   // JoinAck ok sent: member of job `job_id`
    kClosing,  // last message queued; close once written (or at close_deadline)
  };

  ConnId id = 0;
  int fd = -1;
  Kind kind = Kind::kControl;
  State state = State::kHello;
  sockaddr_in peer{};
  std::vector<uint8_t> rbuf;  // received, not yet parsed
  std::vector<uint8_t> wbuf;  // to send, from wpos
  size_t wpos = 0;
  bool epollout = false;    // EPOLLOUT registered
  bool write_shut = false;  // our FIN is sent (closing)
  bool dead = false;        // to be closed and erased at the end of this loop iteration
  uint64_t nonce = 0;
  Clock::time_point accepted{};  // the Join deadline runs from here (Heartbeats do not move it)
  Clock::time_point last_rx{};
  Clock::time_point last_heartbeat{};
  Clock::time_point close_deadline{};
  uint64_t job_key = 0;
  uint32_t rank = 0;
  uint32_t job_id = 0;
  bool wants_capacity = false;  // its Join set kJoinFlagCapacity
  // Its Join carried the versions it speaks (kJoinFlagVersions): the JoinAck names the one
  // the job speaks here.
  bool told_versions = false;
  uint8_t version = proto::kMinProtocolVersion;
  bool left = false;  // sent Leave (not lost)
  // Sent a Join that authenticated: never evicted to make room for a new connection (a
  // connection without one may be: ControlPlane::make_room).
  bool joined = false;
};

}  // namespace conflux::agg
