// SPDX-License-Identifier: Apache-2.0
// NCCL net/collnet plugin ABI, version 12 (NCCL 2.30 and later): v11's calls unchanged; the
// device properties gain a rail and a plane id, and a virtual device may merge up to 8 NICs.
// The types whose layout did not change are v11's (and so the v11 entry points fit v12's table).
#pragma once

#include "nccl/net_v11.h"

namespace conflux::nccl {

inline constexpr int NCCL_NET_MAX_DEVS_PER_NIC_V12 = 8;

struct ncclNetVDeviceProps_v12_t {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
};

using ncclNetCommConfig_v12_t = ncclNetCommConfig_v11_t;
using ncclNetDeviceHandle_v12_t = ncclNetDeviceHandle_t;
using ncclNetCommAttr_v12_t = ncclNetCommAttr_v11_t;
using ncclNetAttr_v12_t = ncclNetAttr_v11_t;
using ncclNetSGE_v12_t = ncclNetSGE_v11_t;

// railId / planeId when the plugin does not know them. NCCL fills this value in itself for
// every older plugin version.
inline constexpr int16_t NCCL_NET_ID_UNDEF = -1;

struct ncclNetProperties_v12_t {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;   // NICs of one rail: NCCL may enter a node by one and leave by another
  int16_t planeId;  // NICs of different planes are never connected to each other
};

struct ncclNet_v12_t {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                       ncclDebugLogger_t log, ncclProfilerCallback_t prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v12_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v12_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
};

struct ncclCollNet_v12_t {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v12_t* recvParts, size_t bytesPerRank, size_t windowOffset,
                             size_t windowBytes, void* sendMhandle, void** request);
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v12_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                                 void* recvMhandle, void** request);
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  ncclResult_t (*test)(void* request, int* done, int* size);
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
  ncclResult_t (*finalize)(void* ctx);
};

// Layout checks (LP64), verified against NCCL's own declarations (NCCL 2.30).
#if defined(__LP64__)
static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36);
static_assert(sizeof(ncclNetProperties_v12_t) == 128);
static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104);
static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120);
static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124);
static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126);
static_assert(sizeof(ncclNet_v12_t) == 176);
static_assert(sizeof(ncclCollNet_v12_t) == 152);
#endif

}  // namespace conflux::nccl
