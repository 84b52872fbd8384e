// SPDX-License-Identifier: Apache-2.0
// Rendezvous and job life cycle (SPEC.md §4), without any socket code.
// Groups Joins by job_key; when the joined weights reach the job's `served` ranks (all
// n_workers ranks at depth 1, SPEC.md §7), creates the Job (id, random token, slot quota from
// total_slots/max_slots_per_job, payload limit), publishes it in the JobTable and answers every
// member at once. On a leaf of a reduction tree (`parent` configured) it first joins the
// parent through the UplinkClient and creates the job with the parent's grant. Deletes a job
// when every member has left or disconnected (a leaf then leaves the parent); a lost parent
// ends the leaf's job for its members. Fair share: the daemon's bandwidth capacity is divided
// among the live jobs in proportion to their weights (1 for the shared secret, the tenant's
// weight for a job whose Joins authenticated with a tenant's secret; every rank of a job must
// be of the same tenant); when a job joins or leaves, every other live job
// whose grant changed is told (Capacity update, SPEC.md §3), and with max_mbps each job's
// result sends are paced to its grant while more than one job is live. Control thread only.
//
// One class, one file per responsibility: job_manager.cc (construction, creating a job,
// ending it, the periodic tick), job_rendezvous.cc (admission and rendezvous), job_tree.cc
// (the reduction tree: a leaf's uplink, results straight down), job_share.cc (fair-share
// grants, result rates, multicast flood to unicast).
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
#include "aggregator/control/multicast_flood.h"
#include "aggregator/engine/job_table.h"
#include "aggregator/tree/uplink_client.h"
#include "aggregator/util/rate_limit.h"
#include "conflux/common/status.h"
#include "conflux/protocol/control.h"

namespace conflux::agg {

using ConnId = uint64_t;
using Clock = std::chrono::steady_clock;

// Who a Join authenticated as: kSharedTenant (the shared secret, or no authentication
// configured), else 1 + the tenant's index in Config::tenants.
inline constexpr uint32_t kSharedTenant = 0;
// Set in a tenant id whose Join authenticated with the secret before a reload (the shared one
// or the tenant's; secret_overlap_s): the job's data MAC is keyed from that secret.
inline constexpr uint32_t kPreviousSecret = 0x80000000u;

// Where JobManager sends its answers (implemented by the control plane).
class JoinOutbox {
 public:
  virtual ~JoinOutbox() = default;
  // Sends `ack` on connection `conn`. status ok: the connection becomes a member of job
  // ack.job_id; any other status: the connection is closed after the ack.
  virtual void deliver(ConnId conn, const proto::JoinAck& ack) = 0;
  // Ends member connection `conn` with Error{status, text} (its job cannot go on).
  virtual void end_member(ConnId conn, proto::Status status, const std::string& text) = 0;
  // Sends `m` on member connection `conn` (ignored when it is gone or closing).
  virtual void send_to(ConnId conn, const proto::ControlMsg& m) = 0;
  // Tells member `conn` its job's new grant (a Capacity update, only if its Join asked for
  // Capacity messages).
  virtual void send_grant(ConnId conn, uint32_t share_mbps, proto::CapacityReason why) = 0;
};

class JobManager {
 public:
  // `uplink`: this leaf's link to its parent aggregator, or null (no parent: depth 1).
  // `multicast` (may be null: unicast only) grants and agrees the jobs' groups (SPEC §8).
  // `dp`: its ports are the jobs' data ports; its counters tell what it received.
  JobManager(const Config& cfg, JobTable& jobs, const Dataplane& dp, ControlCounters& counters,
             UplinkClient* uplink = nullptr, MulticastAgreement* multicast = nullptr);

  // Handles what the UplinkClient reports (call when its event fd is readable).
  void on_uplink_events(JoinOutbox& out);

  // A validated Join from `conn`, authenticated as `tenant`; `peer` is the TCP peer address,
  // used when join.udp_addr is 0. Answers through `out`, now or when the rendezvous completes.
  void on_join(ConnId conn, const proto::Join& join, uint32_t tenant, const sockaddr_in& peer,
               Clock::time_point now, JoinOutbox& out);

  // The connection that joined (job_key, rank) left, closed or timed out. `member` tells
  // whether it had received its JoinAck (else it was still waiting in the rendezvous);
  // `lost`: it did not send Leave. A lost child aggregator breaks its job (SPEC.md §7).
  // A deleted job frees its share: the other jobs are told their new grants through `out`.
  void on_gone(ConnId conn, uint64_t job_key, uint32_t rank, bool member, bool lost,
               JoinOutbox& out);

  // Join timeouts and memory reclamation; call periodically.
  void on_tick(Clock::time_point now, JoinOutbox& out);

  // Moves every rendezvous deadline `by` later (the control thread did not run for that long).
  void postpone(Clock::duration by);

  // Rejects every waiting rank (daemon stopping).
  void cancel_pending(proto::Status status, JoinOutbox& out);

  // Results straight down (SPEC.md §7): whether this daemon, as a parent, may send a child's
  // results to its members' group (it can send multicast).
  void set_direct_results(bool can) { direct_results_ = can; }
  // DirectDown from member `rank` of live job `job_key`: ok when taken or ignored (logged), else
  // invalid_argument saying why the connection broke the protocol (it was never offered direct
  // results).
  Status on_direct_down(uint64_t job_key, uint32_t rank, const proto::DirectDown& d);

  // The bandwidth capacity divided among the jobs, Mbit/s (0 = unknown: no grants). While
  // several jobs are live, each job's result sends are paced to its grant.
  void set_capacity(uint32_t capacity_mbps) { capacity_mbps_ = capacity_mbps; }
  // After set_capacity changed the capacity (conflux throttle): divides it again and tells
  // every job whose grant moved. Returns how many jobs were told.
  size_t regrant_all(proto::CapacityReason why, JoinOutbox& out);
  // The grant of live job `job_key`, Mbit/s (0 = unknown or no such job).
  uint32_t share_mbps(uint64_t job_key) const;

  size_t pending_jobs() const { return pending_.size(); }
  size_t active_jobs() const { return active_.size(); }

  // The secret tenant id `tenant` authenticates with: the shared one for kSharedTenant, else
  // the tenant's; with kPreviousSecret, the one before the last reload that changed secrets
  // (set_previous_secrets). It keys the data MAC of the tenant's jobs. Control thread.
  const std::string& tenant_secret(uint32_t tenant) const;
  // After a reload changed secrets: the shared one and the tenants' (in cfg.tenants order)
  // before it. Control thread.
  void set_previous_secrets(std::string shared, std::vector<std::string> tenants) {
    previous_secret_ = std::move(shared);
    previous_tenant_secrets_ = std::move(tenants);
  }

 private:
  struct Waiting {
    ConnId conn;
    sockaddr_in addr;  // where this rank receives results
    uint16_t weight;
    std::vector<sockaddr_in> child_addrs;  // a child aggregator's data ports
    uint8_t flags;                         // its Join's flags (the multicast bits are per rank)
  };
  struct Pending {
    proto::Join first;
    uint32_t tenant = kSharedTenant;  // of the first Join; every other rank's must match
    Clock::time_point deadline;
    std::vector<std::optional<Waiting>> ranks;
    uint32_t joined = 0;  // weight joined so far
    // Granted here, waiting for the parent's JoinAck (leaf only).
    uint32_t granted = 0;
    uint32_t payload_bytes = 0;
    bool abandoned = false;  // a member left meanwhile
  };
  struct Active {
    uint32_t job_id;
    uint32_t slots;
    std::vector<ConnId> conns;  // by rank; 0 once gone
    uint32_t alive;
    std::vector<bool> child;      // by rank: a child aggregator (it gave its data ports)
    std::vector<bool> direct_ok;  // by rank: a child told it may send DirectDown
    bool broken = false;        // a child aggregator was lost: on_tick() ends the job for the rest
    Job* job = nullptr;         // published; freed only after retire(); holds its grant
    uint64_t result_bytes = 0;  // at the last rate sample
    uint32_t tenant = kSharedTenant;  // its weight is read at every grant (a reload may move it)
  };

  // job_manager.cc. The tenant's name for logs and metrics ("" for kSharedTenant) and its
  // weight.
  std::string_view tenant_name(uint32_t tenant) const;
  uint32_t tenant_weight(uint32_t tenant) const;
  // Creates and publishes the job, answers its members and starts its multicast agreement.
  void create(uint64_t key, Pending& p, uint32_t granted, uint32_t payload_bytes,
              bool deterministic, std::shared_ptr<const JobParams::Uplink> uplink,
              Clock::time_point now, JoinOutbox& out);

  // job_rendezvous.cc. Every rank is there: grants the slots, then creates the job or (a leaf)
  // joins the parent first.
  void complete(uint64_t key, Pending& p, Clock::time_point now, JoinOutbox& out);
  void reject(ConnId conn, proto::Status s, JoinOutbox& out);
  void no_capacity(uint64_t key, Pending& p, JoinOutbox& out);
  // Rejects the ranks of every rendezvous past its deadline.
  void expire_rendezvous(Clock::time_point now, JoinOutbox& out);

  // job_tree.cc. A leaf joins the parent for job `key` with this daemon's grant.
  void join_parent(uint64_t key, Pending& p, uint32_t granted, uint32_t payload,
                   bool deterministic);
  void uplink_joined(const UplinkEvent& e, JoinOutbox& out);
  // Answers the ranks of a job that waited for its parent with `status`, freeing its slots.
  void give_up_uplinking(std::unordered_map<uint64_t, Pending>::iterator it, proto::Status status,
                         JoinOutbox& out);
  // Leaf: the job's members agreed on its multicast group; when the parent takes DirectDown,
  // tell every member the parent's data address (ResultSource), then ask the parent.
  void go_straight_down(Job& job, const std::vector<ConnId>& conns, JoinOutbox& out);

  // job_share.cc. Divides the capacity among the live jobs again after job `changed` joined or
  // left; tells every other job whose grant changed.
  void regrant(uint64_t changed, proto::CapacityReason why, JoinOutbox& out);
  size_t regrant_except(std::optional<uint64_t> changed, proto::CapacityReason why,
                        JoinOutbox& out);
  // Each job's achieved result rate (metrics, grants); then whether the network floods
  // multicast here, and if so which multicast jobs go unicast (multicast_flood.h).
  void sample_rates(Clock::time_point now);
  // `watch`: a job here is multicast and none has a worker on this host.
  void flood_to_unicast(bool watch, uint64_t asked_bytes, double seconds, double egress_mbps);
  bool is_local(const sockaddr_in& a) const;  // 127/8 or an address of this host

  const Config& cfg_;
  std::string previous_secret_;  // set_previous_secrets()
  std::vector<std::string> previous_tenant_secrets_;
  JobTable& jobs_;
  const Dataplane& dp_;
  std::vector<uint16_t> ports_;
  ControlCounters& counters_;
  MulticastAgreement* multicast_;
  std::unordered_map<uint64_t, Pending> pending_;
  std::unordered_map<uint64_t, Active> active_;
  std::unordered_map<uint64_t, Pending> uplinking_;  // waiting for the parent (leaf)
  UplinkClient* uplink_;
  uint64_t slots_used_ = 0;
  uint32_t capacity_mbps_ = 0;
  bool direct_results_ = false;
  Clock::time_point last_sample_{};
  MulticastFlood flood_;
  std::vector<in_addr_t> local_addrs_;  // this host's IPv4 addresses, and cfg_.listen
  uint64_t dp_in_bytes_ = 0;  // the dataplane's bytes and datagrams in, at the last sample
  uint64_t dp_in_packets_ = 0;
  RateLimiter log_limit_;  // every line a client can trigger (SPEC: no client floods the log)
};

}  // namespace conflux::agg
