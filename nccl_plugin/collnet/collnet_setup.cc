// SPDX-License-Identifier: Apache-2.0
// CollNet setup: contexts, devices, listen, and the collective connect, which runs its phases
// in order: rendezvous (connect_ring.h), measure (connect_measure.h), join (connect_join.h),
// agree (connect_agree.h) and model (connect_model.h).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collnet/coll_comm.h"
#include "collnet/collnet_api.h"
#include "collnet/connect_agree.h"
#include "collnet/connect_join.h"
#include "collnet/connect_measure.h"
#include "collnet/connect_model.h"
#include "collnet/connect_ring.h"
#include "collnet/path_model.h"
#include "core/plugin_state.h"
#include "net/log.h"
#include "net/transport.h"

namespace conflux::plugin {
namespace {

using connect::CollHandle;
using connect::CollListen;
using connect::kHandleMagic;
using net::kLogColl;

}  // namespace

Status collInit(void** ctx, uint64_t commId, nccl::ncclDebugLogger_t log) {
  return openContext(ctx, NetContext::kCollMagic, commId, nccl::NCCL_NET_TRAFFIC_CLASS_UNDEF, log);
}

Status collFinalize(void* ctx) {
  return closeContext(ctx, NetContext::kCollMagic, "CollNet finalize", kLogColl);
}

Status collInitLegacy(nccl::ncclDebugLogger_t log) { return netInitLegacy(log); }

// CollNet's devices. Without a delegate net they are the net's (Conflux's TCP devices). With one
// (CONFLUX_NET_DELEGATE) they are the delegate's, one for one, because NCCL's topology
// (graph/topo.cc, ncclTopoPopulateNics; NCCL 2.28 and 2.30) describes CollNet's devices first
// and the net's after, merging a net device into the CollNet device of the same *name*, keeping
// the first description's speed, latency, port, guid and gdr, and taking the net's index: a
// CollNet device named otherwise would be a NIC of its own, which NCCL 2.30 leaves out of the
// CollNet graph (CollNet then finds no channel and is disabled) and 2.28 may confuse with the
// net device of the same index. CollNet's getProperties is the net's (abi/adapter_util.h), so
// the merged NIC keeps the delegate's gdr and CollNet stages whatever device memory that brings
// (collnet/staging.h). CollNet's own traffic leaves by the TCP device with the delegate device's
// PCI path (the same NIC), else by TCP device 0.
namespace {

// The TCP device on the NIC with PCI path `pciPath` (the same NIC as a delegate device), else 0.
int tcpDeviceAt(const PluginState& s, const char* pciPath) {
  if (pciPath == nullptr || pciPath[0] == '\0') return 0;
  for (int i = 0; i < s.transport().numDevices(); ++i) {
    if (s.transport().device(i).pciPath == pciPath) return i;
  }
  return 0;
}

}  // namespace

Status collDevices(int* ndev) {
  if (NetDelegate* d = activeDelegate()) return d->devices(ndev);
  return netDevices(ndev);
}

int collTransportDevice(int dev) {
  PluginState* s = PluginState::get();
  NetDelegate* d = s != nullptr ? s->delegate() : nullptr;
  if (d == nullptr) return dev;
  NetProperties theirs;
  return d->getProperties(dev, &theirs) == Status::kOk ? tcpDeviceAt(*s, theirs.pciPath) : 0;
}

Status collListen(void* ctx, int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return Status::kInvalidArgument;
  *listenComm = nullptr;
  PluginState* s = PluginState::get();
  if (s == nullptr) {
    CFX_WARN(kLogColl, "CollNet listen called before init");
    return Status::kInvalidUsage;
  }
  const int tcpDev = collTransportDevice(dev);
  if (!s->transport().validDevice(tcpDev)) {
    CFX_WARN(kLogColl, "CollNet listen: no device %d", dev);
    return Status::kInvalidArgument;
  }
  auto l = std::make_unique<CollListen>();
  l->dev = tcpDev;
  const auto* context = static_cast<const NetContext*>(ctx);
  if (context != nullptr && context->magic == NetContext::kCollMagic) {
    l->comm_id = context->commId;
  }
  net::ConnectHandle ring{};
  CFX_RETURN_IF_ERROR(s->transport().listen(tcpDev, &ring, &l->ring));
  CollHandle h{kHandleMagic, 1, {}};
  std::memcpy(h.ring, ring.bytes, sizeof h.ring);
  std::memset(handle, 0, nccl::NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *listenComm = l.release();
  return Status::kOk;
}

Status collConnect(void* const* handles, int nranks, int rank, void* listenComm, void** collComm) {
  if (handles == nullptr || collComm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) {
    return Status::kInvalidArgument;
  }
  *collComm = nullptr;
  auto* l = static_cast<CollListen*>(listenComm);
  PluginState* s = PluginState::get();
  if (l == nullptr || l->magic != CollListen::kMagic || s == nullptr) {
    CFX_WARN(kLogColl, "CollNet connect: invalid listen comm or plugin not initialised");
    return Status::kInvalidArgument;
  }
  Config cfg = s->config();  // its aggregator list resolved below
  const auto timeout = std::chrono::milliseconds(cfg.joinTimeoutMs);

  // 1. Rendezvous: the rings, the job's key, who shares each aggregator (connect_ring.h).
  connect::Rendezvous rv;
  CFX_RETURN_IF_ERROR(connect::rendezvous(*s, *l, handles, rank, nranks, timeout, &rv));
  cfg.aggregators = rv.aggregators;
  cfg.stripeWeights = rv.stripe_weights;
  // 2. Measure the ring: one hop, and (unless CONFLUX_LINK_MBPS, which wins over any measure)
  //    what the link to rank+1 delivers (connect_measure.h).
  const double hop_us =
      connect::measure_hop_us(rv.next.get(), rv.prev.get(), rank, nranks, timeout);
  const double link_mbps =
      cfg.linkMbps > 0 ? 0
                       : connect::measure_link_mbps(rv.next.get(), rv.prev.get(), nranks, timeout);
  // 3. Join the aggregators every rank can join (connect_join.h).
  std::unique_ptr<client::Engine> engine;
  const conflux::Status joined = connect::join(cfg, rv, rank, nranks, timeout, &engine);
  // 4. Agree: all go on through the aggregators, or all decline; the options (connect_agree.h).
  connect::Verdict mine =
      connect::local_verdict(cfg, l->dev, rank, nranks, engine.get(), joined, link_mbps);
  mine.hop_us = hop_us;
  std::vector<connect::Verdict> all;
  CFX_RETURN_IF_ERROR(connect::agree_verdicts(cfg, rv.next.get(), rv.prev.get(), rank, nranks, mine,
                                              timeout, &all));
  const collnet::CollOptions opts =
      connect::comm_options(cfg, all, rv.key, nranks, rank, rv.tree, *engine);
  if (rank == 0) connect::log_connected(all, opts, *engine, nranks);
  // 5. The communicator, and its first AllReduces: timed, checked and agreed.
  const size_t naggregators = engine->aggregators().size();
  connect::ProbeBuffers probe;  // before comm: see ProbeBuffers
  auto comm = std::make_unique<collnet::CollComm>(rank, nranks, std::move(rv.rings),
                                                  std::move(engine), opts);
  connect::ProbeTimes times;
  if (nranks > 1) {
    CFX_RETURN_IF_ERROR(
        connect::agree_on_probes(cfg, *comm, rv, rank, nranks, timeout, probe, &times));
  }
  // 6. The tuner's model (connect_model.h), published under NCCL's commId.
  const collnet::PathModel model =
      connect::tuner_model(all, opts, nranks, rank, times, naggregators, *comm);
  if (l->comm_id.has_value()) collnet::publish_model(*l->comm_id, comm.get(), model);
  *collComm = comm.release();
  return Status::kOk;
}

Status collCloseColl(void* collComm) {
  auto* c = static_cast<collnet::CollComm*>(collComm);
  if (c == nullptr || !c->valid()) return Status::kInvalidArgument;
  collnet::withdraw_model(c);
  delete c;
  return Status::kOk;
}

Status collCloseListen(void* listenComm) {
  auto* l = static_cast<CollListen*>(listenComm);
  if (l == nullptr || l->magic != CollListen::kMagic) return Status::kInvalidArgument;
  l->magic = 0;
  delete l;
  return Status::kOk;
}

}  // namespace conflux::plugin
