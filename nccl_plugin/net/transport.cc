// SPDX-License-Identifier: Apache-2.0
#include "net/transport.h"

#include <thread>

#include "net/log.h"
#include "net/progress.h"

namespace conflux::net {

Status validateConfig(const TransportConfig& c, std::string* why) {
  if (c.nthreads < 0 || c.nthreads > 16) {
    *why = "nthreads must be 0 (auto) .. 16";
  } else if (c.nsocksPerThread < 0 || c.nsocksPerThread > 16) {
    *why = "nsocksPerThread must be 0 (auto) .. 16";
  } else if (c.nthreads * c.nsocksPerThread > wire::kMaxDataSockets) {
    *why = "nthreads x nsocksPerThread must be at most 64";
  } else if (c.minChunkBytes < 4096 || c.minChunkBytes > (size_t{1} << 30)) {
    *why = "minChunkBytes must be 4096 .. 1 GiB";
  } else if (c.inlineBytes > kMaxInlineBytes) {
    *why = "inlineBytes must be at most 512 KiB";
  } else if (c.socketBufBytes < 0) {
    *why = "socketBufBytes must be >= 0";
  } else if (c.progressThreads < 1 || c.progressThreads > ProgressEngine::kMaxThreads) {
    *why = "progressThreads must be 1 .. 64";
  } else {
    return Status::kOk;
  }
  return Status::kInvalidArgument;
}

Status TcpTransport::create(const TransportConfig& config, std::unique_ptr<TcpTransport>* out) {
  std::string why;
  if (validateConfig(config, &why) != Status::kOk) {
    CFX_WARN(kLogInit | kLogNet, "invalid transport settings: %s", why.c_str());
    return Status::kInvalidArgument;
  }
  auto t = std::make_unique<TcpTransport>();
  t->config_ = config;
  for (const NetInterface& itf : selectInterfaces(listInterfaces(), config.ifname)) {
    t->devices_.push_back(describeInterface(itf));
  }
  if (t->devices_.empty()) {
    CFX_WARN(kLogInit | kLogNet, "no usable network interface (interface selection '%s')",
             config.ifname.c_str());
    return Status::kSystemError;
  }
  for (int i = 0; i < t->numDevices(); ++i) {
    const NetDevice& d = t->devices_[i];
    CFX_INFO(kLogInit | kLogNet, "device %d: %s %s, %d Mbps%s", i, d.name.c_str(),
             d.addr.host().c_str(), d.speedMbps, d.pciPath.empty() ? "" : ", PCI");
  }
  *out = std::move(t);
  return Status::kOk;
}

CommOptions TcpTransport::optionsFor(int dev) const {
  CommOptions o;
  bool lo = validDevice(dev) && devices_[dev].loopback;
  o.nthreads = config_.nthreads > 0 ? config_.nthreads : (lo ? 1 : 2);
  o.nsocksPerThread = config_.nsocksPerThread > 0 ? config_.nsocksPerThread : 2;
  if (o.nthreads * o.nsocksPerThread > wire::kMaxDataSockets) {
    o.nsocksPerThread = wire::kMaxDataSockets / o.nthreads;
  }
  o.minChunkBytes = config_.minChunkBytes;
  o.inlineBytes = config_.inlineBytes;
  o.socketBufBytes = config_.socketBufBytes;
  o.callerProgress = config_.callerProgress;
  o.stallWarnMs = config_.stallWarnMs;
  o.progressThreads = config_.progressThreads;
  return o;
}

Status TcpTransport::listen(int dev, ConnectHandle* handle,
                            std::unique_ptr<ListenComm>* out) const {
  if (!validDevice(dev)) return Status::kInvalidArgument;
  return ListenComm::create(devices_[dev].addr, optionsFor(dev), handle->bytes, out);
}

Status TcpTransport::startConnect(int dev, const ConnectHandle& handle,
                                  std::unique_ptr<Connector>* out) const {
  if (!validDevice(dev)) return Status::kInvalidArgument;
  wire::Handle h;
  if (!wire::decodeHandle(handle.bytes, &h)) {
    CFX_WARN(kLogNet, "connect: the handle is not a Conflux connection handle");
    return Status::kInvalidArgument;
  }
  return Connector::start(h, optionsFor(dev), out);
}

Status TcpTransport::connectBlocking(int dev, const ConnectHandle& handle,
                                     std::chrono::milliseconds timeout,
                                     std::unique_ptr<SendComm>* out) const {
  std::unique_ptr<Connector> c;
  CFX_RETURN_IF_ERROR(startConnect(dev, handle, &c));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    CFX_RETURN_IF_ERROR(c->poll(out));
    if (*out) return Status::kOk;
    if (std::chrono::steady_clock::now() > deadline) {
      CFX_WARN(kLogNet, "connect to %s timed out", c->handle().addr.toString().c_str());
      return Status::kRemoteError;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status TcpTransport::acceptBlocking(ListenComm& listener, std::chrono::milliseconds timeout,
                                    std::unique_ptr<RecvComm>* out) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    CFX_RETURN_IF_ERROR(listener.accept(out));
    if (*out) return Status::kOk;
    if (std::chrono::steady_clock::now() > deadline) {
      CFX_WARN(kLogNet, "accept on %s timed out", listener.address().toString().c_str());
      return Status::kRemoteError;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace conflux::net
