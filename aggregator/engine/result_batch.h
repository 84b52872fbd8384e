// RESULT datagrams produced by the SlotEngine while it handles one receive batch, handed to
// the backend to transmit (sendmmsg, DPDK tx burst, ...). Owned by one dataplane thread.
// Each entry is a complete datagram (48-byte header + payload) in the batch's arena plus its
// destination: every member of the job (fan-out, or the job's multicast group once its ranks
// agreed on it), every member but one (acknowledgements of an owned result), one rank (a
// re-served result, an owned result), or, on a leaf of a reduction tree, the parent aggregator
// (a partial result going up as a CONTRIB).
// Job pointers stay valid until the owning thread's next JobTable::quiescent(), so the
// backend must transmit and clear() the batch before calling it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "aggregator/engine/job.h"

namespace conflux::agg {

class ResultBatch final {
 public:
  static constexpr int32_t kAllRanks = -1;
  static constexpr int32_t kParent = -2;  // the job's parent aggregator (SPEC.md §7)

  struct Entry {
    const uint8_t* data;
    uint32_t len;
    int32_t rank;  // kAllRanks, kParent or a single rank
    Job* job;
    int32_t except;  // with kAllRanks: this rank is skipped (-1: none)
    uint32_t slot;   // a child aggregator (or the parent) is reached on the slot's port
    bool direct;     // rank is a child aggregator whose results go to its members' group
    // With kAllRanks: children that have their own (direct) entry for this result; -1 unused.
    std::array<int32_t, Job::kMaxDirectChildren> skip;

    // Calls f(const sockaddr_in&) with the address of every destination of the entry. The
    // references stay valid as long as the job.
    template <class F>
    void for_each_destination(F&& f) const {
      const JobParams& p = job->params();
      if (rank == kParent) {
        f(p.uplink->ports[slot % p.uplink->ports.size()]);
      } else if (direct) {
        f(job->direct(static_cast<uint32_t>(rank))->group);  // SPEC.md §7, straight down
      } else if (rank != kAllRanks) {
        f(p.addr(static_cast<uint32_t>(rank), slot));
      } else if (except < 0 && job->multicast()) {
        f(p.group);  // one send reaches every worker (SPEC §8)
      } else {
        for (uint32_t w : p.members) {
          const auto r = static_cast<int32_t>(w);
          if (r == except || std::find(skip.begin(), skip.end(), r) != skip.end()) continue;
          f(p.addr(w, slot));
        }
      }
    }
  };

  // Room for `max_results` datagrams of up to `max_datagram` bytes each.
  ResultBatch(size_t max_results, size_t max_datagram)
      : max_datagram_(max_datagram),
        arena_(std::make_unique<uint8_t[]>(max_results * max_datagram)) {
    entries_.reserve(max_results);
    capacity_ = max_results;
  }

  // Space for the next datagram (max_datagram bytes), or nullptr when the batch is full.
  uint8_t* reserve() {
    return entries_.size() < capacity_ ? arena_.get() + entries_.size() * max_datagram_ : nullptr;
  }
  // Appends the datagram written at the last reserve().
  void commit(uint32_t len, Job* job, uint32_t slot, int32_t rank, int32_t except = -1,
              bool direct = false) {
    entries_.push_back({reserve(), len, rank, job, except, slot, direct, kNoSkip});
  }
  // The last entry (kAllRanks) leaves out these ranks: they have direct entries of their own.
  void skip_in_last(const std::array<int32_t, Job::kMaxDirectChildren>& ranks) {
    entries_.back().skip = ranks;
  }
  static constexpr std::array<int32_t, Job::kMaxDirectChildren> kNoSkip = [] {
    std::array<int32_t, Job::kMaxDirectChildren> a{};
    a.fill(-1);
    return a;
  }();

  size_t size() const { return entries_.size(); }
  size_t room() const { return capacity_ - entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const Entry& operator[](size_t i) const { return entries_[i]; }
  void clear() { entries_.clear(); }

 private:
  size_t max_datagram_;
  size_t capacity_ = 0;
  std::unique_ptr<uint8_t[]> arena_;
  std::vector<Entry> entries_;
};

}  // namespace conflux::agg
