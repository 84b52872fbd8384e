// SPDX-License-Identifier: Apache-2.0
// Multicast result delivery on this aggregator (protocol/SPEC.md §8), control half: grants a
// job its group when its rendezvous completes, probes the group, collects the ranks'
// MulticastAcks, decides once per job (multicast or unicast) and tells every rank, and gives
// the group back when the job ends. The datapath half is Job::multicast() and
// ResultBatch::Entry::for_each_destination. Control thread only.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/control/control_counters.h"
#include "aggregator/control/multicast_groups.h"
#include "aggregator/dataplane/dataplane.h"
#include "aggregator/engine/job.h"
#include "conflux/protocol/control.h"

namespace conflux::agg {

using ConnId = uint64_t;
using Clock = std::chrono::steady_clock;
class JoinOutbox;

class MulticastAgreement {
 public:
  // `ports`: the dataplane's ports (the group port defaults to the first).
  MulticastAgreement(const Config& cfg, const Dataplane& dp, const std::vector<uint16_t>& ports,
                     ControlCounters& counters);

  // A group for job `job_id` whose every rank asked for multicast, or nothing (multicast off,
  // or every group held). The group is the job's until on_job_end().
  std::optional<sockaddr_in> grant(uint32_t job_id);
  // After the JoinAcks with the group went out: probes, or decides at once when forced
  // (`no_probe`: every rank asked so, or multicast = on). `conns` by rank. `job` must stay
  // published until on_job_end().
  void start(Job& job, const std::vector<ConnId>& conns, bool no_probe, Clock::time_point now,
             JoinOutbox& out);
  // Rank `rank` of job `job_id` received the probe.
  void on_ack(uint32_t job_id, uint32_t rank, JoinOutbox& out);
  // Probes again and decides the jobs whose deadline passed; call every control-loop turn.
  void on_tick(Clock::time_point now, JoinOutbox& out);
  // The job was deleted: forget it and release its group.
  void on_job_end(uint32_t job_id);
  // Called when a job is decided multicast, before its ranks are told (MulticastMode), with
  // the ranks' connections (0 for a rank not here): a leaf may go straight down (SPEC.md §7).
  using OnMulticast = std::function<void(Job&, const std::vector<ConnId>&, JoinOutbox&)>;
  void set_on_multicast(OnMulticast f) { on_multicast_ = std::move(f); }

 private:
  struct Probe {
    Job* job;
    std::vector<ConnId> conns;    // by rank; 0 for a rank that is not here (under another
                                  // leaf of a reduction tree, SPEC section 7)
    std::vector<bool> confirmed;  // by rank
    uint32_t left;                // ranks here yet to confirm
    Clock::time_point deadline;
    Clock::time_point next_send;
    uint64_t sent = 0;  // probes sent (the next one's number)
  };

  bool send_probe(Probe& p);
  void decide(Probe& p, proto::MulticastMode mode, JoinOutbox& out);

  const Config& cfg_;
  const Dataplane& dp_;
  ControlCounters& counters_;
  std::optional<MulticastGroups> groups_;            // empty: multicast off
  uint16_t port_ = 0;                                // network order
  std::unordered_map<uint32_t, uint32_t> group_of_;  // job id -> group (host order)
  std::unordered_map<uint32_t, Probe> probing_;      // job id -> probe in progress
  OnMulticast on_multicast_;
};

}  // namespace conflux::agg
