// SPDX-License-Identifier: Apache-2.0
// Publishes jobs from the control thread to the dataplane threads without per-packet locks.
//
// Jobs sit in a fixed array of atomic pointers indexed by the low 12 bits of the job id; the
// high bits count allocations so a stale id never finds a newer job. Memory of a retired job
// is reclaimed by epochs: retire() unpublishes the job and tags it with a new epoch; each
// dataplane thread calls quiescent() whenever it holds no Job pointer (between batches and
// while idle); reclaim() frees jobs whose epoch every thread has seen.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "aggregator/engine/job.h"

namespace conflux::agg {

class JobTable {
 public:
  static constexpr unsigned kIndexBits = 12;
  static constexpr unsigned kMaxCapacity = 1u << kIndexBits;

  // capacity <= kMaxCapacity jobs at once; n_queues dataplane threads take part in epochs.
  JobTable(unsigned capacity, unsigned n_queues);
  ~JobTable();  // frees every job; only after all dataplane threads stopped
  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  // --- dataplane threads (any number, lock-free) ---
  // The job with this id, or nullptr. Valid until the caller's next quiescent().
  Job* find(uint32_t job_id) const {
    Job* j = table_[job_id & (kMaxCapacity - 1)].load(std::memory_order_acquire);
    return (j != nullptr && j->id() == job_id) ? j : nullptr;
  }
  // A leaf's job whose job id at the parent aggregator is `parent_job_id` (SPEC.md §7), or
  // nullptr. Valid until the caller's next quiescent().
  Job* find_by_parent(uint32_t parent_job_id) const {
    Job* j = by_parent_[parent_job_id & (kMaxCapacity - 1)].load(std::memory_order_acquire);
    return (j != nullptr && j->params().uplink->job_id == parent_job_id) ? j : nullptr;
  }
  // Queue q holds no Job pointer now.
  void quiescent(unsigned q) {
    const uint64_t e = global_epoch_.load(std::memory_order_acquire);
    if (seen_[q].v.load(std::memory_order_relaxed) != e) {
      seen_[q].v.store(e, std::memory_order_release);
    }
  }
  // Queue q will not touch jobs again (its thread is exiting).
  void offline(unsigned q) { seen_[q].v.store(UINT64_MAX, std::memory_order_release); }
  // Queue q is (again) taking part; call before its first find().
  void online(unsigned q);

  // --- control thread only ---
  // A fresh job id whose index is free, or 0 when `capacity` jobs are live.
  uint32_t allocate_id();
  // Publishes a job made with an id from allocate_id() (and, with an uplink, under its job id
  // at the parent: the parent's ids of live jobs are distinct, as they are here).
  void publish(std::unique_ptr<Job> job);
  // Unpublishes the job; its memory is freed by a later reclaim().
  void retire(uint32_t job_id);
  // Frees retired jobs that no dataplane thread can still be using. Returns how many remain.
  size_t reclaim();
  size_t live() const { return live_; }
  // The live job with this id (control thread view), or nullptr.
  Job* get(uint32_t job_id) const { return find(job_id); }
  template <typename F>
  void for_each_live(F&& f) const {
    for (unsigned i = 0; i < kMaxCapacity; ++i) {
      if (Job* j = table_[i].load(std::memory_order_relaxed)) f(*j);
    }
  }

 private:
  struct alignas(64) Epoch {
    std::atomic<uint64_t> v{UINT64_MAX};
  };
  struct Retired {
    std::unique_ptr<Job> job;
    uint64_t epoch;
  };

  unsigned capacity_;
  unsigned n_queues_;
  std::unique_ptr<std::atomic<Job*>[]> table_;
  std::unique_ptr<std::atomic<Job*>[]> by_parent_;  // jobs with an uplink, by parent job id
  std::unique_ptr<Epoch[]> seen_;
  std::atomic<uint64_t> global_epoch_{1};
  std::vector<bool> used_;  // index taken (allocated and not retired)
  std::vector<Retired> retired_;
  uint32_t next_seq_ = 1;
  unsigned next_index_ = 0;
  size_t live_ = 0;
};

}  // namespace conflux::agg
