#include "aggregator/cli/http_get.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
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

std::optional<std::string> http_get(const std::string& host, int port, const std::string& path,
                                    int timeout_ms, std::string* err) {
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
  const std::string req = fmt::format("GET {} HTTP/1.0\r\nHost: {}\r\n\r\n", path, host);
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
  const std::string status = resp.substr(0, resp.find("\r\n"));
  if (head_end == std::string::npos || status.find(" 200 ") == std::string::npos) {
    *err = fmt::format("{}:{}{}: unexpected answer '{}'", host, port, path, status);
    return std::nullopt;
  }
  return resp.substr(head_end + 4);
}

}  // namespace conflux::cli
