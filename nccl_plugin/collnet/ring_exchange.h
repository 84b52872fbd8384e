// SPDX-License-Identifier: Apache-2.0
// Blocking helpers over the worker ring, for the control path (CollNet connect, failover).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"

namespace conflux::collnet {

// The receive of an allgather's first step (rank-1's own record), posted before this rank
// has its own record, so that it can look at rank-1's while it waits (CollNet connect's join).
struct EarlyFirstRecv {
  net::Request* req = nullptr;  // posted, not yet seen complete
  bool done = false;            // complete: rank-1's record is in `all`
  size_t size = 0;              // the receive's size (read by the transport)
};

// Posts the first step's receive into all[(rank-1) * bytes] (nranks > 1), to be passed to
// ring_allgather with the same `all` and `bytes`; then ring_allgather_test_first tells whether
// it arrived.
net::Status ring_allgather_post_first(net::RecvComm* prev, int rank, int nranks, void* all,
                                      size_t bytes, EarlyFirstRecv* early);
net::Status ring_allgather_test_first(EarlyFirstRecv* early, bool* arrived);

// Every rank contributes `bytes` at `mine`; on return all[i*bytes ...] holds rank i's.
// n-1 steps around the ring; fails with kRemoteError after `timeout` without completion.
// early: the first step's receive, already posted by ring_allgather_post_first (or null).
net::Status ring_allgather(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                           const void* mine, void* all, size_t bytes,
                           std::chrono::milliseconds timeout, EarlyFirstRecv* early = nullptr);

// The agreement every step of CollNet connect uses (served counts, the joins, the verdicts, the
// probes): every rank's record `mine` into *all (all[i] is rank i's), by ring_allgather; with
// one rank, just `mine`. *all keeps its storage when it already has nranks records (an early
// first receive may be posted into it).
template <typename T>
net::Status ring_agree(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                       const T& mine, std::vector<T>* all, std::chrono::milliseconds timeout,
                       EarlyFirstRecv* early = nullptr) {
  static_assert(std::is_trivially_copyable_v<T>, "records cross the wire as bytes");
  if (all->size() != static_cast<size_t>(nranks)) all->assign(static_cast<size_t>(nranks), T{});
  if (nranks < 2) {
    (*all)[0] = mine;
    return net::Status::kOk;
  }
  return ring_allgather(next, prev, rank, nranks, &mine, all->data(), sizeof(T), timeout, early);
}

// Every rank sends `bytes` from `send` to rank+1 while it receives as many from rank-1 into
// `recv`: one step of a ring's traffic, for timing the links at connect.
net::Status ring_shift(net::SendComm* next, net::RecvComm* prev, const void* send, void* recv,
                       size_t bytes, std::chrono::milliseconds timeout);

// Rank `root` sends *msg (any size up to max_bytes) to every other rank, around the ring;
// on return *msg holds it everywhere. Same timeout rule as ring_allgather.
net::Status ring_broadcast(net::SendComm* next, net::RecvComm* prev, int rank, int nranks, int root,
                           std::vector<uint8_t>* msg, size_t max_bytes,
                           std::chrono::milliseconds timeout);

// An allgather around the ring that its owner advances without blocking (the measured
// split's exchange, on a connection of its own): the same n-1 steps as ring_allgather.
class AsyncRingAllgather {
 public:
  AsyncRingAllgather(net::SendComm* next, net::RecvComm* prev, int rank, int nranks, size_t bytes);
  // Starts a round with this rank's record (the previous round must be done).
  void start(const void* mine);
  // Advances the round; *done once every rank's record is in all(). An error ends it.
  net::Status progress(bool* done);
  const uint8_t* all() const { return all_.data(); }

 private:
  net::SendComm* next_;
  net::RecvComm* prev_;
  int rank_, nranks_;
  size_t bytes_;
  std::vector<uint8_t> all_;
  int step_ = 0;
  net::Request* send_ = nullptr;
  net::Request* recv_ = nullptr;
  bool sent_ = false, received_ = false;
};

}  // namespace conflux::collnet
