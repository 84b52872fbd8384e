// Rendezvous and job life cycle (SPEC.md §4), without any socket code.
// Groups Joins by job_key; when all n_workers ranks are in, creates the Job (id, random token,
// slot quota from total_slots/max_slots_per_job, payload limit), publishes it in the JobTable
// and answers every rank at once. Deletes a job when every rank has left or disconnected.
// Control thread only.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/control/control_counters.h"
#include "aggregator/control/multicast_agreement.h"
#include "aggregator/engine/job_table.h"
#include "aggregator/util/rate_limit.h"
#include "conflux/protocol/control.h"

namespace conflux::agg {

using ConnId = uint64_t;
using Clock = std::chrono::steady_clock;

// Where JobManager sends its answers (implemented by the control plane).
class JoinOutbox {
 public:
  virtual ~JoinOutbox() = default;
  // Sends `ack` on connection `conn`. status ok: the connection becomes a member of job
  // ack.job_id; any other status: the connection is closed after the ack.
  virtual void deliver(ConnId conn, const proto::JoinAck& ack) = 0;
  // Sends `m` on member connection `conn` (ignored when it is gone or closing).
  virtual void send_to(ConnId conn, const proto::ControlMsg& m) = 0;
};

class JobManager {
 public:
  // `multicast` (may be null: unicast only) grants and agrees the jobs' groups (SPEC §7).
  JobManager(const Config& cfg, JobTable& jobs, std::vector<uint16_t> ports,
             ControlCounters& counters, MulticastAgreement* multicast = nullptr);

  // A validated (and authenticated) Join from `conn`; `peer` is the TCP peer address, used
  // when join.udp_addr is 0. Answers through `out`, now or when the rendezvous completes.
  void on_join(ConnId conn, const proto::Join& join, const sockaddr_in& peer, Clock::time_point now,
               JoinOutbox& out);

  // The connection that joined (job_key, rank) left, closed or timed out. `member` tells
  // whether it had received its JoinAck (else it was still waiting in the rendezvous).
  void on_gone(ConnId conn, uint64_t job_key, uint32_t rank, bool member);

  // Join timeouts and memory reclamation; call periodically.
  void on_tick(Clock::time_point now, JoinOutbox& out);

  // Moves every rendezvous deadline `by` later (the control thread did not run for that long).
  void postpone(Clock::duration by);

  // Rejects every waiting rank (daemon stopping).
  void cancel_pending(proto::Status status, JoinOutbox& out);

  size_t pending_jobs() const { return pending_.size(); }
  size_t active_jobs() const { return active_.size(); }

 private:
  struct Waiting {
    ConnId conn;
    sockaddr_in addr;  // where this rank receives results
    uint8_t flags;     // its Join's flags (the multicast bits are per rank)
  };
  struct Pending {
    proto::Join first;
    Clock::time_point deadline;
    std::vector<std::optional<Waiting>> ranks;
    uint32_t joined = 0;
  };
  struct Active {
    uint32_t job_id;
    uint32_t slots;
    std::vector<ConnId> conns;  // by rank; 0 once gone
    uint32_t alive;
  };

  void complete(uint64_t key, Pending& p, Clock::time_point now, JoinOutbox& out);
  void reject(ConnId conn, proto::Status s, JoinOutbox& out);

  const Config& cfg_;
  JobTable& jobs_;
  std::vector<uint16_t> ports_;
  ControlCounters& counters_;
  MulticastAgreement* multicast_;
  std::unordered_map<uint64_t, Pending> pending_;
  std::unordered_map<uint64_t, Active> active_;
  uint64_t slots_used_ = 0;
  RateLimiter log_limit_;  // every line a client can trigger (SPEC: no client floods the log)
};

}  // namespace conflux::agg
