// SPDX-License-Identifier: Apache-2.0
// CollNetDirect's ReduceScatter and AllGather through the plugin (see collnet.h, "direct").
#include <algorithm>

#include "driver/collnet.h"

namespace conflux::driver {

Status CollNetSession::direct(bool reduce, void* send, void* recv, size_t count, DType t, Op op,
                              size_t chunk, int inflight) {
  const size_t es = dtype_size(t);
  const size_t per_rank = count * es;
  const size_t total = per_rank * static_cast<size_t>(bs_->nranks());
  const size_t cb = chunk_bytes(chunk, es);
  const size_t nwin = (total + cb - 1) / cb;
  auto* s = static_cast<char*>(send);
  auto* d = static_cast<char*>(recv);
  auto win_bytes = [&](size_t i) { return std::min(cb, total - i * cb); };
  // This rank's block, advanced to the window's start when the window starts inside it.
  auto own = [&](char* block, size_t off) {
    return off / per_rank == static_cast<size_t>(rank_) ? block + off % per_rank : block;
  };
  return pipeline(
      reduce ? "ReduceScatter" : "AllGather", nwin, inflight,
      [&](size_t i, void** req) {
        const size_t off = i * cb;
        if (reduce) {
          nccl::ncclNetSGE_v11_t part{send_mh_, s + off, win_bytes(i)};
          DRV_CALL(rank_, "collnet.ireducescatter",
                   cn_->ireducescatter(coll_comm_, 1, &part, own(d, off), per_rank, off,
                                       win_bytes(i), static_cast<nccl::ncclDataType_t>(t),
                                       static_cast<nccl::ncclRedOp_t>(op), recv_mh_, req));
        } else {
          nccl::ncclNetSGE_v11_t part{recv_mh_, d + off, win_bytes(i)};
          DRV_CALL(rank_, "collnet.iallgather",
                   cn_->iallgather(coll_comm_, own(s, off), 1, &part, per_rank, off, win_bytes(i),
                                   send_mh_, req));
        }
        return Status();
      },
      win_bytes);
}

Status CollNetSession::reducescatter(void* send, void* recv, size_t count, DType t, Op op,
                                     size_t chunk, int inflight) {
  return direct(true, send, recv, count, t, op, chunk, inflight);
}

Status CollNetSession::allgather(void* send, void* recv, size_t count, DType t, size_t chunk,
                                 int inflight) {
  return direct(false, send, recv, count, t, Op::kSum, chunk, inflight);
}

}  // namespace conflux::driver
