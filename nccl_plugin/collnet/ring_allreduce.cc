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
      count_(count),
      dtype_(dtype),
      op_(op),
      tag_(tag),
      esize_(dtype_size(dtype)),
      block_elems_(std::max<size_t>(1, block_bytes / dtype_size(dtype))),
      max_inflight_(max_inflight),
      scratch_(scratch),
      segs_(std::move(plan.segs)) {
  const int n = links_.nranks;
  if (segs_.empty()) {
    for (int j = 0; j < n; ++j) {
      segs_.emplace_back(count * static_cast<size_t>(j) / static_cast<size_t>(n),
                         count * static_cast<size_t>(j + 1) / static_cast<size_t>(n));
    }
  }
  for (const auto& [lo, hi] : segs_) longest_ = std::max(longest_, hi > lo ? hi - lo : 0);
  if (send != recv && count > 0) std::memmove(recv_, send, count * esize_);
  for (int i = max_inflight_ - 1; i >= 0; --i) free_scratch_.push_back(i);
  step_ = plan.reduce_scatter ? 0 : n - 1;
  end_step_ = plan.all_gather ? 2 * (n - 1) : n - 1;
  if (n > 1 && step_ < end_step_) plan_step();
}

void RingAllreduce::plan_step() {
  // Reduce-scatter step s: send segment r-s, receive (and reduce) segment r-s-1.
  // All-gather step s: send segment r+1-s, receive segment r-s (final values).
  const int n = links_.nranks, r = links_.rank;
  const bool rs = in_reduce_scatter();
  const int s = rs ? step_ : step_ - (n - 1);
  const int send_seg = rs ? r - s : r + 1 - s;
  const int recv_seg = rs ? r - s - 1 : r - s;
  // Every rank must post the same number of messages per step, so the block count comes
  // from the longest segment (the same on every rank); blocks past the end of a shorter
  // segment carry zero bytes.
  const size_t slo = seg_lo(send_seg), rlo = seg_lo(recv_seg);
  const size_t nb = std::max<size_t>(1, (longest_ + block_elems_ - 1) / block_elems_);
  blocks_.assign(nb, Block{});
  for (size_t i = 0; i < nb; ++i) {
    Block& b = blocks_[i];
    b.send_off = slo + i * block_elems_;
    b.recv_off = rlo + i * block_elems_;
    b.elems = block_elems_;
  }
  next_to_post_ = 0;
  finished_ = 0;
}

net::Status RingAllreduce::post(Block& b) {
  const bool rs = in_reduce_scatter();
  const int n = links_.nranks, r = links_.rank;
  const int s = rs ? step_ : step_ - (n - 1);
  const int send_seg = rs ? r - s : r + 1 - s;
  const int recv_seg = rs ? r - s - 1 : r - s;
  const size_t send_end = seg_hi(send_seg), recv_end = seg_hi(recv_seg);
  const size_t send_elems = b.send_off < send_end ? std::min(b.elems, send_end - b.send_off) : 0;
  const size_t recv_elems = b.recv_off < recv_end ? std::min(b.elems, recv_end - b.recv_off) : 0;

  if (b.send_req == nullptr && !b.sent) {
    CFX_RETURN_IF_ERROR(
        links_.next->isend(recv_ + b.send_off * esize_, send_elems * esize_, tag_, &b.send_req));
  }
  if (b.recv_req == nullptr && !b.received) {
    void* dst;
    if (rs) {
      if (b.scratch_index < 0) {
        if (free_scratch_.empty()) return net::Status::kOk;
        b.scratch_index = free_scratch_.back();
        free_scratch_.pop_back();
      }
      dst = scratch_ + static_cast<size_t>(b.scratch_index) * block_elems_ * esize_;
    } else {
      dst = recv_ + b.recv_off * esize_;
    }
    const size_t size = recv_elems * esize_;
    CFX_RETURN_IF_ERROR(links_.prev->irecv(1, &dst, &size, &tag_, &b.recv_req));
  }
  return net::Status::kOk;
}

net::Status RingAllreduce::poll(Block& b) {
  size_t size = 0;
  bool done = false;
  if (b.send_req != nullptr) {
    CFX_RETURN_IF_ERROR(net::test(b.send_req, &done, &size));
    if (done) {
      b.send_req = nullptr;
      b.sent = true;
    }
  }
  if (b.recv_req != nullptr) {
    CFX_RETURN_IF_ERROR(net::test(b.recv_req, &done, &size));
    if (done) {
      b.recv_req = nullptr;
      b.received = true;
      if (in_reduce_scatter()) {
        const size_t elems = size / esize_;
        const uint8_t* src =
            scratch_ + static_cast<size_t>(b.scratch_index) * block_elems_ * esize_;
        reduce::reduce_inplace(dtype_, op_, recv_ + b.recv_off * esize_, src, elems);
        free_scratch_.push_back(b.scratch_index);
        b.scratch_index = -1;
      }
    }
  }
  return net::Status::kOk;
}

net::Status RingAllreduce::progress(bool* done) {
  *done = false;
  const int steps = links_.nranks > 1 ? end_step_ : 0;
  while (step_ < steps) {
    // Post new blocks while the window allows.
    while (next_to_post_ < blocks_.size() &&
           next_to_post_ - finished_ < static_cast<size_t>(max_inflight_)) {
      Block& b = blocks_[next_to_post_];
      CFX_RETURN_IF_ERROR(post(b));
      if ((b.send_req == nullptr && !b.sent) || (b.recv_req == nullptr && !b.received)) break;
      ++next_to_post_;
    }
    bool progressed = false;
    for (size_t i = finished_; i < next_to_post_; ++i) {
      Block& b = blocks_[i];
      if (b.sent && b.received) continue;
      CFX_RETURN_IF_ERROR(poll(b));
      if (b.sent && b.received) {
        progressed = true;
        ++completed_blocks_;
      }
    }
    while (finished_ < next_to_post_ && blocks_[finished_].sent && blocks_[finished_].received) {
      ++finished_;
    }
    if (finished_ < blocks_.size()) {
      if (!progressed) return net::Status::kOk;  // come back later
      continue;
    }
    ++step_;
    if (step_ < steps) plan_step();
  }
  *done = true;
  return net::Status::kOk;
}

}  // namespace conflux::collnet
