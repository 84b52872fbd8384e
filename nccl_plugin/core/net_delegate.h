// SPDX-License-Identifier: Apache-2.0
// NetDelegate: another NCCL net plugin (CONFLUX_NET_DELEGATE, e.g. aws-ofi-nccl or a vendor's
// IB/RoCE plugin) that carries every point-to-point byte while CollNet stays Conflux's.
//
// NCCL takes the net and the CollNet from one library, so without this a job that loads Conflux
// for its CollNet would also move its rings, trees, alltoall and pipeline sends over Conflux's
// TCP net. With a delegate, each function of the core ncclNet (core/net_api.h) forwards to the
// delegate as its first step (core/net_setup.cc, core/net_data.cc): NCCL sees the delegate's
// devices, names, PCI paths, speeds, ptrSupport and maxRecvs unchanged, and every handle it gets
// back (listen/send/recv comms, memory handles, requests) is the delegate's own. CollNet never
// goes through it: the aggregators' UDP (client/) and the worker ring's TCP (net/ directly) are
// connections of their own.
//
// Versions: the newest of ncclNetPlugin_v11 .. _v8 the library exports, whatever version NCCL
// loaded from us. Calls are converted field by field (sizes int <-> size_t where v8 has int,
// the comm config of v10's connect, v11's contexts). The profiler handles and callback and the
// device handles (connect/accept) pass through; makeVDevice and setNetAttr are not offered
// (NCCL then uses the physical devices and sends no traffic hints).
//
// Threads: as NCCL's (the delegate's own rules apply); init/finalize are serialised here.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "conflux/common/status.h"
#include "core/net_api.h"
#include "nccl/nccl_types.h"

namespace conflux::plugin {

class NetDelegate {
 public:
  // dlopen()s `lib` (a path, or a name the loader resolves as NCCL would) and takes the newest
  // ncclNetPlugin_vN (v11..v8) it exports, into *out. invalid_argument (naming the library and
  // the cause) when it cannot be loaded or exports no version we know.
  static conflux::Status load(const std::string& lib, std::unique_ptr<NetDelegate>* out);
  virtual ~NetDelegate();  // dlclose()
  NetDelegate(const NetDelegate&) = delete;
  NetDelegate& operator=(const NetDelegate&) = delete;

  const std::string& library() const { return lib_; }
  int version() const { return version_; }
  const char* name() const { return name_ != nullptr ? name_ : "?"; }

  // A context for one NCCL communicator (our v11 init): a v11 delegate gets an init of its own
  // (*ctx: its context); an older one is initialised once per process (*ctx = nullptr).
  Status initContext(void** ctx, uint64_t commId, int trafficClass, nccl::ncclDebugLogger_t log,
                     nccl::ncclProfilerCallback_t prof);
  Status finalizeContext(void* ctx);
  // Our v8..v10 init (once per process, no context): the delegate is initialised once; a v11
  // delegate gets one process-wide context, finalised when this object goes.
  Status initProcess(nccl::ncclDebugLogger_t log, nccl::ncclProfilerCallback_t prof);
  // The delegate's context for our context `ctx` (null: the process-wide one).
  void* contextFor(void* delegateCtx) const {
    return delegateCtx != nullptr ? delegateCtx : processCtx_;
  }

  virtual Status devices(int* ndev) = 0;
  virtual Status getProperties(int dev, NetProperties* props) = 0;
  virtual Status listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  virtual Status connect(void* ctx, int dev, int trafficClass, void* handle, void** sendComm,
                         nccl::ncclNetDeviceHandle_t** devComm) = 0;
  virtual Status accept(void* listenComm, void** recvComm,
                        nccl::ncclNetDeviceHandle_t** devComm) = 0;
  virtual Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual Status regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                             void** mhandle) = 0;
  virtual Status deregMr(void* comm, void* mhandle) = 0;
  virtual Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                       void* phandle, void** request) = 0;
  virtual Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                       void** mhandles, void** phandles, void** request) = 0;
  virtual Status iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                        void** request) = 0;
  virtual Status test(void* request, int* done, int* sizes) = 0;
  virtual Status closeSend(void* sendComm) = 0;
  virtual Status closeRecv(void* recvComm) = 0;
  virtual Status closeListen(void* listenComm) = 0;
  virtual Status getDeviceMr(void* comm, void* mhandle, void** dptrMhandle) = 0;
  virtual Status irecvConsumed(void* recvComm, int n, void* request) = 0;

 protected:
  NetDelegate(void* dl, std::string lib, int version, const char* name);

  // The delegate's own init: v11 per context (ctx non-null), older ones once per process.
  virtual Status callInit(void** ctx, uint64_t commId, int trafficClass,
                          nccl::ncclDebugLogger_t log, nccl::ncclProfilerCallback_t prof) = 0;
  virtual Status callFinalize(void* ctx) = 0;
  virtual bool perContext() const = 0;  // v11: init/finalize per context
  // The process-wide context's finalize (each version's destructor: it calls callFinalize).
  void finalizeProcess();

 private:
  void* dl_;
  const std::string lib_;
  const int version_;
  const char* name_;
  std::mutex initMu_;
  bool processInit_ = false;    // initMu_: the once-per-process init ran
  void* processCtx_ = nullptr;  // a v11 delegate's context for our v8..v10 ABIs
};

}  // namespace conflux::plugin
