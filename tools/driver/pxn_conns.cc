// SPDX-License-Identifier: Apache-2.0
#include "driver/pxn_conns.h"

#include <string>

namespace conflux::driver {

Status PxnConns::open(const nccl::ncclNet_v11_t* net, void* ctx, NetRing* ring, Bootstrap* bs,
                      int total) {
  net_ = net;
  rank_ = bs->rank();
  send_.assign(1, ring->send_comm());
  recv_.assign(1, ring->recv_comm());
  const int extra = total - 1;
  if (extra <= 0) return Status();
  std::vector<void*> listens;
  std::string peer;
  CFX_TRY(listen_to_next(net_, ctx, bs, extra, "PXN connection", &listens, &peer));
  // One pair after the other, as NCCL's service thread connects them.
  for (size_t i = 0; i < size_t(extra); ++i) {
    void* send = nullptr;
    void* recv = nullptr;
    CFX_TRY(connect_pair(net_, ctx, rank_, listens[i], &peer[i * nccl::NCCL_NET_HANDLE_MAXSIZE],
                         ring->deadline(), "PXN connection " + std::to_string(i + 1), &send,
                         &recv));
    send_.push_back(send);
    recv_.push_back(recv);
  }
  return Status();
}

Status PxnConns::close() {
  for (size_t i = 1; i < send_.size(); ++i) {
    DRV_CALL(rank_, "net.closeSend(PXN connection)", net_->closeSend(send_[i]));
    DRV_CALL(rank_, "net.closeRecv(PXN connection)", net_->closeRecv(recv_[i]));
  }
  send_.resize(send_.empty() ? 0 : 1);
  recv_.resize(recv_.empty() ? 0 : 1);
  return Status();
}

}  // namespace conflux::driver
