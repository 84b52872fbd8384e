// SPDX-License-Identifier: Apache-2.0
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "net/connector.h"
#include "net/log.h"

namespace conflux::net {
namespace {
constexpr size_t kMaxIncoming = 4096;  // half-open sockets kept per listener
}

Status ListenComm::create(const SockAddr& addr, const CommOptions& recvOpts,
                          uint8_t handle[wire::kHandleBytes], std::unique_ptr<ListenComm>* out) {
  auto l = std::make_unique<ListenComm>();
  CFX_RETURN_IF_ERROR(listenOn(addr, &l->fd_, &l->bound_));
  l->nonce_ = randomU64();
  l->opts_ = recvOpts;
  wire::encodeHandle(wire::Handle{l->bound_, l->nonce_}, handle);
  *out = std::move(l);
  return Status::kOk;
}

void ListenComm::acceptNew() {
  for (;;) {
    SockAddr peer;
    socklen_t len = sizeof(peer.u);
    int fd = ::accept4(fd_.get(), &peer.u.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        CFX_WARN(kLogNet, "accept on %s failed: %s", bound_.toString().c_str(),
                 std::strerror(errno));
      }
      return;
    }
    Fd f(fd);
    if (incoming_.size() >= kMaxIncoming) {
      CFX_WARN(kLogNet, "too many half-open connections on %s; dropping %s",
               bound_.toString().c_str(), peer.toString().c_str());
      continue;
    }
    incoming_.push_back(Incoming{std::move(f), {}, 0, peer.toString()});
  }
}

void ListenComm::readHellos() {
  for (size_t i = 0; i < incoming_.size();) {
    Incoming& in = incoming_[i];
    ssize_t r = ::recv(in.fd.get(), in.buf + in.got, wire::kHelloBytes - in.got, MSG_DONTWAIT);
    if (r > 0) in.got += size_t(r);
    bool drop = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    wire::Hello h;
    if (!drop && in.got == wire::kHelloBytes) {
      if (!wire::decodeHello(in.buf, &h) || h.nonce != nonce_) {
        CFX_WARN(kLogNet, "rejecting connection from %s: not a Conflux hello for this listener",
                 in.peer.c_str());
        drop = true;
      } else {
        addToGroup(std::move(in.fd), h, std::move(in.peer));
        drop = true;  // moved out
      }
    }
    if (drop) {
      incoming_.erase(incoming_.begin() + long(i));
    } else {
      ++i;
    }
  }
}

void ListenComm::addToGroup(Fd fd, const wire::Hello& h, std::string peer) {
  Group* g = nullptr;
  for (Group& e : groups_) {
    if (e.connId == h.connId) g = &e;
  }
  if (g == nullptr) {
    groups_.emplace_back();
    g = &groups_.back();
    g->connId = h.connId;
    g->numData = h.numData;
    g->minChunk = h.minChunk;
    g->data.resize(h.numData);
    g->peer = std::move(peer);
  }
  bool isCtrl = h.role == wire::SocketRole::kControl;
  bool bad = h.numData != g->numData || h.minChunk != g->minChunk ||
             (isCtrl ? g->ctrl.valid() : g->data[h.index].valid());
  if (bad) {
    CFX_WARN(kLogNet, "inconsistent hello from %s; socket dropped", g->peer.c_str());
    return;
  }
  (isCtrl ? g->ctrl : g->data[h.index]) = std::move(fd);
  ++g->have;
}

Status ListenComm::accept(std::unique_ptr<RecvComm>* out) {
  acceptNew();
  readHellos();
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    if (g.have != 1 + g.numData) continue;
    Group done = std::move(g);
    groups_.erase(groups_.begin() + long(i));
    CFX_RETURN_IF_ERROR(configureDataSocket(done.ctrl.get(), opts_.socketBufBytes));
    for (Fd& f : done.data) CFX_RETURN_IF_ERROR(configureDataSocket(f.get(), opts_.socketBufBytes));
    CFX_RETURN_IF_ERROR(RecvComm::create(std::move(done.ctrl), std::move(done.data), opts_,
                                         done.minChunk, done.peer, out));
    CFX_INFO(kLogNet | kLogInit, "accepted connection from %s with %d data sockets, %d lanes",
             done.peer.c_str(), (*out)->numDataSockets(), (*out)->numLanes());
    return Status::kOk;
  }
  return Status::kOk;
}

}  // namespace conflux::net
