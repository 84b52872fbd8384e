// SPDX-License-Identifier: Apache-2.0
// Liveness watcher thread (see liveness.h).
#include "driver/liveness.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace conflux::driver {

namespace {
constexpr char kBye = 'B';
}

LivenessWatch::~LivenessWatch() {
  stop();
  close_all();
}

Status LivenessWatch::start(int my_rank, std::vector<Peer> peers) {
  my_rank_ = my_rank;
  peers_ = std::move(peers);
  done_.assign(peers_.size(), false);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return internal_error(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
  return Status();
}

void LivenessWatch::run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    std::vector<size_t> index;
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (done_[i]) continue;
      fds.push_back(pollfd{peers_[i].fd, POLLIN, 0});
      index.push_back(i);
    }
    if (stop_.load()) return;
    int rc = ::poll(fds.data(), fds.size(), 500);
    if (stop_.load()) return;
    if (rc <= 0) continue;
    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      size_t i = index[k - 1];
      char c = 0;
      ssize_t r = ::recv(peers_[i].fd, &c, 1, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      bool bye = (r == 1 && c == kBye);
      if (!bye && !draining_.load()) {
        char msg[256];
        int n = std::snprintf(msg, sizeof msg,
                              "[rank %d] error: lost rank %d (its bootstrap connection %s: "
                              "it exited, crashed or failed); exiting\n",
                              my_rank_, peers_[i].rank, r == 0 ? "closed" : "broke");
        ssize_t w = ::write(STDERR_FILENO, msg, static_cast<size_t>(n > 0 ? n : 0));
        (void)w;
        std::fflush(stdout);
        _exit(3);
      }
      done_[i] = true;
      done_count_.fetch_add(1);
    }
  }
}

void LivenessWatch::begin_drain() { draining_.store(true); }

bool LivenessWatch::wait_peers_done(double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (done_count_.load() < static_cast<int>(peers_.size())) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void LivenessWatch::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  uint64_t one = 1;
  ssize_t w = ::write(wake_fd_, &one, sizeof one);
  (void)w;
  thread_.join();
}

void LivenessWatch::say_bye() {
  for (const Peer& p : peers_) {
    ssize_t w = ::send(p.fd, &kBye, 1, MSG_NOSIGNAL);
    (void)w;
  }
}

void LivenessWatch::close_all() {
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::close(p.fd);
    p.fd = -1;
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

}  // namespace conflux::driver
