// SPDX-License-Identifier: Apache-2.0
// Ring AllReduce over the p2p net: the progress loop (see net_ring.h).
//
// The 2(N-1) ring steps, each cut into nch pieces, form one stream of items x = step*nch + k
// per direction. Rank r at step s < N-1 (reduce-scatter) sends segment r-s and receives
// segment r-s-1, which it reduces into its receive buffer; at all-gather step t = s-(N-1) it
// sends segment r+1-t and receives segment r-t, which it copies. Dependencies:
//   send x (s >= 1) needs receive x-nch processed (it forwards that data);
//   all-gather receive x may overwrite data only after send x-(N-1)*nch completed.
#include "driver/net_ring.h"

#include <cstring>

#include "conflux/common/reduce.h"
#include "driver/idle.h"

namespace conflux::driver {

Status NetRing::allreduce(void* send, void* recv, size_t count, DType t, Op op) {
  const size_t es = dtype_size(t);
  if (nranks_ == 1) {
    if (send != recv) std::memcpy(recv, send, count * es);
    return Status();
  }
  if (count == 0) return Status();
  const int n = nranks_, r = rank_;
  const int prev = (r + n - 1) % n;
  const size_t chunk_elems = chunk_bytes_ / es;
  const size_t max_seg = count / n + (count % n != 0 ? 1 : 0);
  const size_t nch = max_seg == 0 ? 1 : (max_seg + chunk_elems - 1) / chunk_elems;
  const size_t rs_items = static_cast<size_t>(n - 1) * nch;
  const size_t items = 2 * rs_items;
  const size_t window = static_cast<size_t>(inflight_);
  auto mod = [n](long v) { return static_cast<int>(((v % n) + n) % n); };
  auto send_seg = [&](size_t s) {
    return s < static_cast<size_t>(n - 1) ? mod(r - static_cast<long>(s))
                                          : mod(r + 1 - static_cast<long>(s - (n - 1)));
  };
  auto recv_seg = [&](size_t s) {
    return s < static_cast<size_t>(n - 1) ? mod(r - static_cast<long>(s) - 1)
                                          : mod(r - static_cast<long>(s - (n - 1)));
  };
  auto* sbase = static_cast<char*>(send);
  auto* rbase = static_cast<char*>(recv);
  auto* staging = static_cast<char*>(bufs_->staging);
  std::vector<void*> sreq(window, nullptr), rreq(window, nullptr);
  size_t s_posted = 0, s_done = 0, r_posted = 0, r_done = 0;
  PollPass pass;

  while (s_done < items || r_done < items) {
    bool progress = false;
    // Post sends whose data is final, up to the window.
    while (s_posted < items && s_posted - s_done < window) {
      const size_t x = s_posted, s = x / nch;
      if (s >= 1 && r_done < x - nch + 1) break;
      const Piece p = piece(count, send_seg(s), x % nch, nch);
      char* src = (s == 0 ? sbase : rbase) + p.first * es;
      void* req = nullptr;
      DRV_CALL(r, "net.isend",
               net_->isend(send_comm_, src, p.count * es, r, send_mhandle(src),
                           &phandles_[x % window], &req));
      if (req == nullptr) break;  // plugin busy: retry later, as NCCL does
      sreq[x % window] = req;
      ++s_posted;
      progress = true;
    }
    // Post receives into staging slots, up to the window.
    while (r_posted < items && r_posted - r_done < window) {
      const size_t x = r_posted;
      void* data = staging + (x % window) * chunk_bytes_;
      size_t size = chunk_bytes_;  // posted size >= the size the peer sends
      int tag = prev;
      void* mh = recv_mh_[2];
      void* req = nullptr;
      DRV_CALL(r, "net.irecv",
               net_->irecv(recv_comm_, 1, &data, &size, &tag, &mh, &phandles_[window + x % window],
                           &req));
      if (req == nullptr) break;
      rreq[x % window] = req;
      ++r_posted;
      progress = true;
    }
    // Complete sends, oldest first.
    while (s_done < s_posted) {
      int done = 0, size = 0;
      DRV_CALL(r, "net.test(send)", net_->test(sreq[s_done % window], &done, &size));
      if (!done) break;
      sreq[s_done % window] = nullptr;
      ++s_done;
      progress = true;
    }
    // Complete receives, oldest first, and use the data.
    while (r_done < r_posted) {
      const size_t x = r_done, s = x / nch;
      if (x >= rs_items && s_done < x - rs_items + 1) break;  // region still being sent
      int done = 0, size = 0;
      void* req = rreq[x % window];
      DRV_CALL(r, "net.test(recv)", net_->test(req, &done, &size));
      if (!done) break;
      const Piece p = piece(count, recv_seg(s), x % nch, nch);
      if (static_cast<size_t>(size) != p.count * es) {
        return internal_error("net.test(recv) reported " + std::to_string(size) +
                              " bytes, the peer sent " + std::to_string(p.count * es));
      }
      const char* slot = staging + (x % window) * chunk_bytes_;
      char* dst = rbase + p.first * es;
      if (x < rs_items) {
        if (send != recv) std::memcpy(dst, sbase + p.first * es, p.count * es);
        conflux::reduce::reduce_inplace(t, op, dst, slot, p.count);
      } else {
        std::memcpy(dst, slot, p.count * es);
      }
      if (net_->irecvConsumed != nullptr) {
        DRV_CALL(r, "net.irecvConsumed", net_->irecvConsumed(recv_comm_, 1, req));
      }
      rreq[x % window] = nullptr;
      ++r_done;
      progress = true;
    }
    if (pass.expired(progress, *dl_)) {
      return timed_out("--timeout reached in the ring AllReduce (" + std::to_string(s_done) + "/" +
                       std::to_string(items) + " sends and " + std::to_string(r_done) + "/" +
                       std::to_string(items) + " receives complete)");
    }
  }
  return Status();
}

}  // namespace conflux::driver
