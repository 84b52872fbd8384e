#include "aggregator/cli/http_get.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fmt/format.h"

namespace conflux::cli {
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

}  // namespace

std::string parse_target(const std::string& address, std::string* host, int* port) {
  *host = address;
  *port = kDefaultMetricsPort;
  if (const size_t colon = address.rfind(':'); colon != std::string::npos) {
    *host = address.substr(0, colon);
    try {
      *port = std::stoi(address.substr(colon + 1));
    } catch (const std::exception&) {
      *port = -1;
    }
    if (*port <= 0 || *port > 65535) return fmt::format("bad port in '{}'", address);
  }
  return "";
}

std::optional<HttpAnswer> http_request(const std::string& method, const std::string& host, int port,
                                       const std::string& path,
                                       const std::vector<std::string>& headers, int timeout_ms,
                                       std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    *err = fmt::format("cannot resolve {}: {}", host, gai_strerror(rc));
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
    *err = fmt::format("cannot connect to {}:{}: {}", host, port, std::strerror(errno));
    return std::nullopt;
  }
  std::string req = fmt::format("{} {} HTTP/1.0\r\nHost: {}\r\n", method, path, host);
  for (const std::string& h : headers) req += h + "\r\n";
  req += "\r\n";
  if (send(s.fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    *err = fmt::format("cannot send to {}:{}: {}", host, port, std::strerror(errno));
    return std::nullopt;
  }
  std::string resp;
  char buf[16384];
  for (;;) {
    if (!wait_fd(s.fd, POLLIN, timeout_ms)) {
      *err = fmt::format("{}:{} did not answer within {} ms", host, port, timeout_ms);
      return std::nullopt;
    }
    const ssize_t n = recv(s.fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *err = fmt::format("reading from {}:{}: {}", host, port, std::strerror(errno));
      return std::nullopt;
    }
    resp.append(buf, static_cast<size_t>(n));
  }
  const size_t head_end = resp.find("\r\n\r\n");
  const std::string status_line = resp.substr(0, resp.find("\r\n"));
  HttpAnswer a;
  if (head_end == std::string::npos || !status_line.starts_with("HTTP/1.") ||
      std::sscanf(status_line.c_str(), "HTTP/1.%*d %d", &a.status) != 1) {
    *err = fmt::format("{}:{}{}: malformed answer '{}'", host, port, path, status_line);
    return std::nullopt;
  }
  a.body = resp.substr(head_end + 4);
  return a;
}

std::optional<std::string> http_get(const std::string& host, int port, const std::string& path,
                                    int timeout_ms, std::string* err) {
  auto a = http_request("GET", host, port, path, {}, timeout_ms, err);
  if (!a) return std::nullopt;
  if (a->status != 200) {
    *err = fmt::format("{}:{}{}: HTTP {}", host, port, path, a->status);
    return std::nullopt;
  }
  return a->body;
}

}  // namespace conflux::cli
