// SPDX-License-Identifier: Apache-2.0
// NetRing connection setup and teardown (see net_ring.h for the call sequence).
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "driver/idle.h"
#include "driver/net_ring.h"

namespace conflux::driver {

Status connect_pair(const nccl::ncclNet_v11_t* net, void* ctx, int rank, void* listen,
                    char* peer_handle, const Deadline* dl, const std::string& what, void** send,
                    void** recv) {
  const std::string connect = "net.connect(dev 0, " + what + ", rank+1)";
  const std::string accept = "net.accept(" + what + ", rank-1)";
  nccl::ncclNetDeviceHandle_v11_t* send_dev = nullptr;
  nccl::ncclNetDeviceHandle_v11_t* recv_dev = nullptr;
  uint64_t polls = 0;
  while (*send == nullptr || *recv == nullptr) {
    if (*send == nullptr) {
      DRV_CALL(rank, connect.c_str(), net->connect(ctx, 0, peer_handle, send, &send_dev));
    }
    if (*recv == nullptr) DRV_CALL(rank, accept.c_str(), net->accept(listen, recv, &recv_dev));
    if ((++polls & 255) == 0 && dl->passed()) {
      return timed_out("--timeout reached in net.connect/accept (" + what +
                       ": send comm to rank+1 " + (*send ? "ready" : "missing") +
                       ", recv comm from rank-1 " + (*recv ? "ready" : "missing") + ")");
    }
    if (*send == nullptr || *recv == nullptr) idle_pause();
  }
  DRV_CALL(rank, "net.closeListen", net->closeListen(listen));
  return Status();
}

Status listen_to_next(const nccl::ncclNet_v11_t* net, void* ctx, Bootstrap* bs, int k,
                      const std::string& what, std::vector<void*>* listens, std::string* peer) {
  constexpr size_t kH = nccl::NCCL_NET_HANDLE_MAXSIZE;
  const std::string call = "net.listen(dev 0, " + what + ")";
  listens->assign(size_t(k), nullptr);
  std::string mine;
  for (int i = 0; i < k; ++i) {
    char h[kH] = {};
    DRV_CALL(bs->rank(), call.c_str(), net->listen(ctx, 0, h, &(*listens)[size_t(i)]));
    mine.append(h, kH);
  }
  std::vector<std::string> all;
  CFX_TRY(bs->allgather(mine, &all));
  const int next = (bs->rank() + 1) % bs->nranks();
  if (all[size_t(next)].size() != size_t(k) * kH) {
    return internal_error("bootstrap: rank " + std::to_string(next) + " sent " +
                          std::to_string(all[size_t(next)].size() / kH) + " " + what +
                          " listen handles, expected " + std::to_string(k));
  }
  *peer = std::move(all[size_t(next)]);
  return Status();
}

Status NetRing::setup(const nccl::ncclNet_v11_t* net, void* ctx, Bootstrap* bs, HostBuffers* bufs,
                      size_t chunk_bytes, int inflight, const Deadline* dl, int service_conns,
                      bool hold_service_conns) {
  net_ = net;
  bs_ = bs;
  bufs_ = bufs;
  dl_ = dl;
  rank_ = bs->rank();
  nranks_ = bs->nranks();
  chunk_bytes_ = chunk_bytes;
  inflight_ = inflight;
  phandles_.assign(2 * static_cast<size_t>(inflight), nullptr);
  if (nranks_ == 1) return Status();  // no peer: AllReduce is a copy

  // listen on device 0; the handle goes to every rank through the bootstrap.
  char handle[nccl::NCCL_NET_HANDLE_MAXSIZE] = {};
  void* listen_comm = nullptr;
  DRV_CALL(rank_, "net.listen(dev 0)", net_->listen(ctx, 0, handle, &listen_comm));
  if (listen_comm == nullptr) {
    return internal_error("net.listen returned no listen comm");
  }
  std::string extra;  // the service thread's listen handles travel with the ring's
  CFX_TRY(service_.listen(net_, ctx, rank_, service_conns, hold_service_conns, &extra));
  std::vector<std::string> handles;
  CFX_TRY(bs_->allgather(std::string(handle, sizeof handle) + extra, &handles));
  const int next = (rank_ + 1) % nranks_;
  // NCCL keeps the peer's handle in its own memory and passes the same bytes to every
  // connect() retry (plugins may keep connection state in it): so do we.
  char peer_handle[nccl::NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(peer_handle, handles[next].data(), sizeof peer_handle);

  CFX_TRY(connect_pair(net_, ctx, rank_, listen_comm, peer_handle, dl_, "ring", &send_comm_,
                       &recv_comm_));
  CFX_TRY(register_all(send_comm_, "send", send_mh_));
  CFX_TRY(register_all(recv_comm_, "recv", recv_mh_));
  service_.start(handles[next].substr(sizeof handle), dl_);
  return Status();
}

Status NetRing::register_all(void* comm, const char* which, void** mh) {
  void* ptrs[3] = {bufs_->send, bufs_->recv, bufs_->staging};
  size_t sizes[3] = {bufs_->bytes, bufs_->bytes, bufs_->staging_bytes};
  static const char* names[3] = {"send buffer", "recv buffer", "staging buffer"};
  for (int i = 0; i < 3; ++i) {
    std::string call = std::string("net.regMr(") + which + " comm, " + names[i] + ", " +
                       std::to_string(sizes[i]) + " B, NCCL_PTR_HOST)";
    DRV_CALL(rank_, call.c_str(),
             net_->regMr(comm, ptrs[i], sizes[i], nccl::NCCL_PTR_HOST, &mh[i]));
  }
  return Status();
}

Status NetRing::teardown() {
  if (net_ == nullptr || nranks_ == 1) return Status();
  CFX_TRY(service_.join());
  for (int i = 0; i < 3; ++i) {
    if (send_mh_[i] != nullptr)
      DRV_CALL(rank_, "net.deregMr(send comm)", net_->deregMr(send_comm_, send_mh_[i]));
    if (recv_mh_[i] != nullptr)
      DRV_CALL(rank_, "net.deregMr(recv comm)", net_->deregMr(recv_comm_, recv_mh_[i]));
    send_mh_[i] = recv_mh_[i] = nullptr;
  }
  if (send_comm_ != nullptr) DRV_CALL(rank_, "net.closeSend", net_->closeSend(send_comm_));
  if (recv_comm_ != nullptr) DRV_CALL(rank_, "net.closeRecv", net_->closeRecv(recv_comm_));
  send_comm_ = recv_comm_ = nullptr;
  return Status();
}

void* NetRing::send_mhandle(const void* ptr) const {
  const auto* p = static_cast<const char*>(ptr);
  const auto* s = static_cast<const char*>(bufs_->send);
  if (p >= s && p < s + bufs_->bytes) return send_mh_[0];
  return send_mh_[1];
}

NetRing::Piece NetRing::piece(size_t count, int seg, size_t k, size_t nch) const {
  const size_t n = static_cast<size_t>(nranks_);
  const size_t base = count / n, rem = count % n;
  const size_t j = static_cast<size_t>(seg);
  const size_t seg_first = j * base + (j < rem ? j : rem);
  const size_t seg_len = base + (j < rem ? 1 : 0);
  const size_t pb = seg_len / nch, pr = seg_len % nch;
  return Piece{seg_first + k * pb + (k < pr ? k : pr), pb + (k < pr ? 1 : 0)};
}

}  // namespace conflux::driver
