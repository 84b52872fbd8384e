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
  if (extra <= 0) return Status::Ok();
  constexpr size_t kH = nccl::NCCL_NET_HANDLE_MAXSIZE;
  std::vector<void*> listens(size_t(extra), nullptr);
  std::string mine;
  for (int i = 0; i < extra; ++i) {
    char h[kH] = {};
    DRV_CALL(rank_, "net.listen(PXN connection)", net_->listen(ctx, 0, h, &listens[size_t(i)]));
    mine.append(h, kH);
  }
  std::vector<std::string> all;
  DRV_TRY(bs->allgather(mine, &all));
  const int next = (rank_ + 1) % bs->nranks();
  if (all[size_t(next)].size() != size_t(extra) * kH) {
    return Status::Error("bootstrap: rank " + std::to_string(next) + " sent " +
                         std::to_string(all[size_t(next)].size() / kH) +
                         " PXN listen handles, expected " + std::to_string(extra));
  }
  // NCCL passes the same handle bytes to every connect() retry: one copy per connection.
  std::vector<char> peer(all[size_t(next)].begin(), all[size_t(next)].end());
  // One pair after the other, as NCCL's service thread connects them.
  for (size_t i = 0; i < size_t(extra); ++i) {
    void* send = nullptr;
    void* recv = nullptr;
    DRV_TRY(connect_pair(net_, ctx, rank_, listens[i], peer.data() + i * kH, ring->deadline(),
                         "PXN connection " + std::to_string(i + 1), &send, &recv));
    send_.push_back(send);
    recv_.push_back(recv);
  }
  return Status::Ok();
}

Status PxnConns::close() {
  for (size_t i = 1; i < send_.size(); ++i) {
    DRV_CALL(rank_, "net.closeSend(PXN connection)", net_->closeSend(send_[i]));
    DRV_CALL(rank_, "net.closeRecv(PXN connection)", net_->closeRecv(recv_[i]));
  }
  send_.resize(send_.empty() ? 0 : 1);
  recv_.resize(recv_.empty() ? 0 : 1);
  return Status::Ok();
}

}  // namespace conflux::driver
