// SPDX-License-Identifier: Apache-2.0
// PXN-shared point-to-point connections, as NCCL's net transport drives them when a plugin
// declares maxRecvs > 1 (NCCL_NET_SHARED_COMMS, on by default): several local senders (the
// GPUs of a node whose traffic leaves through one NIC's proxy) share one send comm, each
// message tagged with its sender's rank, and the receiving proxy posts *grouped* irecvs, one
// part per sender, each complete only when every part has arrived (src/transport/net.cc).
//
// Here every rank's send comm to rank+1 carries `senders` virtual senders (tags
// rank*senders + j), and its receive comm from rank-1 takes grouped irecvs of `senders` parts.
// Each sender has its own window of `inflight` isends, tested oldest first; the receiver keeps
// up to `inflight` grouped irecvs posted, tests the oldest, checks every byte of every part
// and calls irecvConsumed. A late GPU is modelled by a lag: sender j starts only once sender
// j-1 has posted `lag` messages (or 100 ms after sender j-1 started, so a plugin whose sends
// wait for the receiver is not blocked by the lag itself). With eager sends and lag >
// inflight, sender 0's message inflight+1 reaches the receiver before sender 1's first: a
// plugin that matches messages strictly in arrival order never completes the first group,
// which is the hang NCCL would see in alltoall with PXN on multi-GPU nodes.
//
// How many connections NCCL opens for those senders depends on the plugin's maxRecvs
// (src/transport/net.cc, NCCL 2.30): sendProxyConnect / recvProxyConnect share one connection
// per device, peer and channel only when maxRecvs > 1 (and NCCL_NET_SHARED_COMMS); otherwise
// every sender connects on its own and recvProxyProgress posts irecvs of one part on each.
// With sharing, recvProxyProgress gathers the senders of one receive comm into groups of at
// most maxRecvs parts, and each group posts its own grouped irecvs: 1 < maxRecvs < senders
// still shares the connection, with ceil(senders / maxRecvs) groups on it. PxnLayout is that
// decision; the exchange follows it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "driver/bootstrap.h"
#include "driver/net_ring.h"
#include "driver/options.h"
#include "driver/report.h"

namespace conflux::driver {

inline constexpr int kMaxPxnSenders = 8;  // --pxn-senders' bound: NCCL's most parts per irecv

struct PxnShape {
  int senders = 2;  // parts per grouped irecv (NCCL: up to maxRecvs)
  int lag = 16;     // messages sender j-1 posts before sender j starts
  int steps = 32;   // messages per sender per iteration
  int inflight = 8;
};

// The connections and receive groups NCCL's net transport uses for `senders` senders to one
// peer when the plugin declares `max_recvs` (see the top of this file). Pure: no I/O.
struct PxnLayout {
  int conns = 1;                 // connection pairs per peer (send comm + receive comm)
  std::vector<int> sender_conn;  // per sender: the connection it sends on
  std::vector<int> group_first;  // per receive group: its first sender (consecutive ones)
  std::vector<int> group_parts;  // ... its parts per irecv
  std::vector<int> group_conn;   // ... the receive comm it posts on
  int groups() const { return int(group_first.size()); }
};
PxnLayout pxn_layout(int senders, int max_recvs);
// One line for the table header: connections per peer and parts per irecv.
std::string describe_pxn_layout(const PxnLayout& l, int max_recvs);

// Runs the exchange for every size of `o` (message bytes per part), `o.warmup` + `o.iters`
// iterations each, every byte checked; appends one Row per size (rank 0's carries the gathered
// time and wrong bytes). Connection 0 of `layout` is `ring`'s pair; the others are opened here
// (net.listen/connect/accept on `ctx`) and closed at the end. `note` gets (on every rank) the
// comms each rank opened for the exchange, the threads and fds per rank process while they
// are open, and the messages each receive comm carried on this rank. Fails with "NCCL would
// hang" on the deadline.
Status run_pxn(const Options& o, const PxnShape& shape, const PxnLayout& layout, void* ctx,
               NetRing* ring, Bootstrap* bs, std::vector<Row>* rows,
               const std::function<void(const std::string&)>& note);

}  // namespace conflux::driver
