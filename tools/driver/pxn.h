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
#pragma once

#include <cstddef>
#include <vector>

#include "driver/bootstrap.h"
#include "driver/net_ring.h"
#include "driver/options.h"
#include "driver/report.h"

namespace conflux::driver {

struct PxnShape {
  int senders = 2;  // parts per grouped irecv (NCCL: up to maxRecvs)
  int lag = 16;     // messages sender j-1 posts before sender j starts
  int steps = 32;   // messages per sender per iteration
  int inflight = 8;
};

// Runs the exchange for every size of `o` (message bytes per part) over `ring`'s connections,
// `o.warmup` + `o.iters` iterations each, every byte checked; appends one Row per size (rank 0's
// carries the gathered time and wrong bytes). Fails with "NCCL would hang" on the deadline.
Status run_pxn(const Options& o, const PxnShape& shape, NetRing* ring, Bootstrap* bs,
               std::vector<Row>* rows);

}  // namespace conflux::driver
