// A job: the immutable description agreed at rendezvous plus the slot state, sharded so that
// slot s lives in shard (s mod n_queues) and is touched only by that dataplane thread.
// Created by the control thread, published through JobTable, freed by the control thread
// only after every dataplane thread passed a quiescent point (see job_table.h).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "aggregator/engine/counters.h"
#include "aggregator/engine/slot.h"
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
};

// Slots owned by one dataplane thread: global slot s = queue + i * n_queues.
struct alignas(64) SlotShard {
  std::vector<Slot> slots;
  uint64_t mac_seq = 0;  // data MAC: the last sequence number this queue signed with
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
  // Any thread (relaxed reads).
  const JobQueueCounters& counters(unsigned queue) const { return counters_[queue]; }

 private:
  JobParams params_;
  unsigned n_queues_;
  std::unique_ptr<SlotShard[]> shards_;
  std::unique_ptr<JobQueueCounters[]> counters_;
};

}  // namespace conflux::agg
