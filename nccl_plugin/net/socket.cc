// SPDX-License-Identifier: Apache-2.0
#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "net/log.h"

namespace conflux::net {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

socklen_t SockAddr::length() const {
  return family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t SockAddr::port() const {
  return ntohs(family() == AF_INET6 ? u.in6.sin6_port : u.in4.sin_port);
}

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET6) {
    u.in6.sin6_port = htons(port);
  } else {
    u.in4.sin_port = htons(port);
  }
}

bool SockAddr::isLoopback() const {
  if (family() == AF_INET) return (ntohl(u.in4.sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&u.in6.sin6_addr);
  return false;
}

std::string SockAddr::host() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) inet_ntop(AF_INET, &u.in4.sin_addr, buf, sizeof buf);
  if (family() == AF_INET6) inet_ntop(AF_INET6, &u.in6.sin6_addr, buf, sizeof buf);
  return buf;
}

std::string SockAddr::toString() const {
  if (family() == AF_INET) return host() + ":" + std::to_string(port());
  if (family() == AF_INET6) return "[" + host() + "]:" + std::to_string(port());
  return "<no address>";
}

bool SockAddr::fromSockaddr(const sockaddr* sa, SockAddr* out) {
  if (sa == nullptr) return false;
  *out = SockAddr{};
  if (sa->sa_family == AF_INET) {
    std::memcpy(&out->u.in4, sa, sizeof(sockaddr_in));
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    std::memcpy(&out->u.in6, sa, sizeof(sockaddr_in6));
    return true;
  }
  return false;
}

Status listenOn(const SockAddr& addr, Fd* out, SockAddr* bound) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    CFX_WARN(kLogNet, "socket() for listen failed: %s", std::strerror(errno));
    return Status::kSystemError;
  }
  SockAddr a = addr;
  a.setPort(0);
  if (::bind(fd.get(), &a.u.sa, a.length()) != 0 || ::listen(fd.get(), 16384) != 0) {
    CFX_WARN(kLogNet, "bind/listen on %s failed: %s", a.toString().c_str(), std::strerror(errno));
    return Status::kSystemError;
  }
  socklen_t len = sizeof(bound->u);
  if (::getsockname(fd.get(), &bound->u.sa, &len) != 0) {
    CFX_WARN(kLogNet, "getsockname failed: %s", std::strerror(errno));
    return Status::kSystemError;
  }
  *out = std::move(fd);
  return Status::kOk;
}

Status startConnect(const SockAddr& addr, Fd* out) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    CFX_WARN(kLogNet, "socket() for connect failed: %s", std::strerror(errno));
    return Status::kSystemError;
  }
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), &addr.u.sa, addr.length()) != 0 && errno != EINPROGRESS) {
    CFX_WARN(kLogNet, "connect to %s failed: %s", addr.toString().c_str(), std::strerror(errno));
    return Status::kSystemError;
  }
  *out = std::move(fd);
  return Status::kOk;
}

ConnectState checkConnect(int fd, int* err) {
  pollfd p{fd, POLLOUT, 0};
  int r = ::poll(&p, 1, 0);
  if (r == 0) return ConnectState::kPending;
  if (r < 0) {
    *err = errno;
    return errno == EINTR ? ConnectState::kPending : ConnectState::kFailed;
  }
  int soerr = 0;
  socklen_t len = sizeof soerr;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
  *err = soerr;
  return soerr == 0 ? ConnectState::kConnected : ConnectState::kFailed;
}

Status configureDataSocket(int fd, int bufBytes) {
  int one = 1;
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
      ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    CFX_WARN(kLogNet, "socket setup failed: %s", std::strerror(errno));
    return Status::kSystemError;
  }
  if (bufBytes > 0) {
    // A receive buffer of less than a few segments stalls the stream: once the reader drains
    // it, the receiver's silly-window avoidance announces no window (the free space is below
    // one segment), and the sender waits for its persist timer: 0.2 s doubling to tens of
    // seconds. Large MTUs get there with buffers one may well set (loopback's 64 KiB, IPoIB's
    // 65520 in connected mode), so a set size is raised to kMinBufferSegments segments.
    constexpr int kMinBufferSegments = 4;
    int mss = 0;
    socklen_t len = sizeof mss;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0 &&
        bufBytes < kMinBufferSegments * mss) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true, std::memory_order_relaxed)) {
        CFX_INFO(kLogNet | kLogInit,
                 "socket buffers of %d bytes raised to %d: %d segments of %d bytes (smaller "
                 "ones stall TCP on the persist timer)",
                 bufBytes, kMinBufferSegments * mss, kMinBufferSegments, mss);
      }
      bufBytes = kMinBufferSegments * mss;
    }
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufBytes, sizeof bufBytes);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufBytes, sizeof bufBytes);
  }
  return Status::kOk;
}

}  // namespace conflux::net
