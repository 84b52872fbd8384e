// SPDX-License-Identifier: Apache-2.0
#include "driver/net_compat.h"

#include <dlfcn.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/net_props.h"
#include "nccl/net_v10.h"
#include "nccl/net_v12.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"

namespace conflux::driver {
namespace {

using nccl::ncclResult_t;

// getProperties of an older net or CollNet table, copied into v11's struct.
template <class Props, int V, class Table>
ncclResult_t props_as_v11(const Table* n, int dev, nccl::ncclNetProperties_v11_t* p) {
  Props q{};
  const ncclResult_t r = n->getProperties(dev, &q);
  if (r != nccl::ncclSuccess) return r;
  *p = nccl::ncclNetProperties_v11_t{};
  p->name = q.name;
  p->pciPath = q.pciPath;
  p->guid = q.guid;
  p->ptrSupport = q.ptrSupport;
  p->regIsGlobal = q.regIsGlobal;
  p->speed = q.speed;
  p->port = q.port;
  p->latency = q.latency;
  p->maxComms = q.maxComms;
  p->maxRecvs = q.maxRecvs;
  p->netDeviceType = q.netDeviceType;
  p->netDeviceVersion = q.netDeviceVersion;
  if constexpr (V >= 9) {
    p->forceFlush = q.forceFlush;
    p->vProps = q.vProps;
    p->maxP2pBytes = q.maxP2pBytes;
    p->maxCollBytes = q.maxCollBytes;
  } else {  // v8: no virtual devices nor size limits; int sizes
    p->vProps.ndevs = 1;
    p->vProps.devs[0] = dev;
    p->maxP2pBytes = INT_MAX;
    p->maxCollBytes = INT_MAX;
  }
  p->maxMultiRequestSize = 1;
  return nccl::ncclSuccess;
}

// What the net and CollNet adapters forward alike: the table, devices, properties, listen
// without a context, registration, test, closeListen, and a finalize that does nothing (no
// older version has one).
template <class Table, class Props, int V>
struct Forward {
  static inline const Table* n = nullptr;
  static inline bool inited = false;
  static inline int token = 0;

  static ncclResult_t finalize(void*) { return nccl::ncclSuccess; }
  static ncclResult_t devices(int* ndev) { return n->devices(ndev); }
  static ncclResult_t getProperties(int dev, nccl::ncclNetProperties_v11_t* p) {
    return props_as_v11<Props, V>(n, dev, p);
  }
  static ncclResult_t listen(void*, int dev, void* handle, void** l) {
    return n->listen(dev, handle, l);
  }
  static ncclResult_t regMr(void* c, void* data, size_t size, int type, void** mh) {
    return n->regMr(c, data, size, type, mh);
  }
  static ncclResult_t regMrDmaBuf(void* c, void* data, size_t size, int type, uint64_t off, int fd,
                                  void** mh) {
    return n->regMrDmaBuf(c, data, size, type, off, fd, mh);
  }
  static ncclResult_t deregMr(void* c, void* mh) { return n->deregMr(c, mh); }
  static ncclResult_t test(void* req, int* done, int* sizes) { return n->test(req, done, sizes); }
  static ncclResult_t closeListen(void* l) { return n->closeListen(l); }

  // The members every v11 table of either kind has, from this version's.
  template <class T>
  static void fill(T* t) {
    t->name = n->name;
    t->devices = devices;
    t->getProperties = getProperties;
    t->listen = listen;
    t->regMr = regMr;
    t->regMrDmaBuf = regMrDmaBuf;
    t->deregMr = deregMr;
    t->test = test;
    t->closeListen = closeListen;
    t->makeVDevice = nullptr;  // NCCL then uses physical devices
    t->finalize = finalize;
  }
};

template <class Net, class Props, int V>
struct Adapter : Forward<Net, Props, V> {
  using B = Forward<Net, Props, V>;
  using B::inited;
  using B::n;
  using B::token;

  static ncclResult_t init(void** ctx, uint64_t, nccl::ncclNetCommConfig_v11_t*,
                           nccl::ncclDebugLogger_t log, nccl::ncclProfilerCallback_t prof) {
    *ctx = &token;
    if (inited) return nccl::ncclSuccess;  // vN: once per process
    ncclResult_t r;
    if constexpr (V == 10) {
      r = n->init(log, prof);
    } else {
      (void)prof;
      r = n->init(log);
    }
    inited = r == nccl::ncclSuccess;
    return r;
  }
  static ncclResult_t connect(void*, int dev, void* handle, void** s,
                              nccl::ncclNetDeviceHandle_v11_t** d) {
    if constexpr (V == 10) {
      nccl::ncclNetCommConfig_v10_t cfg{nccl::NCCL_NET_TRAFFIC_CLASS_UNDEF};
      return n->connect(dev, &cfg, handle, s, d);
    } else {
      return n->connect(dev, handle, s, d);
    }
  }
  static ncclResult_t accept(void* l, void** r, nccl::ncclNetDeviceHandle_v11_t** d) {
    return n->accept(l, r, d);
  }
  static ncclResult_t isend(void* s, void* data, size_t size, int tag, void* mh, void* ph,
                            void** req) {
    if constexpr (V == 10) {
      return n->isend(s, data, size, tag, mh, ph, req);
    } else if constexpr (V == 9) {
      return n->isend(s, data, size, tag, mh, req);
    } else {
      if (size > size_t{INT_MAX}) return nccl::ncclInvalidArgument;
      return n->isend(s, data, static_cast<int>(size), tag, mh, req);
    }
  }
  static ncclResult_t irecv(void* r, int cnt, void** data, size_t* sizes, int* tags, void** mhs,
                            void** phs, void** req) {
    if constexpr (V == 10) {
      return n->irecv(r, cnt, data, sizes, tags, mhs, phs, req);
    } else if constexpr (V == 9) {
      return n->irecv(r, cnt, data, sizes, tags, mhs, req);
    } else {
      if (cnt < 0 || cnt > 8) return nccl::ncclInvalidArgument;
      int isz[8];
      for (int i = 0; i < cnt; ++i) {
        if (sizes[i] > size_t{INT_MAX}) return nccl::ncclInvalidArgument;
        isz[i] = static_cast<int>(sizes[i]);
      }
      return n->irecv(r, cnt, data, isz, tags, mhs, req);
    }
  }
  static ncclResult_t iflush(void* r, int cnt, void** data, int* sizes, void** mhs, void** req) {
    return n->iflush(r, cnt, data, sizes, mhs, req);
  }
  static ncclResult_t closeSend(void* c) { return n->closeSend(c); }
  static ncclResult_t closeRecv(void* c) { return n->closeRecv(c); }
  static ncclResult_t getDeviceMr(void* c, void* mh, void** d) { return n->getDeviceMr(c, mh, d); }
  static ncclResult_t irecvConsumed(void* c, int cnt, void* req) {
    return n->irecvConsumed == nullptr ? nccl::ncclSuccess : n->irecvConsumed(c, cnt, req);
  }

  static const nccl::ncclNet_v11_t* table(const void* sym) {
    n = static_cast<const Net*>(sym);
    static nccl::ncclNet_v11_t t{};
    B::fill(&t);
    t.init = init;
    t.connect = connect;
    t.accept = accept;
    t.isend = isend;
    t.irecv = irecv;
    t.iflush = iflush;
    t.closeSend = closeSend;
    t.closeRecv = closeRecv;
    t.getDeviceMr = getDeviceMr;
    t.irecvConsumed = irecvConsumed;
    t.setNetAttr = nullptr;
    return &t;
  }
};

// The CollNet twin: init once per process without a context, listen without one, v8's int
// count and 24-byte SGE with a 32-bit size, no finalize.
template <class Coll, class Props, class Sge, int V>
struct CollAdapter : Forward<Coll, Props, V> {
  using B = Forward<Coll, Props, V>;
  using B::inited;
  using B::n;
  using B::token;

  static ncclResult_t init(void** ctx, uint64_t, nccl::ncclDebugLogger_t log) {
    *ctx = &token;
    if (inited) return nccl::ncclSuccess;
    const ncclResult_t r = n->init(log);
    inited = r == nccl::ncclSuccess;
    return r;
  }
  static ncclResult_t connect(void* handles[], int nranks, int rank, void* l, void** c) {
    return n->connect(handles, nranks, rank, l, c);
  }
  static ncclResult_t reduceSupport(nccl::ncclDataType_t t, nccl::ncclRedOp_t op, int* s) {
    return n->reduceSupport(t, op, s);
  }
  static ncclResult_t iallreduce(void* c, void* s, void* r, size_t count, nccl::ncclDataType_t t,
                                 nccl::ncclRedOp_t op, void* smh, void* rmh, void** req) {
    if constexpr (V == 8) {
      if (count > size_t{INT_MAX}) return nccl::ncclInvalidArgument;
      return n->iallreduce(c, s, r, static_cast<int>(count), t, op, smh, rmh, req);
    } else {
      return n->iallreduce(c, s, r, count, t, op, smh, rmh, req);
    }
  }
  // v11's parts as the older SGE (v8: a 32-bit size).
  static bool to_sge(int cnt, const nccl::ncclNetSGE_v11_t* in, Sge* out) {
    if (cnt < 0 || cnt > kMaxParts) return false;
    for (int i = 0; i < cnt; ++i) {
      if constexpr (V == 8) {
        if (in[i].size > UINT32_MAX) return false;
        out[i] = Sge{in[i].mhandle, in[i].address, static_cast<uint32_t>(in[i].size)};
      } else {
        out[i] = Sge{in[i].mhandle, in[i].address, in[i].size};
      }
    }
    return true;
  }
  static ncclResult_t iallgather(void* c, void* s, int cnt, nccl::ncclNetSGE_v11_t* parts,
                                 size_t per_rank, size_t off, size_t bytes, void* smh, void** req) {
    Sge sge[kMaxParts];
    if (!to_sge(cnt, parts, sge)) return nccl::ncclInvalidArgument;
    return n->iallgather(c, s, cnt, sge, per_rank, off, bytes, smh, req);
  }
  static ncclResult_t ireducescatter(void* c, int cnt, nccl::ncclNetSGE_v11_t* parts, void* r,
                                     size_t per_rank, size_t off, size_t bytes,
                                     nccl::ncclDataType_t t, nccl::ncclRedOp_t op, void* rmh,
                                     void** req) {
    Sge sge[kMaxParts];
    if (!to_sge(cnt, parts, sge)) return nccl::ncclInvalidArgument;
    return n->ireducescatter(c, cnt, sge, r, per_rank, off, bytes, t, op, rmh, req);
  }
  static ncclResult_t iflush(void* c, void* data, int size, void* mh, void** req) {
    return n->iflush(c, data, size, mh, req);
  }
  static ncclResult_t closeColl(void* c) { return n->closeColl(c); }

  static constexpr int kMaxParts = 64;  // SGE parts per call the adapter converts

  static const nccl::ncclCollNet_v11_t* table(const void* sym) {
    n = static_cast<const Coll*>(sym);
    static nccl::ncclCollNet_v11_t t{};
    B::fill(&t);
    t.init = init;
    t.connect = connect;
    t.reduceSupport = reduceSupport;
    t.iallreduce = iallreduce;
    t.iallgather = iallgather;
    t.ireducescatter = ireducescatter;
    t.iflush = iflush;
    t.closeColl = closeColl;
    return &t;
  }
};

// v12 (NCCL 2.30): v11's calls, so its table is v11's but for getProperties, whose struct
// gains railId / planeId and holds up to 8 NICs per virtual device. NCCL writes the ids into
// its topology (a rail: NICs a channel may enter and leave a node by; a plane: NICs never
// connected to another plane's), so the adapter refuses what NCCL could not use: an id below
// -1 (NCCL_NET_ID_UNDEF), a virtual device of more NICs than v11 holds (ours has 1).
template <class Table>
struct V12 {
  static inline const Table* n = nullptr;

  static ncclResult_t getProperties(int dev, nccl::ncclNetProperties_v11_t* p) {
    nccl::ncclNetProperties_v12_t q{};
    const ncclResult_t r = n->getProperties(dev, &q);
    if (r != nccl::ncclSuccess) return r;
    if (q.railId < nccl::NCCL_NET_ID_UNDEF || q.planeId < nccl::NCCL_NET_ID_UNDEF ||
        q.vProps.ndevs < 0 || q.vProps.ndevs > nccl::NCCL_NET_MAX_DEVS_PER_NIC) {
      return nccl::ncclInternalError;
    }
    *p = nccl::ncclNetProperties_v11_t{};
    plugin::copyV9Props(q, p);
    p->maxMultiRequestSize = q.maxMultiRequestSize;
    return nccl::ncclSuccess;
  }

  // Every other member is v11's, field for field.
  template <class V11>
  static const V11* table(const void* sym) {
    n = static_cast<const Table*>(sym);
    static V11 t{};
    t.name = n->name;
    t.init = n->init;
    t.devices = n->devices;
    t.getProperties = getProperties;
    t.listen = n->listen;
    t.connect = n->connect;
    t.regMr = n->regMr;
    t.regMrDmaBuf = n->regMrDmaBuf;
    t.deregMr = n->deregMr;
    t.iflush = n->iflush;
    t.test = n->test;
    t.closeListen = n->closeListen;
    t.makeVDevice = nullptr;  // as for the older versions: NCCL then uses physical devices
    t.finalize = n->finalize;
    if constexpr (std::is_same_v<Table, nccl::ncclNet_v12_t>) {
      t.accept = n->accept;
      t.isend = n->isend;
      t.irecv = n->irecv;
      t.closeSend = n->closeSend;
      t.closeRecv = n->closeRecv;
      t.getDeviceMr = n->getDeviceMr;
      t.irecvConsumed = n->irecvConsumed;
      t.setNetAttr = n->setNetAttr;
    } else {
      t.reduceSupport = n->reduceSupport;
      t.iallreduce = n->iallreduce;
      t.iallgather = n->iallgather;
      t.ireducescatter = n->ireducescatter;
      t.closeColl = n->closeColl;
    }
    return &t;
  }
};

}  // namespace

Status adapt_net(int version, LoadedPlugin* p) {
  if (version == 11) return Status();
  const std::string name = "ncclNetPlugin_v" + std::to_string(version);
  const void* sym = p->lib != nullptr ? dlsym(p->lib, name.c_str()) : nullptr;
  if (sym == nullptr)
    return internal_error("--net-abi " + std::to_string(version) + ": " + p->path + " exports no " +
                          name);
  switch (version) {
    case 8:
      p->net = Adapter<nccl::ncclNet_v8_t, nccl::ncclNetProperties_v8_t, 8>::table(sym);
      break;
    case 9:
      p->net = Adapter<nccl::ncclNet_v9_t, nccl::ncclNetProperties_v9_t, 9>::table(sym);
      break;
    case 10:
      p->net = Adapter<nccl::ncclNet_v10_t, nccl::ncclNetProperties_v10_t, 10>::table(sym);
      break;
    case 12:
      p->net = V12<nccl::ncclNet_v12_t>::table<nccl::ncclNet_v11_t>(sym);
      break;
    default:
      return internal_error("--net-abi: expected 8, 9, 10, 11 or 12");
  }
  p->net_symbol = name + " (through the driver's v11 adapter)";
  p->tuner = nullptr;
  // The CollNet of the same version, if the library has it.
  const std::string cname = "ncclCollNetPlugin_v" + std::to_string(version);
  const void* csym = dlsym(p->lib, cname.c_str());
  p->collnet = nullptr;
  if (csym != nullptr) {
    if (version == 8) {
      p->collnet = CollAdapter<nccl::ncclCollNet_v8_t, nccl::ncclNetProperties_v8_t,
                               nccl::ncclNetSGE_v8_t, 8>::table(csym);
    } else if (version == 9) {
      p->collnet = CollAdapter<nccl::ncclCollNet_v9_t, nccl::ncclNetProperties_v9_t,
                               nccl::ncclNetSGE_v9_t, 9>::table(csym);
    } else if (version == 10) {
      p->collnet = CollAdapter<nccl::ncclCollNet_v10_t, nccl::ncclNetProperties_v10_t,
                               nccl::ncclNetSGE_v10_t, 10>::table(csym);
    } else {
      p->collnet = V12<nccl::ncclCollNet_v12_t>::table<nccl::ncclCollNet_v11_t>(csym);
    }
    p->collnet_symbol = cname + " (through the driver's v11 adapter)";
  }
  return Status();
}

}  // namespace conflux::driver
