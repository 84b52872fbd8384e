// SPDX-License-Identifier: Apache-2.0
#include "conflux/common/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace conflux::http {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

bool wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

std::string where(const std::string& host, int port) { return host + ":" + std::to_string(port); }

}  // namespace

std::optional<Answer> request(const std::string& method, const std::string& host, int port,
                              const std::string& path, const std::vector<std::string>& headers,
                              int timeout_ms, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    *err = "cannot resolve " + host + ": " + gai_strerror(rc);
    return std::nullopt;
  }
  Fd s{socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  int rc = s.fd < 0 ? -1 : connect(s.fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno == EINPROGRESS) {
    int so = ETIMEDOUT;
    socklen_t len = sizeof(so);
    if (wait_fd(s.fd, POLLOUT, timeout_ms)) getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &so, &len);
    rc = so == 0 ? 0 : -1;
    errno = so;
  }
  if (rc != 0) {
    *err = "cannot connect to " + where(host, port) + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string req = method + " " + path + " HTTP/1.0\r\nHost: " + host + "\r\n";
  for (const std::string& h : headers) req += h + "\r\n";
  req += "\r\n";
  if (send(s.fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    *err = "cannot send to " + where(host, port) + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string resp;
  char buf[16384];
  for (;;) {
    if (!wait_fd(s.fd, POLLIN, timeout_ms)) {
      *err = where(host, port) + " did not answer within " + std::to_string(timeout_ms) + " ms";
      return std::nullopt;
    }
    const ssize_t n = recv(s.fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *err = "reading from " + where(host, port) + ": " + std::strerror(errno);
      return std::nullopt;
    }
    resp.append(buf, static_cast<size_t>(n));
  }
  const size_t head_end = resp.find("\r\n\r\n");
  const std::string status_line = resp.substr(0, resp.find("\r\n"));
  Answer a;
  if (head_end == std::string::npos || !status_line.starts_with("HTTP/1.") ||
      std::sscanf(status_line.c_str(), "HTTP/1.%*d %d", &a.status) != 1) {
    *err = where(host, port) + path + ": malformed answer '" + status_line + "'";
    return std::nullopt;
  }
  a.body = resp.substr(head_end + 4);
  return a;
}

std::optional<std::string> get(const std::string& host, int port, const std::string& path,
                               int timeout_ms, std::string* err) {
  auto a = request("GET", host, port, path, {}, timeout_ms, err);
  if (!a) return std::nullopt;
  if (a->status != 200) {
    *err = where(host, port) + path + ": HTTP " + std::to_string(a->status);
    return std::nullopt;
  }
  return a->body;
}

}  // namespace conflux::http
