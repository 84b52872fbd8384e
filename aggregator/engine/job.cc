// SPDX-License-Identifier: Apache-2.0
#include "aggregator/engine/job.h"

namespace conflux::agg {

void JobParams::all_members() {
  served = n_workers;
  members.resize(n_workers);
  for (uint32_t r = 0; r < n_workers; ++r) members[r] = r;
  weight.assign(n_workers, 1);
  child_addrs.assign(n_workers, {});
}

Job::Job(JobParams params, unsigned n_queues)
    : params_(std::move(params)),
      n_queues_(n_queues),
      shards_(std::make_unique<SlotShard[]>(n_queues)),
      counters_(std::make_unique<JobQueueCounters[]>(n_queues)),
      direct_(std::make_unique<Direct[]>(params_.n_workers)) {
  if (params_.members.empty()) params_.all_members();
  const size_t words = (params_.n_workers + 63) / 64;
  for (unsigned q = 0; q < n_queues_; ++q) {
    const size_t n = params_.slots > q ? (params_.slots - q + n_queues_ - 1) / n_queues_ : 0;
    shards_[q].slots.resize(n);
    for (Slot& s : shards_[q].slots) {
      for (Bank& b : s.banks) b.bitmap.assign(words, 0);
    }
  }
}

bool Job::set_direct(uint32_t rank, const sockaddr_in& group, uint32_t job_id, uint64_t token,
                     std::optional<proto::DataKey> key) {
  Direct& d = direct_[rank];
  if (d.on.load(std::memory_order_relaxed) || n_direct() >= kMaxDirectChildren) return false;
  d.group = group;
  d.job_id = job_id;
  d.token = token;
  d.key = key;
  d.on.store(true, std::memory_order_release);  // publishes the fields above
  n_direct_.fetch_add(1, std::memory_order_release);
  return true;
}

}  // namespace conflux::agg
