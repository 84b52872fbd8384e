// SPDX-License-Identifier: Apache-2.0
// ProgressEngine: the process's helper threads for the p2p net, shared by all its comms.
//
// NCCL opens a connection per channel, peer and pattern (tens per rank, with 8 ranks per
// host), so a thread per connection would cost hundreds of threads per process. Instead a comm
// has `lanes` (CommOptions::nthreads): lane i moves the bytes of its data sockets (and lane 0
// the control socket), and the engine runs each lane on one of its threads. A comm's lanes go
// to distinct threads, the least loaded ones, so one connection still moves its data sockets
// in parallel; the engine has max(CommOptions::progressThreads, the most lanes of one comm)
// threads at most, however many comms are open.
//
// A thread runs a lane when the lane is active: just attached, woken by the caller (wake: new
// work), ready according to poll(), or busy (its last step moved something). When none of its
// lanes can move, the thread sleeps in one poll() over the sockets and wake-ups of all of them.
// Threads start when they get their first lane and stop when they lose their last, so a process
// without open comms has none (and fork() in such a process is safe).
//
// Locking: each thread's Slot::mu is held while the thread works on its lanes (not while it
// sleeps in poll); attach and detach take it, so once detach() returns no thread touches the
// comm. The lane steps take the comm's own control lock under it (never the other way round).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "net/status.h"

namespace conflux::net {

class CommCore;

class ProgressEngine {
 public:
  static constexpr int kMaxThreads = 64;

  static ProgressEngine& instance();

  // Places the `lanes` lanes of `comm` on distinct threads, the least loaded of the first
  // max(threads, lanes) (at most kMaxThreads), starting those not yet running; (*threadOf)[i]
  // is lane i's thread. The lanes are active at once. kSystemError if a thread cannot start.
  Status attach(CommCore* comm, int lanes, int threads, std::vector<int>* threadOf);
  // Removes every lane of `comm`. On return no engine thread runs or will run a step of it.
  // Threads left without lanes stop (joined here). Never from an engine thread.
  void detach(CommCore* comm);
  // Makes `thread` look at its lanes' wanted flags (CommCore::laneWanted): a no-op unless it
  // sleeps. Any thread.
  void wake(int thread);
  bool asleep(int thread) const;
  // Threads running now.
  int running();

 private:
  struct Lane {
    CommCore* comm;
    int lane;
    bool active;
  };
  struct Slot {
    std::mutex mu;  // held by the thread while it steps its lanes; attach/detach take it
    std::vector<Lane> lanes;
    uint64_t epoch = 0;  // bumped whenever lanes change (a poll's results then do not apply)
    bool stop = false;
    std::atomic<int> waiting{0};  // attach/detach calls waiting for mu: the thread lets go
    std::thread thread;
    Fd wakeFd;  // made with the first thread, kept for the process's life
    std::atomic<bool> sleeping{false};
  };

  ProgressEngine();
  void run(Slot& s);
  void detachLocked(CommCore* comm);  // under lifecycleMu_
  void resetAfterFork();              // under lifecycleMu_
  Slot& slot(int t) { return slots_[size_t(t)]; }
  const Slot& slot(int t) const { return slots_[size_t(t)]; }

  std::mutex lifecycleMu_;  // attach/detach, one at a time
  std::array<Slot, kMaxThreads> slots_;
  pid_t pid_ = 0;
};

}  // namespace conflux::net
