// SPDX-License-Identifier: Apache-2.0
// Reduction tree, control half of a leaf (SPEC.md §7): the leaf's control connections to its
// parent aggregator, one per job, on a thread of their own so that connecting, waiting for
// the parent's rendezvous and heartbeats never block the control thread.
//
// The control thread hands requests over with join()/leave() (a mutex-guarded queue) and
// collects what happened with take_events() when event_fd() turns readable (it is in the
// control thread's epoll set). The uplink thread speaks SPEC.md §3 as a worker would: it
// answers ServerHello with a Join carrying the tree extension (weight = the leaf's ranks,
// the leaf's data ports), heartbeats every second, and reports a parent that refuses,
// closes, sends Error/Shutdown or falls silent for `silence`.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conflux/common/status.h"
#include "conflux/protocol/control.h"

namespace conflux::agg {

struct UplinkConfig {
  sockaddr_in parent{};  // the parent's control endpoint
  std::string secret;    // the tree's shared secret (the same on every daemon), may be empty
  std::vector<uint16_t> data_ports;          // this leaf's data ports: slot s of a job on [s % n]
  std::chrono::milliseconds silence{10000};  // a parent silent this long is lost
  std::chrono::milliseconds connect_timeout{5000};
};

// What the control thread learns about one job's uplink.
struct UplinkEvent {
  enum class Kind : uint8_t {
    kJoined,  // JoinAck ok: `ack` and the parent's data address `parent_ip`
    kFailed,  // the uplink never became a member: `status` (internal when no JoinAck said)
    kLost,    // a member uplink ended: the parent closed, failed or fell silent
  };
  Kind kind = Kind::kFailed;
  uint64_t job_key = 0;
  proto::JoinAck ack;
  uint32_t parent_ip = 0;  // network order
  proto::Status status = proto::Status::kInternal;
  std::string why;
};

class UplinkClient {
 public:
  explicit UplinkClient(UplinkConfig cfg);
  ~UplinkClient();  // stops the thread and closes every uplink (the parent sees them close)
  UplinkClient(const UplinkClient&) = delete;
  UplinkClient& operator=(const UplinkClient&) = delete;

  // Starts the thread. Ok, or system_error (no eventfd).
  Status start();
  // Control thread: readable while events wait.
  int event_fd() const { return event_fd_; }
  // Control thread: join the parent for `join` (its job_key names the uplink; udp_port and
  // data_ports are filled in here). At most one uplink per job key.
  void join(const proto::Join& join);
  // Control thread: leave (or stop joining) the parent for this job.
  void leave(uint64_t job_key);
  // Control thread: send DirectDown on this job's uplink (SPEC.md §7, results straight down);
  // nothing when the uplink is not a member (any more).
  void direct_down(uint64_t job_key, const proto::DirectDown& d);
  // Control thread: the events since the last call.
  std::vector<UplinkEvent> take_events();

 private:
  struct Link;
  struct Request {
    enum class Kind : uint8_t { kJoin, kLeave, kDirectDown } kind;
    proto::Join msg;  // kJoin; the job key for the others
    proto::DirectDown direct{};
  };

  void run();
  void take_requests(std::vector<std::unique_ptr<Link>>& links);
  void post(UplinkEvent e);
  bool service(Link& l);  // reads and handles input; false when the link ended
  void finish(Link& l, UplinkEvent::Kind kind, proto::Status s, std::string why);

  UplinkConfig cfg_;
  int event_fd_ = -1;  // to the control thread
  int wake_fd_ = -1;   // to the uplink thread
  std::mutex mu_;
  std::vector<Request> requests_;
  std::vector<UplinkEvent> events_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace conflux::agg
