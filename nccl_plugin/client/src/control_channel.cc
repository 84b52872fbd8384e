// SPDX-License-Identifier: Apache-2.0
#include "control_channel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "errno_text.h"

namespace conflux::client {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

int ms_until(int64_t deadline_ns) {
  const int64_t left = deadline_ns - now_ns();
  if (left <= 0) {
    return 0;
  }
  return static_cast<int>((left + 999'999) / 1'000'000);
}

Status resolve(const std::string& host, sockaddr_in* out) {
  out->sin_family = AF_INET;
  if (::inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) {
    return {};
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return unavailable("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return {};
}

}  // namespace

ControlChannel::~ControlChannel() { close(); }

void ControlChannel::close() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = -1;
}

Status ControlChannel::connect(const Endpoint& ep, int64_t deadline_ns, int* error) {
  close();
  int ignored = 0;
  int& code = error != nullptr ? *error : ignored;
  code = 0;
  CFX_TRY(resolve(ep.host, &peer_));
  peer_.sin_port = htons(ep.port);
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &peer_.sin_addr, ip, sizeof ip);
  peer_str_ = std::string(ip) + ":" + std::to_string(ep.port);

  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    code = errno;
    return system_error(std::string("socket: ") + errno_text(code));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&peer_), sizeof peer_) != 0) {
    if (errno != EINPROGRESS) {
      code = errno;
      return unavailable(errno_text(code));
    }
    pollfd p{fd_, POLLOUT, 0};
    int r;
    do {
      r = ::poll(&p, 1, ms_until(deadline_ns));
    } while (r < 0 && errno == EINTR);
    if (r == 0) {
      code = ETIMEDOUT;
      return timed_out("connect timed out");
    }
    int soerr = 0;
    socklen_t len = sizeof soerr;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (soerr != 0) {
      code = soerr;
      return unavailable(errno_text(soerr));
    }
  }
  return {};
}

bool ControlChannel::parse_buffered(proto::ControlMsg* msg, Rx* rx, std::string* err) {
  size_t consumed = 0;
  const std::span<const uint8_t> avail(rx_.data() + rx_off_, rx_.size() - rx_off_);
  const proto::ControlParse p = proto::parse_control(avail, msg, &consumed);
  if (p == proto::ControlParse::kNeedMore) {
    if (rx_off_ > 0) {  // compact
      rx_.erase(rx_.begin(), rx_.begin() + static_cast<ptrdiff_t>(rx_off_));
      rx_off_ = 0;
    }
    return false;
  }
  if (p != proto::ControlParse::kOk) {
    *err = "malformed control frame (" + std::string(proto::control_parse_name(p)) + ")";
    *rx = Rx::kError;
    return true;
  }
  rx_off_ += consumed;
  *rx = Rx::kMessage;
  return true;
}

ControlChannel::Rx ControlChannel::poll_message(proto::ControlMsg* msg, std::string* err) {
  Rx rx = Rx::kNone;
  if (fd_ < 0) {
    *err = "not connected";
    return Rx::kError;
  }
  if (parse_buffered(msg, &rx, err)) {
    return rx;
  }
  uint8_t buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      rx_.insert(rx_.end(), buf, buf + n);
      if (parse_buffered(msg, &rx, err)) {
        return rx;
      }
      continue;
    }
    if (n == 0) {
      *err = "closed the control connection";
      return Rx::kClosed;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return Rx::kNone;
    }
    *err = std::string("control connection error: ") + errno_text(errno);
    return Rx::kClosed;
  }
}

Status ControlChannel::recv_blocking(proto::ControlMsg* msg, int64_t deadline_ns, Rx* how) {
  Rx ignored = Rx::kNone;
  Rx& out = how != nullptr ? *how : ignored;
  for (;;) {
    std::string err;
    out = poll_message(msg, &err);
    if (out == Rx::kMessage) {
      return {};
    }
    if (out == Rx::kClosed) {
      return unavailable(std::move(err));
    }
    if (out == Rx::kError) {
      return refused(std::move(err));  // the peer sent what is not a control frame
    }
    const int wait = ms_until(deadline_ns);
    if (wait == 0) {
      return timed_out("timed out");
    }
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, wait);
  }
}

bool ControlChannel::send(const proto::ControlMsg& m, std::string* err) {
  if (tx_off_ == tx_.size()) {
    tx_.clear();
    tx_off_ = 0;
  }
  proto::encode_control(m, tx_);
  return flush(err);
}

bool ControlChannel::flush(std::string* err) {
  while (tx_off_ < tx_.size()) {
    const ssize_t n =
        ::send(fd_, tx_.data() + tx_off_, tx_.size() - tx_off_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      tx_off_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    }
    *err = std::string("control connection error: ") + errno_text(errno);
    return false;
  }
  return true;
}

}  // namespace conflux::client
