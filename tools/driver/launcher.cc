// SPDX-License-Identifier: Apache-2.0
// Fork mode and env mode launchers (see launcher.h).
#include "driver/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "driver/rank.h"
#include "driver/sockets.h"

namespace conflux::driver {

int run_forked(const Options& o) {
  int listen_fd = -1;
  uint16_t port = 0;
  Status st = tcp_listen(Endpoint{"127.0.0.1", 0}, &listen_fd, &port);
  if (!st.ok()) {
    std::fprintf(stderr, "driver: error: %s\n", st.message().c_str());
    return 1;
  }
  const Endpoint root{"127.0.0.1", port};
  const pid_t parent = getpid();
  std::vector<pid_t> pids(o.nranks, -1);
  std::fflush(nullptr);  // nothing buffered may be duplicated into the children
  for (int r = 0; r < o.nranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("driver: fork");
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      int fd = (r == 0) ? listen_fd : -1;
      if (r != 0) close(listen_fd);
      int rc = run_rank(o, r, o.nranks, root, fd);
      std::fflush(nullptr);
      _exit(rc);
    }
    pids[r] = pid;
  }
  close(listen_fd);

  using Clock = std::chrono::steady_clock;
  Clock::time_point hard_end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(o.timeout_s + 10.0));
  auto kill_at = Clock::time_point::max();
  int alive = o.nranks, rc = 0;
  while (alive > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int r = 0;
      while (r < o.nranks && pids[r] != pid) ++r;
      if (r == o.nranks) continue;
      pids[r] = -1;
      --alive;
      bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      if (failed) {
        if (WIFSIGNALED(status)) {
          std::fprintf(stderr, "driver: rank %d killed by signal %d\n", r, WTERMSIG(status));
        } else {
          std::fprintf(stderr, "driver: rank %d exited with status %d\n", r, WEXITSTATUS(status));
        }
        if (rc == 0) kill_at = Clock::now() + std::chrono::seconds(5);
        rc = 1;
      }
      continue;
    }
    auto now = Clock::now();
    if (now >= hard_end || now >= kill_at) {
      std::fprintf(stderr, "driver: %s; killing %d remaining rank(s)\n",
                   now >= hard_end ? "--timeout exceeded" : "a rank failed", alive);
      for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
      kill_at = hard_end = Clock::time_point::max();
      rc = 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return rc;
}

int run_from_env(const Options& o) {
  const char* r = std::getenv("CONFLUX_DRIVER_RANK");
  const char* n = std::getenv("CONFLUX_DRIVER_NRANKS");
  const char* root = std::getenv("CONFLUX_DRIVER_ROOT");
  if (r == nullptr || n == nullptr || root == nullptr) {
    std::fprintf(stderr,
                 "driver: error: give --nranks N, or set CONFLUX_DRIVER_RANK, "
                 "CONFLUX_DRIVER_NRANKS and CONFLUX_DRIVER_ROOT=host:port\n");
    return 1;
  }
  char* e1 = nullptr;
  char* e2 = nullptr;
  long rank = std::strtol(r, &e1, 10), nranks = std::strtol(n, &e2, 10);
  Endpoint ep;
  if (*e1 != '\0' || *e2 != '\0' || nranks < 1 || nranks > 1024 || rank < 0 || rank >= nranks ||
      !parse_endpoint(root, &ep)) {
    std::fprintf(stderr, "driver: error: bad CONFLUX_DRIVER_RANK/_NRANKS/_ROOT (%s/%s/%s)\n", r, n,
                 root);
    return 1;
  }
  return run_rank(o, static_cast<int>(rank), static_cast<int>(nranks), ep, -1);
}

}  // namespace conflux::driver
