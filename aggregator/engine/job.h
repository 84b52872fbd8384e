// A job: the immutable description agreed at rendezvous plus the slot state, sharded so that
// slot s lives in shard (s mod n_queues) and is touched only by that dataplane thread.
// Created by the control thread, published through JobTable, freed by the control thread
// only after every dataplane thread passed a quiescent point (see job_table.h).
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "aggregator/engine/counters.h"
#include "aggregator/engine/slot.h"

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
  sockaddr_in group{};               // multicast group and port (SPEC §7); sin_port 0 = none
};

// Slots owned by one dataplane thread: global slot s = queue + i * n_queues.
struct alignas(64) SlotShard {
  std::vector<Slot> slots;
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
  // Any thread (relaxed reads).
  const JobQueueCounters& counters(unsigned queue) const { return counters_[queue]; }

  // Shared results go once to params().group instead of to every worker (SPEC §7). Set by
  // the control thread when the ranks agreed; read by the dataplane threads per result.
  void set_multicast(bool on) { multicast_.store(on, std::memory_order_release); }
  bool multicast() const { return multicast_.load(std::memory_order_acquire); }

 private:
  JobParams params_;
  unsigned n_queues_;
  std::unique_ptr<SlotShard[]> shards_;
  std::unique_ptr<JobQueueCounters[]> counters_;
  std::atomic<bool> multicast_{false};
};

}  // namespace conflux::agg
