// SPDX-License-Identifier: Apache-2.0
// The ring pattern over the plugin's point-to-point net (ncclNet_v11), as NCCL's net
// transport drives it: connections to rank+1 (send) and from rank-1 (receive) set up with
// non-blocking connect/accept, host buffers registered once (NCCL_PTR_HOST), then per
// AllReduce a ring reduce-scatter followed by a ring all-gather, each segment cut into
// pieces of at most chunk_bytes with up to `inflight` sends and receives outstanding.
//
// Exact plugin calls (see README.md "Call sequence"):
//   setup:    listen(ctx,0) -> [allgather handles] -> loop{connect(ctx,0,h[next]) if no send
//             comm; accept(listen) if no recv comm} -> closeListen -> regMr x3 on each comm
//   per op:   isend(send, ptr, bytes, tag=my rank, mh, &phandle, &req) / irecv(recv, 1, slot,
//             chunk_bytes, tag=rank-1, mh, &phandle, &req), NULL req = retry; test() oldest
//             first; irecvConsumed(recv, 1, req) after the data was used, if the plugin has it
//   teardown: deregMr x3 on each comm -> closeSend -> closeRecv
// All calls come from the rank's main thread, like NCCL's single proxy thread.
#pragma once

#include <string>
#include <vector>

#include "conflux/common/dtype.h"
#include "driver/bootstrap.h"
#include "driver/buffers.h"
#include "driver/plugin.h"
#include "driver/service.h"

namespace conflux::driver {

// One connection pair as NCCL's proxy makes it: net.connect(ctx, dev 0, peer_handle) and
// net.accept(listen) polled (non-blocking, the same handle bytes at every retry) until both
// comms are up, then net.closeListen, as NCCL does once its accept completed. `what` names the
// pair in the calls' error lines and in the timeout's. Fails when `dl` passes first.
Status connect_pair(const nccl::ncclNet_v11_t* net, void* ctx, int rank, void* listen,
                    char* peer_handle, const Deadline* dl, const std::string& what, void** send,
                    void** recv);

// k listen comms on device 0 (net.listen), their handles exchanged over `bs`: *peer gets
// rank+1's k handles, NCCL_NET_HANDLE_MAXSIZE bytes each, the bytes connect_pair passes to
// every connect() retry. `what` names the calls in error lines.
Status listen_to_next(const nccl::ncclNet_v11_t* net, void* ctx, Bootstrap* bs, int k,
                      const std::string& what, std::vector<void*>* listens, std::string* peer);

class NetRing {
 public:
  NetRing() = default;
  NetRing(const NetRing&) = delete;
  NetRing& operator=(const NetRing&) = delete;

  // Connects the ring and registers `bufs` (kept by reference until teardown). With
  // service_conns > 0 a service thread then makes and closes that many more connections to
  // rank+1 while the ring runs (service.h); teardown joins it.
  Status setup(const nccl::ncclNet_v11_t* net, void* ctx, Bootstrap* bs, HostBuffers* bufs,
               size_t chunk_bytes, int inflight, const Deadline* dl, int service_conns = 0,
               bool hold_service_conns = false);
  // With hold_service_conns: waits until the service thread's connections are all up.
  Status service_connected() { return service_.connected(); }
  // send/recv must be bufs->send / bufs->recv (recv == send for in place).
  Status allreduce(void* send, void* recv, size_t count, DType t, Op op);
  Status teardown();

  // The connections, for other patterns over them (pxn.h); valid between setup and teardown.
  const nccl::ncclNet_v11_t* net() const { return net_; }
  void* send_comm() const { return send_comm_; }
  void* recv_comm() const { return recv_comm_; }
  const Deadline* deadline() const { return dl_; }

 private:
  struct Piece {
    size_t first;  // element offset in the buffer
    size_t count;
  };
  Piece piece(size_t count, int seg, size_t k, size_t nch) const;
  Status register_all(void* comm, const char* which, void** mh);
  void* send_mhandle(const void* ptr) const;

  const nccl::ncclNet_v11_t* net_ = nullptr;
  Bootstrap* bs_ = nullptr;
  HostBuffers* bufs_ = nullptr;
  const Deadline* dl_ = nullptr;
  int rank_ = 0, nranks_ = 1;
  size_t chunk_bytes_ = 0;
  int inflight_ = 1;
  void* send_comm_ = nullptr;
  void* recv_comm_ = nullptr;
  void* send_mh_[3] = {nullptr, nullptr, nullptr};  // send, recv, staging on send_comm_
  void* recv_mh_[3] = {nullptr, nullptr, nullptr};  // same buffers on recv_comm_
  std::vector<void*> phandles_;                     // profiler handle slots, as NCCL passes
  ServiceThread service_;
};

}  // namespace conflux::driver
