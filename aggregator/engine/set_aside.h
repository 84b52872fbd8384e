// SPDX-License-Identifier: Apache-2.0
// Per-job pacing's policy, shared by the dataplanes (kernel UDP, DPDK): which result sends of
// a batch must wait because their job is over its share, and the results set aside for later.
//
// A job in debt does not hold up the dataplane thread: its results are set aside (Item: a
// copied message, an mbuf) and sent in order as its bucket refills, while the other jobs'
// results go past them. The rules, in one place:
//  - a job's results leave in order: once one of them waits in a pass, all its later ones
//    wait too, and a job with results set aside queues its new ones behind them;
//  - a job alone with results set aside is lent the idle jobs' share (work-conserving): it
//    waits only for the queue's own egress, and its bucket is not charged for what it borrows.
//    A job is idle when it had no paced result for kIdleNs. One whose results have merely not
//    come yet is not: on a congested ingress link its members' contributions queue behind the
//    lender's, and lending to whoever has results ready hands the link to the job ahead;
//  - the results of a job that ended are dropped (nobody waits for them).
// Single-threaded: one per dataplane queue.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "aggregator/engine/job_table.h"
#include "aggregator/util/token_bucket.h"

namespace conflux::agg {

template <typename Item>
class SetAside {
 public:
  // A job with no paced result for this long is idle: its share may be lent.
  static constexpr uint64_t kIdleNs = 2'000'000;

  struct Entry {
    uint32_t job_id;
    Item item;
  };

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  // True when the job has results set aside (its new ones must queue behind them). O(jobs
  // with results set aside), not O(results): it is asked for every result send while paced.
  bool holds(uint32_t job_id) const { return count_of(job_id) != counts_.end(); }
  void push(uint32_t job_id, Item item) {
    entries_.push_back({job_id, std::move(item)});
    if (auto it = count_of(job_id); it != counts_.end()) {
      ++it->second;
    } else {
      counts_.push_back({job_id, 1});
    }
  }

  // A pass over a batch of result sends, in order: begin_pass(), then hold() for each send.
  void begin_pass() { blocked_.clear(); }
  // True when a send of job_id must wait: the job was held earlier in this pass, or `wait`
  // (its bucket's delay, and the queue's if the caller counts it) is not 0, or it has
  // results set aside. A job held once stays held for the rest of the pass.
  bool hold(uint32_t job_id, uint64_t wait) {
    seen(job_id, steady_ns());
    if (held(job_id)) return true;
    if (wait == 0 && !holds(job_id)) return false;
    blocked_.push_back(job_id);
    return true;
  }

  // Sends what may go now, oldest first, and returns the nanoseconds until the first result
  // still waiting may go (0: none waits). For each result of a live job not held this pass:
  // wait = max(its bucket's delay, unless it is lent; queue_wait(now)); wait > 0 holds the job,
  // else send(job, item, bucket, borrowed) sends it: bucket is the one to charge (null when
  // unpaced or lent), borrowed says it was lent. send returns false when no more fit in this
  // pass. drop(item) releases a result of a job that ended.
  template <class QueueWait, class Send, class Drop>
  uint64_t drain(const JobTable& jobs, unsigned queue, QueueWait queue_wait, Send send, Drop drop) {
    begin_pass();
    uint64_t soonest = 0;
    if (entries_.empty()) return soonest;
    const bool lone = counts_.size() == 1 && others_idle(entries_.front().job_id, steady_ns());
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (held(it->job_id)) {
        ++it;
        continue;
      }
      Job* job = jobs.find(it->job_id);
      if (job == nullptr) {
        drop(it->item);
        it = erase(it);
        continue;
      }
      TokenBucket* share = job->pacer(queue);
      const uint64_t now = steady_ns();
      seen(it->job_id, now);
      const uint64_t share_wait = share != nullptr ? share->delay_ns(now) : 0;
      const bool borrow = lone && share_wait > 0;
      const uint64_t wait = std::max<uint64_t>(borrow ? 0 : share_wait, queue_wait(now));
      if (wait > 0) {
        blocked_.push_back(it->job_id);
        soonest = soonest == 0 ? wait : std::min(soonest, wait);
        ++it;
        continue;
      }
      const bool more = send(*job, it->item, borrow ? nullptr : share, borrow);
      it = erase(it);
      if (!more) break;
    }
    return soonest;
  }

  // Releases every result set aside (the queue is going away).
  template <class Drop>
  void clear(Drop drop) {
    for (Entry& e : entries_) drop(e.item);
    entries_.clear();
    counts_.clear();
  }

 private:
  using Counts = std::vector<std::pair<uint32_t, uint32_t>>;  // job id, results set aside

  Counts::const_iterator count_of(uint32_t job_id) const {
    return std::find_if(counts_.begin(), counts_.end(),
                        [&](const auto& c) { return c.first == job_id; });
  }
  Counts::iterator count_of(uint32_t job_id) {
    return std::find_if(counts_.begin(), counts_.end(),
                        [&](const auto& c) { return c.first == job_id; });
  }
  typename std::deque<Entry>::iterator erase(typename std::deque<Entry>::iterator it) {
    auto c = count_of(it->job_id);
    if (--c->second == 0) counts_.erase(c);
    return entries_.erase(it);
  }

  // The last time each paced job had a result (hold() saw it), for the lending rule.
  void seen(uint32_t job_id, uint64_t now) {
    for (auto& [id, at] : seen_) {
      if (id == job_id) {
        at = now;
        return;
      }
    }
    std::erase_if(seen_, [&](const auto& s) { return now - s.second > kIdleNs; });
    seen_.push_back({job_id, now});
  }
  bool others_idle(uint32_t job_id, uint64_t now) const {
    return std::none_of(seen_.begin(), seen_.end(), [&](const auto& s) {
      return s.first != job_id && now - s.second <= kIdleNs;
    });
  }

  bool held(uint32_t job_id) const {
    return std::find(blocked_.begin(), blocked_.end(), job_id) != blocked_.end();
  }

  std::deque<Entry> entries_;
  Counts counts_;                  // per job with results set aside, how many (never 0)
  std::vector<uint32_t> blocked_;  // the jobs held in the current pass
  std::vector<std::pair<uint32_t, uint64_t>> seen_;  // job id, steady_ns of its last result
};

}  // namespace conflux::agg
