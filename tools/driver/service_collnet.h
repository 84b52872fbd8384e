// SPDX-License-Identifier: Apache-2.0
// NCCL's proxy *service* thread connecting CollNet at run time (src/proxy.cc; with runtime
// connection, CollNet is connected when the first collective needs it) while the *progress*
// thread streams iallreduce on another CollNet communicator of the same ranks.
//
// With --service-collnet K, once the mode's own CollNet comm is up, every rank starts a thread
// that, K times, one comm after the other and in the same order on every rank (NCCL connects
// its CollNet comms in one order everywhere; connect is collective):
//   listen(ctx, 0, handle, &lc) -> [allgather the handles over a bootstrap channel of its own]
//   -> connect(handles[], nranks, rank, lc, &cc) (blocking, collective) -> closeListen(lc)
//   -> reduceSupport -> regMr(cc, send) -> regMr(cc, recv)
//   -> kServiceAllReduces verified AllReduces (float sum: 4 B, 64 KiB, 1 MiB)
//   -> deregMr(send) -> deregMr(recv) -> closeColl(cc)
// under the streaming comm's CollNet context (one NCCL communicator with several CollNet
// comms; the context's owner finalizes it). Meanwhile the rank's main thread keeps calling
// iallreduce/test on its own comm, and after its table it keeps running verified AllReduces
// until every rank's thread is done (agreed over the main bootstrap, so every rank runs as
// many), so the two overlap from the first listen to the last close.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "driver/bootstrap.h"
#include "driver/buffers.h"
#include "driver/collnet.h"
#include "driver/plugin.h"
#include "driver/status.h"

namespace conflux::driver {

class ServiceCollNet {
 public:
  ServiceCollNet() = default;
  ServiceCollNet(const ServiceCollNet&) = delete;
  ServiceCollNet& operator=(const ServiceCollNet&) = delete;
  ~ServiceCollNet() { (void)join(); }

  // Collective, on the main thread of every rank: opens the thread's bootstrap channel over
  // `bs`, allocates its buffers and starts it (k <= 0: nothing). `streaming`: the comm the
  // main thread streams on (its context is shared; its posted requests are counted while the
  // thread connects).
  Status start(const nccl::ncclCollNet_v11_t* cn, const CollNetSession* streaming, uint64_t comm_id,
               Bootstrap* bs, int k, uint64_t seed, const Deadline* dl);
  bool running() const { return thread_.joinable(); }
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Waits for the thread; its first error, if any.
  Status join();

  // After join(): the comms it connected and closed, and the verified AllReduces on them.
  int comms() const { return comms_; }
  int allreduces() const { return allreduces_; }
  // Requests the main thread posted on the streaming comm while this thread was inside
  // listen..regMr of its comms (on this rank).
  uint64_t posted_during_connects() const { return posted_during_; }

 private:
  void run();
  Status one_comm(int i);

  const nccl::ncclCollNet_v11_t* cn_ = nullptr;
  const CollNetSession* streaming_ = nullptr;
  uint64_t comm_id_ = 0;
  uint64_t seed_ = 0;
  int k_ = 0;
  const Deadline* dl_ = nullptr;
  Bootstrap channel_;
  HostBuffers bufs_;
  std::atomic<bool> done_{false};
  std::thread thread_;
  Status result_;
  int comms_ = 0;
  int allreduces_ = 0;
  uint64_t posted_during_ = 0;
};

}  // namespace conflux::driver
