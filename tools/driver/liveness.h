// SPDX-License-Identifier: Apache-2.0
// Watches the bootstrap "liveness" connections so that a rank that dies makes every other rank
// exit with an error instead of hanging inside a plugin call.
//
// Rank 0 watches one connection per other rank; every other rank watches its connection to
// rank 0 (rank 0 exiting on a loss propagates it to all). A background thread poll()s the
// sockets; end-of-file or an error while armed prints
//   "[rank r] error: lost rank x (...)"
// and terminates the process with _exit(3): the main thread may be stuck in the plugin.
// Orderly shutdown: rank 0 calls begin_drain() before the final barrier, then
// wait_peers_done(); the others call stop() after the barrier, then say_bye().
#pragma once

#include <atomic>
#include <thread>
#include <vector>

#include "driver/status.h"

namespace conflux::driver {

class LivenessWatch {
 public:
  LivenessWatch() = default;
  LivenessWatch(const LivenessWatch&) = delete;
  LivenessWatch& operator=(const LivenessWatch&) = delete;
  ~LivenessWatch();

  struct Peer {
    int fd;
    int rank;
  };
  // Takes ownership of the fds. Starts the watcher thread.
  Status start(int my_rank, std::vector<Peer> peers);
  void begin_drain();                    // from now on EOF/bye from a peer is fine
  bool wait_peers_done(double seconds);  // rank 0: until every peer said bye or closed
  void stop();                           // joins the thread (idempotent)
  void say_bye();                        // non-root: tells rank 0 this rank ends normally
  void close_all();

 private:
  void run();

  int my_rank_ = -1;
  std::vector<Peer> peers_;
  std::vector<bool> done_;
  int wake_fd_ = -1;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> done_count_{0};
  std::thread thread_;
};

}  // namespace conflux::driver
