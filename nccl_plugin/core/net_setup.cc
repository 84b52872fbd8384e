// SPDX-License-Identifier: Apache-2.0
// Core ncclNet: init/finalize, devices, properties, connection setup and teardown.
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>

#include "core/net_api.h"
#include "core/plugin_state.h"
#include "net/log.h"
#include "net/transport.h"

namespace conflux::plugin {
namespace {

using net::kLogInit;
using net::kLogNet;

// NCCL's handle buffer: bytes [0, 64) the wire handle, [64, 128) connect-in-progress state.
constexpr size_t kScratchOffset = net::wire::kHandleBytes;
constexpr uint64_t kPendingCookie = 0x474e49444e455043;  // marks a live Connector pointer
static_assert(kScratchOffset + 16 <= size_t(nccl::NCCL_NET_HANDLE_MAXSIZE));

net::Connector* pendingConnector(const void* handle) {
  const auto* b = static_cast<const uint8_t*>(handle) + kScratchOffset;
  uint64_t cookie;
  std::memcpy(&cookie, b, sizeof cookie);
  if (cookie != kPendingCookie) return nullptr;
  net::Connector* c;
  std::memcpy(&c, b + 8, sizeof c);
  return c;
}

void setPendingConnector(void* handle, net::Connector* c) {
  auto* b = static_cast<uint8_t*>(handle) + kScratchOffset;
  uint64_t cookie = c ? kPendingCookie : 0;
  std::memcpy(b, &cookie, sizeof cookie);
  std::memcpy(b + 8, &c, sizeof c);
}

// d's context for ours: a v11 context's own, else the process-wide one.
void* delegateContext(const NetDelegate& d, void* ctx) {
  return d.contextFor(ctx != nullptr ? static_cast<NetContext*>(ctx)->delegateCtx : nullptr);
}

PluginState* stateOrWarn(const char* fn) {
  PluginState* s = PluginState::get();
  if (s == nullptr) CFX_WARN(kLogNet, "%s called before init (or after the last finalize)", fn);
  return s;
}

}  // namespace

Status netInit(void** ctx, uint64_t commId, int trafficClass, nccl::ncclDebugLogger_t log,
               nccl::ncclProfilerCallback_t prof) {
  CFX_RETURN_IF_ERROR(openContext(ctx, NetContext::kMagic, commId, trafficClass, log));
  PluginState* s = PluginState::get();
  NetDelegate* d = s->delegate();
  if (d == nullptr) return Status::kOk;
  auto* c = static_cast<NetContext*>(*ctx);
  const Status st = d->initContext(&c->delegateCtx, commId, trafficClass, log, prof);
  if (st == Status::kOk) {
    s->noteDelegateServes();
    return Status::kOk;
  }
  if (s->fallBackFromDelegate(st)) return Status::kOk;
  closeContext(*ctx, NetContext::kMagic, "init", kLogNet);
  *ctx = nullptr;
  return st;
}

Status netFinalize(void* ctx) {
  auto* c = static_cast<NetContext*>(ctx);
  PluginState* s = PluginState::get();
  if (c != nullptr && c->magic == NetContext::kMagic && s != nullptr && s->delegate() != nullptr) {
    s->delegate()->finalizeContext(c->delegateCtx);
  }
  return closeContext(ctx, NetContext::kMagic, "finalize", kLogNet);
}

Status netInitLegacy(nccl::ncclDebugLogger_t log, nccl::ncclProfilerCallback_t prof) {
  static std::mutex mu;
  static bool held = false;  // the permanent reference of the v8..v10 ABIs
  installNcclLogger(log);
  std::lock_guard<std::mutex> lock(mu);
  if (held) return Status::kOk;
  CFX_RETURN_IF_ERROR(PluginState::acquire(log));
  PluginState* s = PluginState::get();
  if (NetDelegate* d = s->delegate()) {
    const Status st = d->initProcess(log, prof);
    if (st == Status::kOk) {
      s->noteDelegateServes();
    } else if (!s->fallBackFromDelegate(st)) {
      PluginState::release();
      return st;
    }
  }
  held = true;
  return Status::kOk;
}

Status netDevices(int* ndev) {
  PluginState* s = stateOrWarn("devices");
  if (s == nullptr || ndev == nullptr) return Status::kInvalidUsage;
  if (NetDelegate* d = s->delegate()) return d->devices(ndev);
  *ndev = s->transport().numDevices();
  return Status::kOk;
}

Status netGetProperties(int dev, NetProperties* p) {
  PluginState* s = stateOrWarn("getProperties");
  if (s == nullptr || p == nullptr) return Status::kInvalidUsage;
  if (NetDelegate* d = s->delegate()) return d->getProperties(dev, p);
  return tcpNetProperties(dev, p);
}

Status tcpNetProperties(int dev, NetProperties* p) {
  PluginState* s = stateOrWarn("getProperties");
  if (s == nullptr || p == nullptr) return Status::kInvalidUsage;
  if (!s->transport().validDevice(dev)) {
    CFX_WARN(kLogNet, "getProperties: no device %d", dev);
    return Status::kInvalidArgument;
  }
  const net::NetDevice& d = s->transport().device(dev);
  *p = NetProperties{};
  p->name = const_cast<char*>(d.name.c_str());
  p->pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
  p->guid = uint64_t(dev);
  p->ptrSupport = nccl::NCCL_PTR_HOST;
  p->speed = d.speedMbps;
  p->latency = s->latencyUs();
  p->maxComms = 65536;
  p->maxRecvs = s->maxRecvs();  // at most net::kMaxRecvs (the parameter's range)
  p->netDeviceType = nccl::NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = nccl::NCCL_NET_DEVICE_INVALID_VERSION;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = nccl::NCCL_MAX_NET_SIZE_BYTES;
  p->maxCollBytes = nccl::NCCL_MAX_NET_SIZE_BYTES;
  p->maxMultiRequestSize = 1;
  return Status::kOk;
}

Status netListen(void* ctx, int dev, void* handle, void** listenComm) {
  PluginState* s = stateOrWarn("listen");
  if (s == nullptr || handle == nullptr || listenComm == nullptr) return Status::kInvalidUsage;
  if (NetDelegate* d = s->delegate())
    return d->listen(delegateContext(*d, ctx), dev, handle, listenComm);
  *listenComm = nullptr;
  std::memset(handle, 0, nccl::NCCL_NET_HANDLE_MAXSIZE);
  net::ConnectHandle h;
  std::unique_ptr<net::ListenComm> l;
  CFX_RETURN_IF_ERROR(s->transport().listen(dev, &h, &l));
  std::memcpy(handle, h.bytes, sizeof h.bytes);
  *listenComm = l.release();
  return Status::kOk;
}

Status netConnect(void* ctx, int dev, void* handle, void** sendComm,
                  nccl::ncclNetDeviceHandle_t** devComm, int trafficClass) {
  PluginState* s = stateOrWarn("connect");
  if (s == nullptr || handle == nullptr || sendComm == nullptr) return Status::kInvalidUsage;
  if (NetDelegate* d = s->delegate()) {
    if (ctx != nullptr) trafficClass = static_cast<NetContext*>(ctx)->trafficClass;
    return d->connect(delegateContext(*d, ctx), dev, trafficClass, handle, sendComm, devComm);
  }
  *sendComm = nullptr;
  net::Connector* c = pendingConnector(handle);
  if (c == nullptr) {
    net::ConnectHandle h;
    std::memcpy(h.bytes, handle, sizeof h.bytes);
    std::unique_ptr<net::Connector> fresh;
    CFX_RETURN_IF_ERROR(s->transport().startConnect(dev, h, &fresh));
    c = fresh.release();
    setPendingConnector(handle, c);
  }
  std::unique_ptr<net::SendComm> comm;
  Status st = c->poll(&comm);
  if (st != Status::kOk || comm) {  // finished, one way or the other
    setPendingConnector(handle, nullptr);
    delete c;
  }
  if (comm) {
    s->addComm(comm.get());
    *sendComm = comm.release();
  }
  return st;
}

Status netAccept(void* listenComm, void** recvComm, nccl::ncclNetDeviceHandle_t** devComm) {
  PluginState* s = stateOrWarn("accept");
  if (s != nullptr) {
    if (NetDelegate* d = s->delegate()) return d->accept(listenComm, recvComm, devComm);
  }
  auto* l = static_cast<net::ListenComm*>(listenComm);
  if (s == nullptr || l == nullptr || !l->valid() || recvComm == nullptr) {
    return Status::kInvalidUsage;
  }
  *recvComm = nullptr;
  std::unique_ptr<net::RecvComm> comm;
  CFX_RETURN_IF_ERROR(l->accept(&comm));
  if (comm) {
    s->addComm(comm.get());
    *recvComm = comm.release();
  }
  return Status::kOk;
}

namespace {
template <typename T>
Status closeComm(void* p, const char* fn) {
  auto* c = static_cast<T*>(p);
  if (c == nullptr || !c->valid() || c->isSend() != std::is_same_v<T, net::SendComm>) {
    CFX_WARN(kLogNet, "%s called with an invalid comm", fn);
    return Status::kInvalidArgument;
  }
  if (PluginState* s = PluginState::get()) s->removeComm(c);
  delete c;  // stops and joins the comm's helper threads
  return Status::kOk;
}
}  // namespace

Status netCloseSend(void* sendComm) {
  if (NetDelegate* d = activeDelegate()) return d->closeSend(sendComm);
  return closeComm<net::SendComm>(sendComm, "closeSend");
}
Status netCloseRecv(void* recvComm) {
  if (NetDelegate* d = activeDelegate()) return d->closeRecv(recvComm);
  return closeComm<net::RecvComm>(recvComm, "closeRecv");
}

Status netCloseListen(void* listenComm) {
  if (NetDelegate* d = activeDelegate()) return d->closeListen(listenComm);
  auto* l = static_cast<net::ListenComm*>(listenComm);
  if (l == nullptr || !l->valid()) {
    CFX_WARN(kLogNet, "closeListen called with an invalid comm");
    return Status::kInvalidArgument;
  }
  delete l;
  return Status::kOk;
}

}  // namespace conflux::plugin
