// ResultTails: the ends of the most recent aggregator results this rank completed, kept so
// that a failover can hand them to ranks that did not receive them before the aggregators
// died (see coll_comm.h, "Failover").
//
// Why the ends suffice: a rank that lacks results of request q still had the oldest of them
// outstanding, and the window lets it contribute at most W packets past that one on each
// aggregator; no rank can complete anything further. So whatever another rank misses of a
// request this rank completed lies in that request's last A x W packets (A aggregators, W
// granted slots), and only requests within the last A x W packets of the result stream can
// be missing anywhere. `window_bytes` is that amount (with a safety factor).
//
// Threads: used by CollComm's completion thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace conflux::collnet {

class ResultTails {
 public:
  struct Tail {
    uint32_t seq = 0;
    size_t total = 0;   // bytes of the whole aggregator result
    size_t offset = 0;  // where `bytes` starts inside it
    std::vector<uint8_t> bytes;
  };

  explicit ResultTails(size_t window_bytes) : window_(window_bytes) {}

  // Keeps the last min(total, window) bytes of request seq's result; forgets tails that are
  // older than the last `window` bytes of results.
  void keep(uint32_t seq, const uint8_t* result, size_t total);
  const Tail* find(uint32_t seq) const;
  size_t window_bytes() const { return window_; }

 private:
  const size_t window_;
  std::deque<Tail> tails_;
  size_t newer_total_ = 0;  // sum of `total` over every tail but the oldest
};

}  // namespace conflux::collnet
