// SPDX-License-Identifier: Apache-2.0
// Per-rank setup helpers: ABI member checks, net init as NCCL does it, run description.
#pragma once

#include <cstdint>
#include <string>

#include "driver/bootstrap.h"
#include "driver/options.h"
#include "driver/plugin.h"
#include "driver/report.h"

namespace conflux::driver {

// Error naming the first NULL member NCCL would call (makeVDevice/setNetAttr/irecvConsumed/
// regMrDmaBuf/iflush/getDeviceMr may be NULL).
Status check_net_members(const nccl::ncclNet_v11_t* net);
Status check_collnet_members(const nccl::ncclCollNet_v11_t* cn);

struct NetDevice {
  std::string name;
  int speed_mbps = 0;
  int ptr_support = 0;
  int ndev = 0;
  float latency_us = 0;  // getProperties(0).latency
  int max_recvs = 0;     // getProperties(0).maxRecvs
};

// net.init(&ctx, commId, &{trafficClass=-1}, logger, NULL) -> devices -> getProperties(0),
// then agree_latency over `bs`. Fails if there is no device, device 0 cannot take host memory,
// or the ranks' latencies differ.
Status net_init(const nccl::ncclNet_v11_t* net, int rank, uint64_t comm_id, Bootstrap* bs,
                void** ctx, NetDevice* dev);

// Fails ("NCCL would hang") unless every rank's device 0 reports the same latency: NCCL adds
// each rank's own figure to its model (graph/search.cc latencyInter) without agreeing it across
// ranks (init.cc agrees bandwidths only), so ranks that differ can choose different protocols
// for one collective.
Status agree_latency(Bootstrap* bs, const NetDevice& dev);

// The rank processes' threads and open fds (/proc/self), gathered over `bs`:
// "threads a..b, fds c..d", the least and the most over the ranks.
Status gather_threads_and_fds(Bootstrap* bs, std::string* out);

// Fails ("NCCL would hang") unless every rank's device 0 declares the same maxRecvs: NCCL's
// proxies decide from their own figure whether to share one connection among senders
// (src/transport/net.cc), and one that shares makes fewer connections than the other awaits.
Status agree_max_recvs(Bootstrap* bs, int max_recvs);

// A communicator id every rank agrees on (rank 0 draws it; like NCCL's commHash).
Status agree_comm_id(Bootstrap* bs, uint64_t* id);

RunInfo describe_run(const Options& o, const LoadedPlugin& p, const NetDevice& d, int nranks);

}  // namespace conflux::driver
