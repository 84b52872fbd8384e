// SPDX-License-Identifier: Apache-2.0
// Thin POSIX socket helpers for the TCP transport: an owning fd, an IPv4/IPv6 address, and
// non-blocking setup calls. Control path only; the data path calls send/recv directly.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "net/status.h"

namespace conflux::net {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// An IPv4 or IPv6 socket address.
struct SockAddr {
  union {
    sockaddr sa;
    sockaddr_in in4;
    sockaddr_in6 in6;
  } u{};

  int family() const { return u.sa.sa_family; }
  socklen_t length() const;
  uint16_t port() const;  // host byte order
  void setPort(uint16_t port);
  bool isLoopback() const;
  std::string toString() const;  // "1.2.3.4:port" or "[::1]:port"
  std::string host() const;      // "1.2.3.4" or "::1"
  static bool fromSockaddr(const sockaddr* sa, SockAddr* out);
};

// Creates a non-blocking listening socket bound to `addr` with an ephemeral port; returns the
// bound address (with port) in *bound.
Status listenOn(const SockAddr& addr, Fd* out, SockAddr* bound);

// Starts a non-blocking connect to `addr`. *out is valid on success (connection may be pending).
Status startConnect(const SockAddr& addr, Fd* out);

// Result of polling a pending non-blocking connect without waiting.
enum class ConnectState { kPending, kConnected, kFailed };
ConnectState checkConnect(int fd, int* err);

// Sets TCP_NODELAY, O_NONBLOCK, FD_CLOEXEC and (if bufBytes > 0) SO_SNDBUF/SO_RCVBUF.
Status configureDataSocket(int fd, int bufBytes);

}  // namespace conflux::net
