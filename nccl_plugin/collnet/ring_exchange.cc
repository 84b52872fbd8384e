// SPDX-License-Identifier: Apache-2.0
#include "collnet/ring_exchange.h"

#include <cstring>

namespace conflux::collnet {
namespace {

constexpr int kAgreementTag = 0x3ffffff0;
constexpr int kBroadcastTag = 0x3ffffff1;
constexpr int kShiftTag = 0x3ffffff2;

}  // namespace

net::Status ring_allgather_post_first(net::RecvComm* prev, int rank, int nranks, void* all,
                                      size_t bytes, EarlyFirstRecv* early) {
  if (nranks < 2 || early->req != nullptr || early->done) return net::Status::kOk;
  const int recv_from = ((rank - 1) % nranks + nranks) % nranks;
  void* dst = static_cast<uint8_t*>(all) + static_cast<size_t>(recv_from) * bytes;
  const int tag = kAgreementTag;
  early->size = bytes;
  CFX_RETURN_IF_ERROR(prev->irecv(1, &dst, &early->size, &tag, &early->req));
  return early->req == nullptr ? net::Status::kInternalError : net::Status::kOk;
}

net::Status ring_allgather_test_first(EarlyFirstRecv* early, bool* arrived) {
  if (early->req != nullptr) {
    size_t size = 0;
    CFX_RETURN_IF_ERROR(net::test(early->req, &early->done, &size));
    if (early->done) early->req = nullptr;
  }
  *arrived = early->done;
  return net::Status::kOk;
}

net::Status ring_allgather(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                           const void* mine, void* all, size_t bytes,
                           std::chrono::milliseconds timeout, EarlyFirstRecv* early) {
  auto* out = static_cast<uint8_t*>(all);
  std::memcpy(out + static_cast<size_t>(rank) * bytes, mine, bytes);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Step s: forward the record of rank (rank - s), receive that of rank (rank - s - 1).
  for (int s = 0; s < nranks - 1; ++s) {
    const int send_from = ((rank - s) % nranks + nranks) % nranks;
    const int recv_from = ((rank - s - 1) % nranks + nranks) % nranks;
    net::Request* sreq = nullptr;
    net::Request* rreq = nullptr;
    void* dst = out + static_cast<size_t>(recv_from) * bytes;
    const int tag = kAgreementTag;
    CFX_RETURN_IF_ERROR(
        next->isend(out + static_cast<size_t>(send_from) * bytes, bytes, tag, &sreq));
    const bool posted = s == 0 && early != nullptr && (early->req != nullptr || early->done);
    if (posted) {
      rreq = early->req;
      early->req = nullptr;
      early->done = true;
    } else {
      CFX_RETURN_IF_ERROR(prev->irecv(1, &dst, &bytes, &tag, &rreq));
      if (rreq == nullptr) return net::Status::kInternalError;  // fresh comms
    }
    if (sreq == nullptr) return net::Status::kInternalError;
    CFX_RETURN_IF_ERROR(net::waitRequest(sreq, deadline));
    if (rreq != nullptr) CFX_RETURN_IF_ERROR(net::waitRequest(rreq, deadline));
  }
  return net::Status::kOk;
}

AsyncRingAllgather::AsyncRingAllgather(net::SendComm* next, net::RecvComm* prev, int rank,
                                       int nranks, size_t bytes)
    : next_(next),
      prev_(prev),
      rank_(rank),
      nranks_(nranks),
      bytes_(bytes),
      all_(static_cast<size_t>(nranks) * bytes),
      step_(nranks - 1) {}

void AsyncRingAllgather::start(const void* mine) {
  std::memcpy(all_.data() + static_cast<size_t>(rank_) * bytes_, mine, bytes_);
  step_ = 0;
  send_ = recv_ = nullptr;
  sent_ = received_ = false;
}

net::Status AsyncRingAllgather::progress(bool* done) {
  *done = false;
  while (step_ < nranks_ - 1) {
    // Step s: forward the record of rank (rank - s), receive that of rank (rank - s - 1).
    const int send_from = ((rank_ - step_) % nranks_ + nranks_) % nranks_;
    const int recv_from = ((rank_ - step_ - 1) % nranks_ + nranks_) % nranks_;
    const int tag = kAgreementTag;
    if (send_ == nullptr && !sent_) {
      CFX_RETURN_IF_ERROR(
          next_->isend(all_.data() + static_cast<size_t>(send_from) * bytes_, bytes_, tag, &send_));
    }
    if (recv_ == nullptr && !received_) {
      void* dst = all_.data() + static_cast<size_t>(recv_from) * bytes_;
      size_t size = bytes_;
      CFX_RETURN_IF_ERROR(prev_->irecv(1, &dst, &size, &tag, &recv_));
    }
    size_t size = 0;
    if (send_ != nullptr) {
      CFX_RETURN_IF_ERROR(net::test(send_, &sent_, &size));
      if (sent_) send_ = nullptr;
    }
    if (recv_ != nullptr) {
      CFX_RETURN_IF_ERROR(net::test(recv_, &received_, &size));
      if (received_) recv_ = nullptr;
    }
    if (!sent_ || !received_) return net::Status::kOk;  // later (a NULL request: posted later)
    ++step_;
    sent_ = received_ = false;
  }
  *done = true;
  return net::Status::kOk;
}

net::Status ring_shift(net::SendComm* next, net::RecvComm* prev, const void* send, void* recv,
                       size_t bytes, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  void* data[1] = {recv};
  size_t size[1] = {bytes};
  int tag[1] = {kShiftTag};
  net::Request *rx = nullptr, *tx = nullptr;
  CFX_RETURN_IF_ERROR(prev->irecv(1, data, size, tag, &rx));
  CFX_RETURN_IF_ERROR(next->isend(send, bytes, kShiftTag, &tx));
  if (rx == nullptr || tx == nullptr) return net::Status::kInternalError;  // nothing else queued
  CFX_RETURN_IF_ERROR(net::waitRequest(tx, deadline));
  return net::waitRequest(rx, deadline);
}

net::Status ring_broadcast(net::SendComm* next, net::RecvComm* prev, int rank, int nranks, int root,
                           std::vector<uint8_t>* msg, size_t max_bytes,
                           std::chrono::milliseconds timeout) {
  if (nranks < 2) return net::Status::kOk;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const bool forward = (rank + 1) % nranks != root;
  const int tag = kBroadcastTag;
  uint64_t len = msg->size();
  if (rank != root) {
    void* dst = &len;
    size_t hdr = sizeof len;
    net::Request* rreq = nullptr;
    CFX_RETURN_IF_ERROR(prev->irecv(1, &dst, &hdr, &tag, &rreq));
    if (rreq == nullptr) return net::Status::kInternalError;
    CFX_RETURN_IF_ERROR(net::waitRequest(rreq, deadline));
    if (len > max_bytes) return net::Status::kInvalidUsage;
    msg->resize(len);
    if (len > 0) {
      dst = msg->data();
      size_t size = len;
      CFX_RETURN_IF_ERROR(prev->irecv(1, &dst, &size, &tag, &rreq));
      if (rreq == nullptr) return net::Status::kInternalError;
      CFX_RETURN_IF_ERROR(net::waitRequest(rreq, deadline));
    }
  }
  if (rank == root || forward) {
    net::Request* sreq = nullptr;
    CFX_RETURN_IF_ERROR(next->isend(&len, sizeof len, tag, &sreq));
    if (sreq == nullptr) return net::Status::kInternalError;
    CFX_RETURN_IF_ERROR(net::waitRequest(sreq, deadline));
    if (len > 0) {
      CFX_RETURN_IF_ERROR(next->isend(msg->data(), len, tag, &sreq));
      if (sreq == nullptr) return net::Status::kInternalError;
      CFX_RETURN_IF_ERROR(net::waitRequest(sreq, deadline));
    }
  }
  return net::Status::kOk;
}

}  // namespace conflux::collnet
