// What the tuner compares for an AllReduce of B bytes (tuner/tuner.h): its time through
// CollNet and its time over a ring of the same ranks, both from what this process's CollNet
// communicators measured while they ran:
//   CollNet: latency + B · s_per_byte. latency: the mean time, from iallreduce to the result,
//            of the small AllReduces (at most 64 KiB) that found no other request outstanding;
//            s_per_byte: the measured split's model at its current split (split_controller.h:
//            the aggregators' part and the link's, whichever is longer).
//   ring:    2(n-1) · hop + B · (2(n-1)/n) / L. hop: one hop of the worker ring, timed at
//            connect (the slowest rank's); L: the split's link estimate.
// Only the measured split (CONFLUX_RING_FRACTION=auto) gives the bandwidths; without it the
// estimate stays incomplete and the tuner keeps its byte range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace conflux::collnet {

struct PathEstimate {
  int nranks = 0;
  double latency_s = 0;   // 0: no small AllReduce measured yet
  double s_per_byte = 0;  // 0: no model yet
  double hop_s = 0;
  double link_bps = 0;

  bool complete() const {
    return nranks > 1 && latency_s > 0 && s_per_byte > 0 && hop_s > 0 && link_bps > 0;
  }
  double collnet_s(size_t bytes) const {
    return latency_s + static_cast<double>(bytes) * s_per_byte;
  }
  double ring_s(size_t bytes) const {
    const double steps = 2.0 * (nranks - 1);
    return steps * hop_s + static_cast<double>(bytes) * (steps / nranks) / link_bps;
  }
};

// One communicator's estimate: written by its threads (the split's model by the ring thread,
// latencies by NCCL's proxy thread), read by the tuner (the thread that enqueues collectives).
// Registered for its lifetime; latest() returns the estimate updated last (a process usually
// has one CollNet communicator per network). Thread-safe.
class PathEstimateSlot {
 public:
  explicit PathEstimateSlot(int nranks);
  ~PathEstimateSlot();
  PathEstimateSlot(const PathEstimateSlot&) = delete;
  PathEstimateSlot& operator=(const PathEstimateSlot&) = delete;

  void set_model(double s_per_byte, double hop_s, double link_bps);
  // One small AllReduce's time: a moving average (weight 1/8 for the new one; the first is
  // taken as it is).
  void add_latency(double seconds);
  PathEstimate get() const;

  static std::optional<PathEstimate> latest();

 private:
  PathEstimate e_;      // under the registry's mutex
  uint64_t stamp_ = 0;  // when it was last written, in registry writes
};

}  // namespace conflux::collnet
