// SPDX-License-Identifier: Apache-2.0
#include "collnet/ring_allreduce.h"

#include <algorithm>
#include <cstring>

#include "conflux/common/reduce.h"

namespace conflux::collnet {

RingPlan RingPlan::by_owner(const std::vector<std::pair<size_t, size_t>>& owned,
                            bool reduce_scatter, bool all_gather) {
  RingPlan plan;
  plan.reduce_scatter = reduce_scatter;
  plan.all_gather = all_gather;
  const size_t n = owned.size();
  plan.segs.resize(n);
  for (size_t k = 0; k < n; ++k) plan.segs[(k + 1) % n] = owned[k];
  return plan;
}

RingAllreduce::RingAllreduce(const RingLinks& links, const void* send, void* recv, size_t count,
                             DType dtype, Op op, int tag, size_t block_bytes, int max_inflight,
                             uint8_t* scratch, RingPlan plan)
    : links_(links),
      recv_(static_cast<uint8_t*>(recv)),
      dtype_(dtype),
      op_(op),
      tag_(tag),
      esize_(dtype_size(dtype)),
      block_elems_(std::max<size_t>(1, block_bytes / dtype_size(dtype))),
      window_(static_cast<size_t>(std::max(1, max_inflight))),
      scratch_(scratch),
      segs_(std::move(plan.segs)),
      sreq_(window_, nullptr),
      rreq_(window_, nullptr) {
  const int n = links_.nranks;
  if (segs_.empty()) {
    for (int j = 0; j < n; ++j) {
      segs_.emplace_back(count * static_cast<size_t>(j) / static_cast<size_t>(n),
                         count * static_cast<size_t>(j + 1) / static_cast<size_t>(n));
    }
  }
  size_t longest = 0;
  for (const auto& [lo, hi] : segs_) longest = std::max(longest, hi > lo ? hi - lo : 0);
  if (send != recv && count > 0) std::memmove(recv_, send, count * esize_);
  if (n < 2) return;
  // Every rank must post the same number of messages, so the block count comes from the
  // longest segment (the same on every rank); blocks past the end of a shorter segment
  // carry zero bytes.
  nb_ = std::max<size_t>(1, (longest + block_elems_ - 1) / block_elems_);
  start_step_ = plan.reduce_scatter ? 0 : n - 1;
  const int end_step = plan.all_gather ? 2 * (n - 1) : n - 1;
  if (end_step > start_step_) items_ = static_cast<size_t>(end_step - start_step_) * nb_;
  rs_items_ = plan.reduce_scatter ? std::min(items_, static_cast<size_t>(n - 1) * nb_) : 0;
}

// Reduce-scatter step s: send segment r-s, receive (and reduce) segment r-s-1.
// All-gather step s (a = s - (n-1)): send segment r+1-a, receive segment r-a (final values).
// So step s sends what step s-1 received.
int RingAllreduce::send_seg(int step) const {
  const int n = links_.nranks, r = links_.rank;
  return step < n - 1 ? r - step : r + 1 - (step - (n - 1));
}

int RingAllreduce::recv_seg(int step) const {
  const int n = links_.nranks, r = links_.rank;
  return step < n - 1 ? r - step - 1 : r - (step - (n - 1));
}

RingAllreduce::Range RingAllreduce::block(int seg, size_t i) const {
  const size_t lo = seg_lo(seg) + i * block_elems_, hi = seg_hi(seg);
  if (lo >= hi) return {0, 0};
  return {lo, std::min(block_elems_, hi - lo)};
}

RingAllreduce::Range RingAllreduce::send_range(size_t x) const {
  return block(send_seg(step_of(x)), x % nb_);
}

RingAllreduce::Range RingAllreduce::recv_range(size_t x) const {
  return block(recv_seg(step_of(x)), x % nb_);
}

net::Status RingAllreduce::progress(bool* done) {
  *done = false;
  for (bool progressed = true; progressed;) {
    progressed = false;
    // Sends, in item order, once their data is final: item x sends what item x - nb_ (the
    // same block, one step earlier) received, and receives complete in order.
    while (s_posted_ < items_ && s_posted_ - s_done_ < window_) {
      const size_t x = s_posted_;
      if (x >= nb_ && r_done_ < x - nb_ + 1) break;
      const Range b = send_range(x);
      net::Request* req = nullptr;
      CFX_RETURN_IF_ERROR(links_.next->isend(recv_ + b.off * esize_, b.elems * esize_, tag_, &req));
      if (req == nullptr) break;  // the transport is busy: later
      sreq_[x % window_] = req;
      ++s_posted_;
      progressed = true;
    }
    // Receives into scratch slots, in item order, up to the window.
    while (r_posted_ < items_ && r_posted_ - r_done_ < window_) {
      const size_t x = r_posted_;
      const Range b = recv_range(x);
      void* dst = scratch_ + (x % window_) * block_elems_ * esize_;
      const size_t size = b.elems * esize_;
      net::Request* req = nullptr;
      CFX_RETURN_IF_ERROR(links_.prev->irecv(1, &dst, &size, &tag_, &req));
      if (req == nullptr) break;
      rreq_[x % window_] = req;
      ++r_posted_;
      progressed = true;
    }
    while (s_done_ < s_posted_) {
      bool ok = false;
      size_t size = 0;
      CFX_RETURN_IF_ERROR(net::test(sreq_[s_done_ % window_], &ok, &size));
      if (!ok) break;
      sreq_[s_done_ % window_] = nullptr;
      ++s_done_;
      ++completed_blocks_;
      progressed = true;
    }
    while (r_done_ < r_posted_) {
      const size_t x = r_done_;
      // An all-gather block lands where the reduce-scatter sent from, one phase earlier
      // (item x - rs_items_): wait until that send is done.
      if (x >= rs_items_ && rs_items_ > 0 && s_done_ < x - rs_items_ + 1) break;
      bool ok = false;
      size_t size = 0;
      CFX_RETURN_IF_ERROR(net::test(rreq_[x % window_], &ok, &size));
      if (!ok) break;
      rreq_[x % window_] = nullptr;
      const Range b = recv_range(x);
      if (size != b.elems * esize_) return net::Status::kInternalError;  // peers disagree
      const uint8_t* src = scratch_ + (x % window_) * block_elems_ * esize_;
      if (b.elems > 0) {
        if (x < rs_items_) {
          reduce::reduce_inplace(dtype_, op_, recv_ + b.off * esize_, src, b.elems);
        } else {
          std::memcpy(recv_ + b.off * esize_, src, b.elems * esize_);
        }
      }
      ++r_done_;
      ++completed_blocks_;
      progressed = true;
    }
  }
  *done = s_done_ == items_ && r_done_ == items_;
  return net::Status::kOk;
}

}  // namespace conflux::collnet
