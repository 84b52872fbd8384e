// SPDX-License-Identifier: Apache-2.0
// Version-neutral core of the plugin's ncclNet: what every ABI adapter (abi/net_v*.cc) calls.
//
// Callers: NCCL threads through the adapters — init/finalize/devices/getProperties from
// communicator init, the rest from NCCL's proxy thread. Nothing here blocks except close*,
// which joins that connection's helper threads. Pointers from NCCL are checked (null, magic)
// before use. Results are net::Status with the numeric values of ncclResult_t.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl/nccl_types.h"
#include "net/status.h"

namespace conflux::plugin {

using net::Status;

// Device properties in version-neutral form (a superset of every ABI version's struct).
struct NetProperties {
  char* name = nullptr;
  char* pciPath = nullptr;
  uint64_t guid = 0;
  int ptrSupport = 0;
  int regIsGlobal = 0;
  int forceFlush = 0;
  int speed = 0;
  int port = 0;
  float latency = 0;
  int maxComms = 0;
  int maxRecvs = 0;
  nccl::ncclNetDeviceType netDeviceType = nccl::NCCL_NET_DEVICE_HOST;
  int netDeviceVersion = 0;
  nccl::ncclNetVDeviceProps_t vProps{};
  size_t maxP2pBytes = 0;
  size_t maxCollBytes = 0;
  int maxMultiRequestSize = 0;
  // v12: the NIC's rail and plane, -1 (NCCL_NET_ID_UNDEF) when unknown, as for TCP: NCCL then
  // pairs NICs as it does for every older version (the same NIC in and out of a node unless
  // it may cross NICs; any two NICs may be connected).
  int16_t railId = -1;
  int16_t planeId = -1;
};

// The most parts of one grouped irecv an adapter passes on (NCCL posts at most a device's
// maxRecvs, ours or a delegate's; NCCL's own bound is well below this).
inline constexpr int kMaxGroupedRecvs = 64;

// The plugin's ncclNet name (NCCL matches NCCL_NET=Conflux case-insensitively).
inline constexpr const char* kNetName = "Conflux";

// With a delegate (CONFLUX_NET_DELEGATE, core/net_delegate.h) every function below forwards
// to it; the arguments only a delegate uses (the profiler callback and handles, the device
// handles, connect's traffic class) are ignored by Conflux's own net.

// v11: one context per NCCL communicator; *ctx receives it.
Status netInit(void** ctx, uint64_t commId, int trafficClass, nccl::ncclDebugLogger_t log,
               nccl::ncclProfilerCallback_t prof = nullptr);
Status netFinalize(void* ctx);
// v8..v10: once per process (later calls only refresh the logger); never finalized.
Status netInitLegacy(nccl::ncclDebugLogger_t log, nccl::ncclProfilerCallback_t prof = nullptr);

Status netDevices(int* ndev);
Status netGetProperties(int dev, NetProperties* props);
// Conflux's own TCP net's properties of its device `dev`, delegate or not (CollNet's).
Status tcpNetProperties(int dev, NetProperties* props);

// ctx may be null (v8..v10). `handle` is NCCL's NCCL_NET_HANDLE_MAXSIZE buffer.
Status netListen(void* ctx, int dev, void* handle, void** listenComm);
// Non-blocking: *sendComm stays null until connected; NCCL calls again with the same
// handle buffer, which holds the in-progress state (bytes 64..127).
// `trafficClass`: v10's per-connect config (v11 has it in the context).
Status netConnect(void* ctx, int dev, void* handle, void** sendComm,
                  nccl::ncclNetDeviceHandle_t** devComm = nullptr,
                  int trafficClass = nccl::NCCL_NET_TRAFFIC_CLASS_UNDEF);
Status netAccept(void* listenComm, void** recvComm,
                 nccl::ncclNetDeviceHandle_t** devComm = nullptr);

// Host memory only: NCCL_PTR_CUDA / NCCL_PTR_DMABUF are refused with kInternalError.
Status netRegMr(void* comm, void* data, size_t size, int type, void** mhandle);
Status netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                      void** mhandle);
Status netDeregMr(void* comm, void* mhandle);

Status netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                void** request);
Status netIrecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                void** mhandles, void** phandles, void** request);
Status netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
// sizes may be null; else receives one entry per message (clamped to INT_MAX).
Status netTest(void* request, int* done, int* sizes);

Status netCloseSend(void* sendComm);
Status netCloseRecv(void* recvComm);
Status netCloseListen(void* listenComm);

Status netGetDeviceMr(void* comm, void* mhandle, void** dptrMhandle);
Status netIrecvConsumed(void* recvComm, int n, void* request);

}  // namespace conflux::plugin
