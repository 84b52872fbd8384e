// SPDX-License-Identifier: Apache-2.0
// Version-neutral core of the plugin's ncclCollNet: what every CollNet ABI adapter
// (abi/collnet_v*.cc) calls. Same conventions as core/net_api.h: pointers from NCCL are
// checked, results are net::Status with ncclResult_t's numeric values.
//
// Callers: NCCL's init path (init, devices, getProperties, listen, connect, reduceSupport,
// regMr) and its proxy thread (iallreduce, iallgather, ireducescatter, test, deregMr, close*).
// connect() blocks (it is collective); iallreduce/test never block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/net_api.h"
#include "nccl/nccl_types.h"

namespace conflux::plugin {

// v11: per-communicator context. v8..v10: collInitLegacy once per process.
Status collInit(void** ctx, uint64_t commId, nccl::ncclDebugLogger_t log);
Status collFinalize(void* ctx);
Status collInitLegacy(nccl::ncclDebugLogger_t log);

// CollNet devices mirror the net devices (same index, same name): the exported CollNet
// getProperties of every ABI version is the net's (abi/adapter_util.h getPropsAs), the
// delegate's with CONFLUX_NET_DELEGATE, ptrSupport included, so that NCCL's merge of the two
// descriptions of one NIC keeps the net's GPUDirect (shared/reference: nccl-gdr.md).
Status collDevices(int* ndev);
// The TCP device (of Conflux's own net) that CollNet device `dev` uses for its worker ring.
int collTransportDevice(int dev);

// Listens for the worker ring; the handle carries the ring's connection handle.
Status collListen(void* ctx, int dev, void* handle, void** listenComm);
// Collective over every rank: builds the worker ring, joins the aggregators named by
// CONFLUX_AGGREGATORS, and agrees over the ring. If any rank cannot use the aggregators,
// every rank declines (returns an error, so NCCL uses its own algorithms).
Status collConnect(void* const* handles, int nranks, int rank, void* listenComm, void** collComm);
Status collReduceSupport(int dtype, int op, int* supported);

// Host and CUDA memory (NCCL_PTR_CUDA, or a DMA-BUF region at its device address): device
// memory is staged through the communicator's pinned slots (collnet/staging.h); the CUDA
// driver is loaded at the first such registration, which fails with one log line when it
// cannot be (no libcuda, no device, not device memory).
Status collRegMr(void* collComm, void* data, size_t size, int type, void** mhandle);
Status collRegMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                       void** mhandle);
Status collDeregMr(void* collComm, void* mhandle);

// One piece of NCCL's scatter/gather list (ncclNetSGE_*; the memory handle is not needed).
struct CollSge {
  void* address = nullptr;
  size_t size = 0;
};
inline constexpr int kMaxCollParts = 64;

// CollNetDirect collectives on the window [windowOffset, windowOffset + windowBytes) of the
// nranks * bytesPerRank buffer (rank k owns [k, k + 1) * bytesPerRank). The parts' sizes
// must add up to windowBytes. AllGather: sendData holds this rank's bytes of the window.
// ReduceScatter: recvData gets the reduced bytes of the window that this rank owns.
Status collIallgather(void* collComm, void* sendData, int nRecvParts, const CollSge* recvParts,
                      size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void** request);
Status collIreducescatter(void* collComm, int nSendParts, const CollSge* sendParts, void* recvData,
                          size_t bytesPerRank, size_t windowOffset, size_t windowBytes, int dtype,
                          int op, void** request);

Status collIallreduce(void* collComm, void* sendData, void* recvData, size_t count, int dtype,
                      int op, void* sendMhandle, void* recvMhandle, void** request);
// Nothing to flush: a request is done only once its results are in place, device memory
// included. *request = nullptr (NCCL treats that as complete).
Status collIflush(void* collComm, void* data, int size, void* mhandle, void** request);
// size may be null (flushes).
Status collTest(void* request, int* done, int* size);
Status collCloseColl(void* collComm);
Status collCloseListen(void* listenComm);

}  // namespace conflux::plugin
