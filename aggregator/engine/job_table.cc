// SPDX-License-Identifier: Apache-2.0
#include "aggregator/engine/job_table.h"

namespace conflux::agg {

JobTable::JobTable(unsigned capacity, unsigned n_queues)
    : capacity_(capacity < kMaxCapacity ? capacity : kMaxCapacity),
      n_queues_(n_queues),
      table_(std::make_unique<std::atomic<Job*>[]>(kMaxCapacity)),
      by_parent_(std::make_unique<std::atomic<Job*>[]>(kMaxCapacity)),
      seen_(std::make_unique<Epoch[]>(n_queues)),
      used_(kMaxCapacity, false) {
  for (unsigned i = 0; i < kMaxCapacity; ++i) {
    table_[i].store(nullptr, std::memory_order_relaxed);
    by_parent_[i].store(nullptr, std::memory_order_relaxed);
  }
}

JobTable::~JobTable() {
  for (unsigned i = 0; i < kMaxCapacity; ++i) {
    delete table_[i].exchange(nullptr, std::memory_order_acq_rel);
  }
  retired_.clear();
}

void JobTable::online(unsigned q) {
  seen_[q].v.store(global_epoch_.load(std::memory_order_acquire), std::memory_order_release);
}

uint32_t JobTable::allocate_id() {
  if (live_ >= capacity_) return 0;
  for (unsigned n = 0; n < kMaxCapacity; ++n) {
    const unsigned i = (next_index_ + n) % kMaxCapacity;
    if (!used_[i]) {
      used_[i] = true;
      next_index_ = (i + 1) % kMaxCapacity;
      const uint32_t seq = next_seq_++ & ((1u << (32 - kIndexBits)) - 1);
      if (next_seq_ >= (1u << (32 - kIndexBits))) next_seq_ = 1;
      ++live_;
      return (seq << kIndexBits) | i;
    }
  }
  return 0;
}

void JobTable::publish(std::unique_ptr<Job> job) {
  const unsigned i = job->id() & (kMaxCapacity - 1);
  if (job->params().uplink != nullptr) {
    by_parent_[job->params().uplink->job_id & (kMaxCapacity - 1)].store(job.get(),
                                                                        std::memory_order_release);
  }
  table_[i].store(job.release(), std::memory_order_release);
}

void JobTable::retire(uint32_t job_id) {
  const unsigned i = job_id & (kMaxCapacity - 1);
  Job* j = table_[i].load(std::memory_order_relaxed);
  if (j == nullptr || j->id() != job_id) return;
  table_[i].store(nullptr, std::memory_order_release);
  if (j->params().uplink != nullptr) {
    Job* expected = j;
    by_parent_[j->params().uplink->job_id & (kMaxCapacity - 1)].compare_exchange_strong(
        expected, nullptr, std::memory_order_acq_rel);
  }
  used_[i] = false;
  --live_;
  const uint64_t e = global_epoch_.fetch_add(1, std::memory_order_acq_rel) + 1;
  retired_.push_back({std::unique_ptr<Job>(j), e});
}

size_t JobTable::reclaim() {
  if (retired_.empty()) return 0;
  uint64_t min_seen = UINT64_MAX;
  for (unsigned q = 0; q < n_queues_; ++q) {
    const uint64_t s = seen_[q].v.load(std::memory_order_acquire);
    if (s < min_seen) min_seen = s;
  }
  std::erase_if(retired_, [min_seen](const Retired& r) { return r.epoch <= min_seen; });
  return retired_.size();
}

}  // namespace conflux::agg
