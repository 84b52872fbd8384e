// The control plane: one thread serving the control TCP port (framed messages, SPEC.md §3)
// and the metrics HTTP port, with epoll and non-blocking sockets.
// ServerHello on accept, Join (with authentication) into the JobManager, Heartbeat/Ack,
// Leave, silence timeouts, Error + close on malformed frames, and at stop Shutdown{0} to every
// connection. Created and started by the Daemon; request_stop() may be called from any thread
// (it only writes an eventfd) and run() returns within ~0.3 s.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/control/connection.h"
#include "aggregator/control/control_counters.h"
#include "aggregator/control/job_manager.h"
#include "aggregator/dataplane/dataplane.h"
#include "aggregator/util/rate_limit.h"

namespace conflux::agg {

class ControlPlane final : private JoinOutbox {
 public:
  // Binds the control and metrics listeners. nullptr + *err on failure.
  static std::unique_ptr<ControlPlane> create(const Config& cfg, JobTable& jobs,
                                              const Dataplane& dataplane, std::string* err);
  ~ControlPlane() override;

  uint16_t control_port() const { return control_port_; }
  int metrics_port() const { return metrics_port_; }  // -1 when disabled
  const ControlCounters& counters() const { return counters_; }

  // Thread body: serves until request_stop(), then says Shutdown to everyone and returns.
  void run();
  // Any thread, async-signal-safe.
  void request_stop();

 private:
  ControlPlane(const Config& cfg, JobTable& jobs, const Dataplane& dp);

  // control_loop.cc: sockets and event loop
  void accept_all(int listen_fd, Connection::Kind kind);
  void on_readable(Connection& c);
  void on_writable(Connection& c);
  void flush(Connection& c);
  void close_later(Connection& c);
  void reap();
  void tick(Clock::time_point now);
  // After a gap in the loop itself (SIGSTOP, a VM pause, a debugger), restarts every
  // connection's silence timer: the daemon, not its peers, was silent.
  void forgive_stall(Clock::time_point now, Clock::duration gap);
  void shutdown_all();
  void watch_write(Connection& c, bool on);

  // control_messages.cc: framing and message handlers
  void parse_frames(Connection& c);
  void handle(Connection& c, proto::ControlMsg& m);
  void handle_join(Connection& c, const proto::Join& j);
  void send(Connection& c, const proto::ControlMsg& m);
  void fail(Connection& c, proto::Status s, ControlErrorReason why, const std::string& text);
  void deliver(ConnId conn, const proto::JoinAck& ack) override;
  void forget_membership(Connection& c);

  // metrics/metrics_http.cc
  void serve_http(Connection& c);

  const Config& cfg_;
  JobTable& jobs_;
  const Dataplane& dataplane_;
  ControlCounters counters_;
  JobManager manager_;
  proto::Capacity capacity_;  // sent after JoinAck to workers that ask (kJoinFlagCapacity)
  std::unordered_map<ConnId, Connection> conns_;
  ConnId next_id_ = 16;  // ids below are the listeners and the stop event
  int epfd_ = -1;
  int control_fd_ = -1;
  int metrics_fd_ = -1;
  int stop_fd_ = -1;
  uint16_t control_port_ = 0;
  int metrics_port_ = -1;
  std::atomic<bool> stopping_{false};
  RateLimiter loop_warn_limit_;
};

}  // namespace conflux::agg
