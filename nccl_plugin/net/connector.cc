// SPDX-License-Identifier: Apache-2.0
#include "net/connector.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "net/log.h"

namespace conflux::net {

uint64_t randomU64() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, GRND_NONBLOCK) == ssize_t(sizeof v)) return v;
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

Status Connector::start(const wire::Handle& handle, const CommOptions& opts,
                        std::unique_ptr<Connector>* out) {
  auto c = std::make_unique<Connector>();
  c->handle_ = handle;
  c->opts_ = opts;
  int ndata = opts.nthreads * opts.nsocksPerThread;
  uint64_t connId = randomU64();
  c->socks_.resize(1 + ndata);
  for (int i = 0; i <= ndata; ++i) {
    Sock& s = c->socks_[i];
    CFX_RETURN_IF_ERROR(startConnect(handle.addr, &s.fd));
    wire::Hello h;
    h.role = i == 0 ? wire::SocketRole::kControl : wire::SocketRole::kData;
    h.index = uint8_t(i == 0 ? 0 : i - 1);
    h.numData = uint16_t(ndata);
    h.nonce = handle.nonce;
    h.connId = connId;
    h.minChunk = uint32_t(opts.minChunkBytes);
    wire::encodeHello(h, s.hello);
  }
  *out = std::move(c);
  return Status::kOk;
}

Status Connector::poll(std::unique_ptr<SendComm>* out) {
  bool all = true;
  for (Sock& s : socks_) {
    if (!s.connected) {
      int err = 0;
      ConnectState st = checkConnect(s.fd.get(), &err);
      if (st == ConnectState::kFailed) {
        CFX_WARN(kLogNet, "connect to %s failed: %s", handle_.addr.toString().c_str(),
                 std::strerror(err));
        return Status::kSystemError;
      }
      if (st == ConnectState::kPending) {
        all = false;
        continue;
      }
      s.connected = true;
      CFX_RETURN_IF_ERROR(configureDataSocket(s.fd.get(), opts_.socketBufBytes));
    }
    while (s.sent < wire::kHelloBytes) {
      ssize_t r = ::send(s.fd.get(), s.hello + s.sent, wire::kHelloBytes - s.sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) {
        s.sent += size_t(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        CFX_WARN(kLogNet, "sending hello to %s failed: %s", handle_.addr.toString().c_str(),
                 std::strerror(errno));
        return Status::kRemoteError;
      }
    }
    all = all && s.sent == wire::kHelloBytes;
  }
  if (!all) return Status::kOk;
  Fd ctrl = std::move(socks_[0].fd);
  std::vector<Fd> data;
  for (size_t i = 1; i < socks_.size(); ++i) data.push_back(std::move(socks_[i].fd));
  socks_.clear();
  CFX_RETURN_IF_ERROR(
      SendComm::create(std::move(ctrl), std::move(data), opts_, handle_.addr.toString(), out));
  CFX_INFO(kLogNet | kLogInit, "connected to %s with %d data sockets, %d lanes",
           handle_.addr.toString().c_str(), (*out)->numDataSockets(), (*out)->numLanes());
  return Status::kOk;
}

}  // namespace conflux::net
