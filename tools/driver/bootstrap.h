// SPDX-License-Identifier: Apache-2.0
// The driver's own bootstrap: a TCP star through rank 0, used (like NCCL's bootstrap) to
// exchange listen handles and small results between the rank processes.
//
// Every rank opens two connections to rank 0: a data connection (allgather, barrier) and a
// liveness connection watched by LivenessWatch. All calls come from the rank's main thread and
// block until done, the peer is lost (error) or the run deadline passes (error).
#pragma once

#include <string>
#include <vector>

#include "driver/liveness.h"
#include "driver/sockets.h"
#include "driver/status.h"

namespace conflux::driver {

class Bootstrap {
 public:
  Bootstrap() = default;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;
  ~Bootstrap();

  // Rank 0 serves on `listen_fd` if >= 0 (fork mode hands over a listening socket), else it
  // binds `root`. Other ranks connect to `root`, retrying until the deadline.
  Status init(int rank, int nranks, const Endpoint& root, int listen_fd, const Deadline* dl);

  // Every rank contributes `mine`; afterwards (*all)[r] is rank r's contribution.
  Status allgather(const std::string& mine, std::vector<std::string>* all);
  Status barrier();

  // Orderly end of the run: a final barrier, after which peers may exit freely.
  Status finish();

  // Collective: *channel becomes a second star through rank 0 over connections of its own
  // (data only: the liveness watch stays with this bootstrap), for another thread of the rank
  // to exchange on while this one's thread uses this (service_collnet.h). Rank 0 listens on
  // the root's host, any free port, and tells the others over this bootstrap.
  Status open_channel(Bootstrap* channel);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  Status accept_all(int listen_fd);

  int rank_ = -1;
  int nranks_ = 0;
  Endpoint root_;
  const Deadline* dl_ = nullptr;
  std::vector<int> data_fds_;  // rank 0: index = peer rank; others: [0] = connection to rank 0
  LivenessWatch watch_;
};

}  // namespace conflux::driver
