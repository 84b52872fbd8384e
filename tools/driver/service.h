// SPDX-License-Identifier: Apache-2.0
// NCCL's proxy *service* thread (src/proxy.cc), beside the progress thread: it listens,
// connects, accepts, registers, deregisters and closes while the progress thread streams on
// other connections (new peers and channels are connected at run time). With
// --service-conns K every rank prepares K extra listen comms, exchanges their handles with the
// ring's, and once the ring is up a thread of its own connects to K of rank+1's, accepts K
// from rank-1, registers a buffer on each comm, deregisters it and closes them, while the
// rank's main thread runs the mode's AllReduces; NetRing::teardown joins it first.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "driver/plugin.h"
#include "driver/status.h"

namespace conflux::driver {

class ServiceThread {
 public:
  ServiceThread() = default;
  ServiceThread(const ServiceThread&) = delete;
  ServiceThread& operator=(const ServiceThread&) = delete;
  ~ServiceThread() { (void)join(); }

  // Listens K times on device 0 (main thread, before the handles are exchanged); *handles
  // gets the K handles, NCCL_NET_HANDLE_MAXSIZE bytes each, concatenated. hold: the thread
  // keeps its connections open until join() (--hold-conns: NCCL keeps its connections for the
  // communicator's life), and connected() says when they are all up.
  Status listen(const nccl::ncclNet_v11_t* net, void* ctx, int rank, int k, bool hold,
                std::string* handles);
  // Starts the thread: connects to the K handles of rank+1 (`next`), accepts K connections.
  void start(const std::string& next, const Deadline* dl);
  // With hold: waits until every connection is up (or the thread failed).
  Status connected();
  // Waits for the thread and closes held connections; its first error, if any.
  Status join();

 private:
  void run(std::string next);

  const nccl::ncclNet_v11_t* net_ = nullptr;
  void* ctx_ = nullptr;
  int rank_ = 0;
  const Deadline* dl_ = nullptr;
  bool hold_ = false;
  std::vector<void*> listens_;
  std::vector<void*> held_;  // hold: the open send and receive comms, closed by join()
  std::atomic<bool> up_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
  Status result_;
};

}  // namespace conflux::driver
