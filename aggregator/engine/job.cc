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
      counters_(std::make_unique<JobQueueCounters[]>(n_queues)) {
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

}  // namespace conflux::agg
