// SPDX-License-Identifier: Apache-2.0
// TCP helpers with poll()-based deadlines (see sockets.h).
#include "driver/sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace conflux::driver {
namespace {

Status sys_error(const std::string& what) {
  return system_error(what + ": " + std::strerror(errno));
}

Status resolve(const Endpoint& ep, sockaddr_in* sa) {
  std::memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons(ep.port);
  if (ep.host.empty() || ep.host == "*") {
    sa->sin_addr.s_addr = htonl(INADDR_ANY);
    return Status();
  }
  if (inet_pton(AF_INET, ep.host.c_str(), &sa->sin_addr) == 1) return Status();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(ep.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return unavailable("cannot resolve bootstrap host '" + ep.host + "': " + gai_strerror(rc));
  }
  sa->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return Status();
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

bool parse_endpoint(const std::string& s, Endpoint* out) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 >= s.size()) return false;
  std::string port = s.substr(colon + 1);
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535) return false;
  out->host = s.substr(0, colon);
  out->port = static_cast<uint16_t>(p);
  return !out->host.empty();
}

Status tcp_listen(const Endpoint& ep, int* fd, uint16_t* bound_port) {
  sockaddr_in sa{};
  CFX_TRY(resolve(ep, &sa));
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return sys_error("bootstrap socket()");
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    Status st = sys_error("bootstrap bind(" + ep.host + ":" + std::to_string(ep.port) + ")");
    ::close(s);
    return st;
  }
  if (::listen(s, 1024) != 0) {
    Status st = sys_error("bootstrap listen()");
    ::close(s);
    return st;
  }
  socklen_t len = sizeof sa;
  getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len);
  if (bound_port != nullptr) *bound_port = ntohs(sa.sin_port);
  *fd = s;
  return Status();
}

Status tcp_connect(const Endpoint& ep, const Deadline& dl, int* fd) {
  sockaddr_in sa{};
  CFX_TRY(resolve(ep, &sa));
  for (;;) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return sys_error("bootstrap socket()");
    if (::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      set_nodelay(s);
      *fd = s;
      return Status();
    }
    int err = errno;
    ::close(s);
    if (err != ECONNREFUSED && err != EINTR && err != ETIMEDOUT && err != EAGAIN) {
      errno = err;
      return sys_error("bootstrap connect(" + ep.host + ":" + std::to_string(ep.port) + ")");
    }
    if (dl.passed()) {
      return timed_out("--timeout reached connecting to the bootstrap root " + ep.host + ":" +
                       std::to_string(ep.port));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status tcp_accept(int listen_fd, const Deadline& dl, int* fd) {
  for (;;) {
    pollfd p{listen_fd, POLLIN, 0};
    int rc = ::poll(&p, 1, dl.remaining_ms(200));
    if (rc < 0 && errno != EINTR) return sys_error("bootstrap poll(accept)");
    if (rc > 0) {
      int s = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (s >= 0) {
        set_nodelay(s);
        *fd = s;
        return Status();
      }
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        return sys_error("bootstrap accept()");
      }
    }
    if (dl.passed()) return timed_out("--timeout reached waiting for ranks to join the bootstrap");
  }
}

Status send_all(int fd, const void* buf, size_t n, const Deadline& dl, const std::string& what) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return sys_error("bootstrap send to " + what + " (it exited or crashed?)");
    }
    pollfd pf{fd, POLLOUT, 0};
    if (::poll(&pf, 1, dl.remaining_ms(200)) == 0 && dl.passed()) {
      return timed_out("--timeout reached sending to " + what + " over the bootstrap");
    }
  }
  return Status();
}

Status recv_all(int fd, void* buf, size_t n, const Deadline& dl, const std::string& what) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return internal_error("lost " + what + ": bootstrap connection closed");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return sys_error("bootstrap recv from " + what);
    }
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, dl.remaining_ms(200)) == 0 && dl.passed()) {
      return timed_out("--timeout reached waiting for " + what + " over the bootstrap");
    }
  }
  return Status();
}

void close_fd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

}  // namespace conflux::driver
