// SPDX-License-Identifier: Apache-2.0
// The connections of the PXN exchange (pxn.h): connection 0 is the ring's pair (NetRing); with
// a layout of several connections per peer (maxRecvs = 1), the others are opened here, as
// NCCL's proxy opens one per sender: each with a listen comm of its own, so that rank-1's
// connection i is accepted here as receive comm i. Main thread only.
#pragma once

#include <vector>

#include "driver/bootstrap.h"
#include "driver/net_ring.h"

namespace conflux::driver {

class PxnConns {
 public:
  PxnConns() = default;
  PxnConns(const PxnConns&) = delete;
  PxnConns& operator=(const PxnConns&) = delete;

  // Makes `total` pairs (send comm to rank+1, receive comm from rank-1), the ring's first:
  // listen total-1 times on device 0, exchange the handles over `bs`, then connect and accept
  // them one pair after the other (connect_pair, net_ring.h), bounded by the ring's deadline.
  Status open(const nccl::ncclNet_v11_t* net, void* ctx, NetRing* ring, Bootstrap* bs, int total);
  // Closes the pairs opened here (not the ring's).
  Status close();

  void* send(int i) const { return send_[size_t(i)]; }
  void* recv(int i) const { return recv_[size_t(i)]; }

 private:
  const nccl::ncclNet_v11_t* net_ = nullptr;
  int rank_ = 0;
  std::vector<void*> send_, recv_;  // [0]: the ring's
};

}  // namespace conflux::driver
