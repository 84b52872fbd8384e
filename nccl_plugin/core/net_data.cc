// SPDX-License-Identifier: Apache-2.0
// Core ncclNet: memory registration and the data path (isend/irecv/test/flush).
#include <climits>

#include "core/net_api.h"
#include "core/plugin_state.h"
#include "net/log.h"
#include "net/transport.h"

namespace conflux::plugin {
namespace {

using net::kLogNet;

// What regMr hands back: host memory needs no registration, the handle only records the range.
struct MemHandle {
  static constexpr uint32_t kMagic = 0x4d454d48;
  uint32_t magic = kMagic;
  void* base = nullptr;
  size_t size = 0;
};

template <typename T>
T* commAs(void* p, bool wantSend, const char* fn) {
  auto* c = static_cast<net::CommCore*>(p);
  if (c == nullptr || !c->valid() || c->isSend() != wantSend) {
    CFX_WARN(kLogNet, "%s called with an invalid comm %p", fn, p);
    return nullptr;
  }
  return static_cast<T*>(c);
}

}  // namespace

Status netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (NetDelegate* d = activeDelegate()) return d->regMr(comm, data, size, type, mhandle);
  if (mhandle == nullptr) return Status::kInvalidArgument;
  *mhandle = nullptr;
  if (type != nccl::NCCL_PTR_HOST) {
    CFX_WARN(kLogNet, "regMr: memory type %d refused (only host memory, NCCL_PTR_HOST)", type);
    return Status::kInternalError;
  }
  *mhandle = new MemHandle{MemHandle::kMagic, data, size};
  return Status::kOk;
}

Status netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                      void** mhandle) {
  if (NetDelegate* d = activeDelegate()) {
    return d->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  }
  if (mhandle != nullptr) *mhandle = nullptr;
  CFX_WARN(kLogNet, "regMrDmaBuf refused: Conflux supports host memory only");
  return Status::kInternalError;
}

Status netDeregMr(void* comm, void* mhandle) {
  if (NetDelegate* d = activeDelegate()) return d->deregMr(comm, mhandle);
  auto* m = static_cast<MemHandle*>(mhandle);
  if (m == nullptr) return Status::kOk;
  if (m->magic != MemHandle::kMagic) {
    CFX_WARN(kLogNet, "deregMr called with an invalid handle");
    return Status::kInvalidArgument;
  }
  m->magic = 0;
  delete m;
  return Status::kOk;
}

Status netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                void** request) {
  if (NetDelegate* d = activeDelegate()) {
    return d->isend(sendComm, data, size, tag, mhandle, phandle, request);
  }
  auto* c = commAs<net::SendComm>(sendComm, true, "isend");
  if (c == nullptr || request == nullptr) return Status::kInvalidArgument;
  net::Request* r = nullptr;
  Status st = c->isend(data, size, tag, &r);
  if (st != Status::kOk) c->warnFailure();
  *request = r;
  return st;
}

Status netIrecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                void** mhandles, void** phandles, void** request) {
  if (NetDelegate* d = activeDelegate()) {
    return d->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  }
  auto* c = commAs<net::RecvComm>(recvComm, false, "irecv");
  if (c == nullptr || request == nullptr) return Status::kInvalidArgument;
  // More parts than getProperties declared: NCCL never groups more, so this is a caller's bug.
  const PluginState* s = PluginState::get();
  if (s != nullptr && n > s->maxRecvs()) {
    CFX_WARN(kLogNet, "irecv of %d messages refused: maxRecvs is %d (CONFLUX_NET_MAX_RECVS)", n,
             s->maxRecvs());
    return Status::kInvalidArgument;
  }
  // NCCL may preset *request to NCCL_NET_OPTIONAL_RECV_COMPLETION: we always complete.
  net::Request* r = nullptr;
  Status st = c->irecv(n, data, sizes, tags, &r);
  if (st != Status::kOk) c->warnFailure();
  *request = r;
  return st;
}

Status netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  if (NetDelegate* d = activeDelegate())
    return d->iflush(recvComm, n, data, sizes, mhandles, request);
  if (request != nullptr) *request = nullptr;  // host memory: nothing to flush
  return Status::kOk;
}

Status netTest(void* request, int* done, int* sizes) {
  if (NetDelegate* d = activeDelegate()) return d->test(request, done, sizes);
  if (done == nullptr) return Status::kInvalidArgument;
  *done = 0;
  size_t got[net::kMaxRecvs] = {};
  auto* r = static_cast<net::Request*>(request);
  int n = r != nullptr ? r->n : 0;  // read before test() may release the request
  net::CommCore* comm = r != nullptr && r->comm != nullptr && r->comm->valid() ? r->comm : nullptr;
  bool finished = false;
  Status st = net::test(r, &finished, got);
  if (st != Status::kOk) {
    if (comm != nullptr) comm->warnFailure();
    return st;
  }
  if (finished) {
    *done = 1;
    for (int i = 0; sizes != nullptr && i < n; ++i) {
      sizes[i] = got[i] > size_t(INT_MAX) ? INT_MAX : int(got[i]);
    }
  }
  return Status::kOk;
}

Status netGetDeviceMr(void* comm, void* mhandle, void** dptrMhandle) {
  if (NetDelegate* d = activeDelegate()) return d->getDeviceMr(comm, mhandle, dptrMhandle);
  if (dptrMhandle != nullptr) *dptrMhandle = nullptr;  // no device-side networking
  return Status::kOk;
}

Status netIrecvConsumed(void* recvComm, int n, void* request) {
  if (NetDelegate* d = activeDelegate()) return d->irecvConsumed(recvComm, n, request);
  return Status::kOk;
}

}  // namespace conflux::plugin
