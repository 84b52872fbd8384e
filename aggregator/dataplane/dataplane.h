// SPDX-License-Identifier: Apache-2.0
// The packet I/O backend interface (control path only). A Dataplane owns its queues and
// their threads; each queue runs an RxPipeline/SlotEngine over the shared JobTable and
// transmits the resulting RESULT datagrams. Slot s is served by queue s % n_queues(), which
// listens on ports()[s % n_queues()]. The per-packet path lives in the concrete (final)
// backend classes and never goes through this interface.
//
// Life cycle, all calls from the daemon's main thread:
//   make_dataplane() -> binds/opens everything (ports() valid) -> start() -> ... -> stop().
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/engine/counters.h"
#include "aggregator/engine/fault_injector.h"
#include "aggregator/engine/job_table.h"
#include "aggregator/util/token_bucket.h"
#include "conflux/common/status.h"

namespace conflux::agg {

class Dataplane {
 public:
  virtual ~Dataplane() = default;

  virtual std::string_view name() const = 0;
  // Starts one thread per queue. Ok, or system_error saying which queue could not start.
  virtual Status start() = 0;
  // Stops and joins the threads (each exits within ~100 ms). Idempotent.
  virtual void stop() = 0;
  // Data ports, one per queue (index = queue).
  virtual std::vector<uint16_t> ports() const = 0;
  virtual unsigned n_queues() const = 0;
  // Counters of queue q, readable from any thread at any time.
  virtual const QueueCounters& counters(unsigned q) const = 0;
  // Backend-specific metric families (complete Prometheus text with HELP/TYPE lines),
  // appended to /metrics. Control thread. Default: none.
  virtual std::string extra_metrics() const { return {}; }
  // Multicast result delivery (protocol/SPEC.md §8): whether this backend can send results to
  // a job's group (ResultBatch entries then name the group), and sending one datagram (a PROBE)
  // from its first data port to the group `to`. Control thread. Default: unicast only.
  virtual bool can_multicast() const { return false; }
  virtual bool send_datagram(const sockaddr_in& to, std::span<const uint8_t> bytes) const {
    (void)to;
    (void)bytes;
    return false;
  }
  // The cap on the result bytes the queues send, Mbit/s over all of them (0 = none), changed
  // while the daemon runs (conflux throttle). Control thread; each queue follows before its
  // next send.
  void set_max_mbps(int64_t mbps) const { egress_cap_.set(mbps); }
  int64_t max_mbps() const { return egress_cap_.get(); }

 protected:
  // Set from cfg.max_mbps by the backend before it makes its queues, which keep a reference.
  mutable EgressCap egress_cap_;
};

// Creates the backend named by cfg.dataplane with cfg.threads queues over `jobs` (which must
// outlive it). On failure returns nullptr and sets *err.
std::unique_ptr<Dataplane> make_dataplane(const Config& cfg, JobTable& jobs, std::string* err);

// The receive-path fault injector a backend puts in front of queue `queue`'s engine, or
// nullptr when no fault is configured. Test builds only (CONFLUX_TEST_HOOKS); otherwise always
// nullptr, and no injector code is compiled (engine/rx_pipeline.h).
#ifdef CONFLUX_TEST_HOOKS
std::unique_ptr<FaultInjector> make_fault_injector(const Config& cfg, unsigned queue);
#else
inline std::unique_ptr<FaultInjector> make_fault_injector(const Config&, unsigned) {
  return nullptr;
}
#endif

}  // namespace conflux::agg
