#include "driver/pxn_conns.h"

#include <cstring>
#include <string>

#include "driver/idle.h"

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
  std::vector<void*> sends(size_t(extra), nullptr), recvs(size_t(extra), nullptr);
  const Deadline* dl = ring->deadline();
  for (;;) {
    int up = 0;
    for (size_t i = 0; i < size_t(extra); ++i) {
      nccl::ncclNetDeviceHandle_v11_t* dev = nullptr;
      if (sends[i] == nullptr) {
        DRV_CALL(rank_, "net.connect(PXN connection, rank+1)",
                 net_->connect(ctx, 0, peer.data() + i * kH, &sends[i], &dev));
      }
      if (recvs[i] == nullptr) {
        DRV_CALL(rank_, "net.accept(PXN connection, rank-1)",
                 net_->accept(listens[i], &recvs[i], &dev));
      }
      up += (sends[i] != nullptr) + (recvs[i] != nullptr);
    }
    if (up == 2 * extra) break;
    if (dl->passed()) {
      return Status::Error("--timeout reached connecting the PXN connections (" +
                           std::to_string(up) + "/" + std::to_string(2 * extra) + " comms up)");
    }
    idle_pause();
  }
  for (size_t i = 0; i < size_t(extra); ++i) {
    DRV_CALL(rank_, "net.closeListen(PXN connection)", net_->closeListen(listens[i]));
    send_.push_back(sends[i]);
    recv_.push_back(recvs[i]);
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
