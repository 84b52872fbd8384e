// SPDX-License-Identifier: Apache-2.0
// RingAllreduce: one collective over the worker ring as a non-blocking state machine over
// the plugin's own p2p transport: AllReduce (reduce-scatter, then all-gather), or either
// phase alone (ReduceScatter, AllGather; see RingPlan).
//
// The range is cut into nranks segments; at each of the 2(n-1) steps every rank sends one
// segment to the next rank and receives one from the previous rank, in blocks of at most
// `block_bytes`. After the reduce-scatter phase rank r holds the final value of segment r+1
// (mod n); the all-gather phase starts from there. The steps are not synchronous: the
// blocks of every step form one stream, with up to `max_inflight` sends and as many
// receives (into scratch slots) posted ahead; a block is sent as soon as its data is final
// (its block of the previous step received), and a received all-gather block is copied in
// once nothing still being sent reads that region. All messages of one
// operation carry `tag`; every rank must run the same operations in the same order (the
// transport matches messages in posting order), which CollComm guarantees.
//
// Threads: progress() is called by one thread (CollComm's progress thread) until done or
// error; it never blocks. Narrow floats are rounded at every hop (reduce_inplace), as any
// ring does; results are still identical on every rank because each segment's final value
// is computed once and forwarded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "conflux/common/dtype.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"

namespace conflux::collnet {

// How a ring operation cuts its range and which phases it runs. The default is an
// AllReduce over nranks near-equal segments.
struct RingPlan {
  bool reduce_scatter = true;
  bool all_gather = true;
  // segs[j] = element range [first, second) of segment j; nranks entries, or empty for
  // near-equal segments. Ranges may be empty; they need not be in order.
  std::vector<std::pair<size_t, size_t>> segs;

  // A plan where rank k's final (reduce-scatter) or initial (all-gather) data is
  // owned[k]: segment k+1 (mod n) is owned[k], matching the phase convention above.
  static RingPlan by_owner(const std::vector<std::pair<size_t, size_t>>& owned, bool reduce_scatter,
                           bool all_gather);
};

struct RingLinks {
  int rank = 0;
  int nranks = 1;
  net::SendComm* next = nullptr;  // to rank + 1
  net::RecvComm* prev = nullptr;  // from rank - 1
};

class RingAllreduce {
 public:
  // `scratch` must hold max_inflight * block_bytes bytes and outlive the operation.
  // The plan must be the same on every rank. `send` is copied to `recv` first (unless equal).
  RingAllreduce(const RingLinks& links, const void* send, void* recv, size_t count, DType dtype,
                Op op, int tag, size_t block_bytes, int max_inflight, uint8_t* scratch,
                RingPlan plan = {});

  // Advances the operation. Returns an error status (final) or kOk; *done once complete.
  net::Status progress(bool* done);
  // Blocks completed so far (sent and received); grows while the ring moves.
  uint64_t completed_blocks() const { return completed_blocks_; }

 private:
  // Item x of the operation is block x % nb_ of step start_step_ + x / nb_.
  struct Range {
    size_t off = 0;  // element offset into recv_
    size_t elems = 0;
  };
  Range send_range(size_t x) const;
  Range recv_range(size_t x) const;
  Range block(int seg, size_t i) const;
  int step_of(size_t x) const { return start_step_ + static_cast<int>(x / nb_); }
  int send_seg(int step) const;
  int recv_seg(int step) const;
  size_t seg_lo(int seg) const { return segs_[static_cast<size_t>(mod(seg))].first; }
  size_t seg_hi(int seg) const { return segs_[static_cast<size_t>(mod(seg))].second; }
  int mod(int v) const { return ((v % links_.nranks) + links_.nranks) % links_.nranks; }

  const RingLinks links_;
  uint8_t* const recv_;
  const DType dtype_;
  const Op op_;
  const int tag_;
  const size_t esize_;
  const size_t block_elems_;
  const size_t window_;  // max_inflight: sends and receives outstanding, each
  uint8_t* const scratch_;
  std::vector<std::pair<size_t, size_t>> segs_;

  int start_step_ = 0;   // 0: reduce-scatter first; n - 1: all-gather only
  size_t nb_ = 1;        // blocks per step (from the longest segment: the same on every rank)
  size_t items_ = 0;     // steps x nb_
  size_t rs_items_ = 0;  // of which in the reduce-scatter phase
  size_t s_posted_ = 0, s_done_ = 0, r_posted_ = 0, r_done_ = 0;
  std::vector<net::Request*> sreq_, rreq_;  // by item % window_
  uint64_t completed_blocks_ = 0;
};

}  // namespace conflux::collnet
