// SPDX-License-Identifier: Apache-2.0
// A job: the immutable description agreed at rendezvous plus the slot state, sharded so that
// slot s lives in shard (s mod n_queues) and is touched only by that dataplane thread.
// Created by the control thread, published through JobTable, freed by the control thread
// only after every dataplane thread passed a quiescent point (see job_table.h).
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aggregator/engine/counters.h"
#include "aggregator/engine/slot.h"
#include "aggregator/util/token_bucket.h"
#include "conflux/protocol/data_mac.h"

namespace conflux::agg {

struct JobParams {
  uint32_t id = 0;
  uint64_t key = 0;
  uint64_t token = 0;
  uint32_t n_workers = 0;
  uint32_t slots = 0;          // granted_slots
  uint32_t payload_bytes = 0;  // granted payload per packet
  bool deterministic = false;
  std::vector<sockaddr_in> workers;  // result address of each rank (index = rank)
  // Data MAC key (SPEC.md §6), or nullopt: the job's packets carry no MAC.
  std::optional<proto::DataKey> mac_key;
  // Fair share: the tenant whose secret its Joins carried ("" = the shared secret) and the
  // job's weight in the division of the daemon's bandwidth (control/job_manager.h).
  std::string tenant;
  uint32_t share_weight = 1;

  // Reduction tree (SPEC.md §7). Depth 1 (the default): every rank is a member of weight 1
  // and served == n_workers. Otherwise only the ranks in `members` joined here, each
  // contributing for weight[rank] ranks; a slot completes when the weights of its
  // contributors add up to `served`.
  uint32_t served = 0;
  std::vector<uint32_t> members;  // ranks that joined, ascending (the fan-out and the order)
  std::vector<uint16_t> weight;   // by rank; 0 = not a member
  // A child aggregator's data ports: slot s goes to (and comes from) ports[s % n]. Empty for
  // a worker (workers[rank] only).
  std::vector<std::vector<sockaddr_in>> child_addrs;  // by rank
  // Set on a leaf whose job feeds a parent aggregator: complete slots go up, results come
  // down from the parent.
  struct Uplink {
    uint32_t job_id = 0;  // the job's id and token at the parent
    uint64_t token = 0;
    uint16_t contributor = 0;        // this leaf's rank at the parent
    std::vector<sockaddr_in> ports;  // the parent's data addresses; slot s on [s % n]
    // The parent job's data MAC key when the parent's JoinAck said DATA_MAC (SPEC.md §7
    // "Data MAC across levels"): partials go up signed by `contributor`, results come down
    // signed by a parent thread. nullopt: neither carries a MAC.
    std::optional<proto::DataKey> mac_key;
    // Results straight down (SPEC.md §7): the parent offered DirectDown, every member asked for
    // ResultSource, and the job is unsigned or signed under the tree's shared secret.
    bool direct = false;
  };
  std::shared_ptr<const Uplink> uplink;  // null: results go to the members

  // Where rank's packets of `slot` come from and its results go.
  const sockaddr_in& addr(uint32_t rank, uint32_t slot) const {
    const auto& c = child_addrs[rank];
    return c.empty() ? workers[rank] : c[slot % c.size()];
  }
  // Fills the tree fields for a depth-1 job of n_workers ranks of weight 1 (tests, plain jobs).
  void all_members();
  sockaddr_in group{};  // multicast group and port (SPEC §8); sin_port 0 = none
};

// Slots owned by one dataplane thread: global slot s = queue + i * n_queues.
struct alignas(64) SlotShard {
  std::vector<Slot> slots;
  uint64_t mac_seq = 0;     // data MAC: the last sequence number this queue signed with
  uint64_t up_mac_seq = 0;  // the same for the partials it sent up (Job::next_up_mac_seq)
  // The job's grant pacing on this queue (Job::pacer): its bucket and the rate it was made for.
  TokenBucket pacer{0, 0};
  uint32_t pacer_mbps = 0;
};

class Job {
 public:
  Job(JobParams params, unsigned n_queues);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  const JobParams& params() const { return params_; }
  uint32_t id() const { return params_.id; }
  unsigned n_queues() const { return n_queues_; }

  // Dataplane thread `queue` only; s % n_queues == queue.
  Slot& slot(uint32_t s) { return shards_[s % n_queues_].slots[s / n_queues_]; }
  JobQueueCounters& counters(unsigned queue) { return counters_[queue]; }
  // Data MAC: the next sequence number of sender kAggSender | queue (SPEC.md §6).
  uint64_t next_mac_seq(unsigned queue) { return ++shards_[queue].mac_seq; }
  // A leaf's partials go up as one sender (its contributor id) from every queue: queue q
  // numbers them q·2^48 + 1, + 2, ... so no two queues sign with one IV (SPEC.md §7).
  uint64_t next_up_mac_seq(unsigned queue) {
    return (uint64_t{queue} << kUpMacSeqShift) | ++shards_[queue].up_mac_seq;
  }
  static constexpr unsigned kUpMacSeqShift = 48;
  // Any thread (relaxed reads).
  const JobQueueCounters& counters(unsigned queue) const { return counters_[queue]; }

  // Shared results go once to params().group instead of to every worker (SPEC §8). Set by
  // the control thread when the ranks agreed; read by the dataplane threads per result.
  void set_multicast(bool on) { multicast_.store(on, std::memory_order_release); }
  bool multicast() const { return multicast_.load(std::memory_order_acquire); }

  // Results straight down (SPEC.md §7): child aggregator `rank` has its shared results sent
  // to its members' group, carrying its own job id and token, instead of to its ports. Written
  // once per child by the control thread (set_direct), read by the dataplane threads per result.
  struct Direct {
    sockaddr_in group{};
    uint32_t job_id = 0;
    uint64_t token = 0;
    std::optional<proto::DataKey> key;  // the child job's data MAC key, when it signs
    std::atomic<bool> on{false};
  };
  // A job sends straight down for at most this many children (each costs one datagram per
  // result, SlotEngine::kMaxResultsPerContrib); the others get their results as before.
  static constexpr uint32_t kMaxDirectChildren = 3;
  // False when `rank` already has one or kMaxDirectChildren children do.
  bool set_direct(uint32_t rank, const sockaddr_in& group, uint32_t job_id, uint64_t token,
                  std::optional<proto::DataKey> key = std::nullopt);
  uint32_t n_direct() const { return n_direct_.load(std::memory_order_acquire); }
  const Direct* direct(uint32_t rank) const {
    const Direct& d = direct_[rank];
    return d.on.load(std::memory_order_acquire) ? &d : nullptr;
  }

  // Fair share (set by the control thread, control/job_manager.h). grant: what the job was
  // told it may use (Capacity share_mbps), Mbit/s, 0 = unknown; pace: what its result sends
  // are held to, 0 = not paced (a job alone, or no max_mbps).
  void set_grant(uint32_t grant_mbps, uint32_t pace_mbps) {
    grant_mbps_.store(grant_mbps, std::memory_order_relaxed);
    pace_mbps_.store(pace_mbps, std::memory_order_relaxed);
  }
  uint32_t grant_mbps() const { return grant_mbps_.load(std::memory_order_relaxed); }
  // Its weight in the division of the capacity now: params().share_weight at join, then what
  // a reload of its tenant's weight made it (control thread writes, metrics read).
  void set_share_weight(uint32_t w) { share_weight_.store(w, std::memory_order_relaxed); }
  uint32_t share_weight() const {
    const uint32_t w = share_weight_.load(std::memory_order_relaxed);
    return w != 0 ? w : params().share_weight;
  }
  uint32_t pace_mbps() const { return pace_mbps_.load(std::memory_order_relaxed); }
  // Dataplane thread `queue` only: the bucket its sends of this job wait for (an equal part
  // of the pace per queue, like the daemon's max_mbps bucket), or null when not paced.
  TokenBucket* pacer(unsigned queue) {
    const uint32_t pace = pace_mbps();
    SlotShard& s = shards_[queue];
    if (pace != s.pacer_mbps) {
      s.pacer_mbps = pace;
      s.pacer = egress_bucket(pace, n_queues_);
    }
    return pace == 0 ? nullptr : &s.pacer;
  }
  // Achieved result rate, Mbit/s, over the control thread's last sampling period.
  void set_result_mbps(double v) { result_mbps_.store(v, std::memory_order_relaxed); }
  double result_mbps() const { return result_mbps_.load(std::memory_order_relaxed); }

 private:
  JobParams params_;
  unsigned n_queues_;
  std::unique_ptr<SlotShard[]> shards_;
  std::unique_ptr<JobQueueCounters[]> counters_;
  std::atomic<bool> multicast_{false};
  std::unique_ptr<Direct[]> direct_;  // by rank
  std::atomic<uint32_t> n_direct_{0};
  std::atomic<uint32_t> grant_mbps_{0};
  std::atomic<uint32_t> share_weight_{0};  // 0: params().share_weight
  std::atomic<uint32_t> pace_mbps_{0};
  std::atomic<double> result_mbps_{0};
};

}  // namespace conflux::agg
