// SPDX-License-Identifier: Apache-2.0
#include "driver/service.h"

#include <cstdlib>
#include <cstring>

#include "driver/idle.h"
#include "driver/net_ring.h"

namespace conflux::driver {

Status ServiceThread::listen(const nccl::ncclNet_v11_t* net, void* ctx, int rank, int k, bool hold,
                             std::string* handles) {
  hold_ = hold;
  net_ = net;
  ctx_ = ctx;
  rank_ = rank;
  handles->clear();
  for (int i = 0; i < k; ++i) {
    char h[nccl::NCCL_NET_HANDLE_MAXSIZE] = {};
    void* l = nullptr;
    DRV_CALL(rank_, "net.listen(service connection)", net_->listen(ctx_, 0, h, &l));
    listens_.push_back(l);
    handles->append(h, sizeof h);
  }
  return Status();
}

void ServiceThread::start(const std::string& next, const Deadline* dl) {
  dl_ = dl;
  if (listens_.empty()) return;
  thread_ = std::thread([this, next] { run(next); });
}

Status ServiceThread::connected() {
  while (!up_.load(std::memory_order_acquire)) {
    if (done_.load(std::memory_order_acquire)) {
      return result_.ok() ? internal_error("the service thread ended before connecting") : result_;
    }
    if (dl_->passed()) return timed_out("--timeout reached waiting for --hold-conns");
    idle_pause();
  }
  return Status();
}

Status ServiceThread::join() {
  if (thread_.joinable()) thread_.join();
  for (size_t i = 0; i < held_.size(); ++i) {
    const nccl::ncclResult_t rc =
        i % 2 == 0 ? net_->closeSend(held_[i]) : net_->closeRecv(held_[i]);
    if (rc != nccl::ncclSuccess && result_.ok())
      result_ = call_failed(rank_, "net.close(held)", rc);
  }
  held_.clear();
  return result_;
}

void ServiceThread::run(std::string next) {
  result_ = [&]() -> Status {
    const size_t k = listens_.size();
    std::vector<void*> sends(k, nullptr), recvs(k, nullptr);
    std::vector<std::vector<char>> peer(k);
    for (size_t i = 0; i < k; ++i) {
      peer[i].assign(next.begin() + i * nccl::NCCL_NET_HANDLE_MAXSIZE,
                     next.begin() + (i + 1) * nccl::NCCL_NET_HANDLE_MAXSIZE);
    }
    // Connect and accept as NCCL's service thread does: non-blocking, polled, one at a time.
    for (size_t i = 0; i < k; ++i) {
      CFX_TRY(connect_pair(net_, ctx_, rank_, listens_[i], peer[i].data(), dl_,
                           "service thread, connection " + std::to_string(i), &sends[i],
                           &recvs[i]));
      listens_[i] = nullptr;
    }
    // Register and deregister a buffer on every new comm, then close them all.
    std::vector<char> buf(size_t{1} << 20);
    for (size_t i = 0; i < k; ++i) {
      for (void* comm : {sends[i], recvs[i]}) {
        void* mh = nullptr;
        DRV_CALL(rank_, "net.regMr(service thread)",
                 net_->regMr(comm, buf.data(), buf.size(), nccl::NCCL_PTR_HOST, &mh));
        DRV_CALL(rank_, "net.deregMr(service thread)", net_->deregMr(comm, mh));
      }
      if (hold_) {  // join() closes them
        held_.push_back(sends[i]);
        held_.push_back(recvs[i]);
        continue;
      }
      DRV_CALL(rank_, "net.closeSend(service thread)", net_->closeSend(sends[i]));
      DRV_CALL(rank_, "net.closeRecv(service thread)", net_->closeRecv(recvs[i]));
    }
    up_.store(true, std::memory_order_release);
    return Status();
  }();
  done_.store(true, std::memory_order_release);
}

}  // namespace conflux::driver
