// SPDX-License-Identifier: Apache-2.0
// The control plane: one thread serving the control TCP port (framed messages, SPEC.md §3)
// and the metrics HTTP port, with epoll and non-blocking sockets.
// ServerHello on accept, Join (with authentication) into the JobManager, Heartbeat/Ack,
// Leave, silence timeouts, Error + close on malformed frames, and at stop Shutdown{0} to every
// connection. Hardened against clients that do not join: a Join deadline that Heartbeats do not
// move, limits on connections in total (no more than RLIMIT_NOFILE leaves room for) and per
// address where a new connection evicts the oldest one that has not joined (one that joined
// is never evicted), the same eviction when accept() runs out of descriptors, no spinning
// when none can be freed, and every warning rate-limited. A gap in its own loop (the process
// was stopped or starved) restarts the workers' silence timers instead of blaming them.
// Created and started by the Daemon; request_stop() may be called from any thread (it only
// writes an eventfd) and run() returns within ~0.3 s.
#pragma once

#include <sys/epoll.h>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/control/connection.h"
#include "aggregator/control/control_counters.h"
#include "aggregator/control/job_manager.h"
#include "aggregator/dataplane/dataplane.h"
#include "aggregator/util/rate_limit.h"
#include "conflux/common/status.h"

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
  // Control connections open at once: max_control_connections, or less where RLIMIT_NOFILE
  // leaves room for fewer (fd_budget.h).
  int64_t max_control_connections() const { return max_conns_; }

  // Thread body: serves until request_stop(), then says Shutdown to everyone and returns.
  void run();
  // Any thread, async-signal-safe.
  void request_stop();

  // Reloading (SIGHUP, `conflux reload`; control/reload.cc). `source` reads the configuration
  // again as at start (file, environment, flags) into a Config: ok, or an error saying why it
  // cannot; `live` is the running configuration (the one this plane was created with), which a
  // reload changes on the control thread only. Before start.
  using ReloadSource = std::function<Status(Config*)>;
  void set_reload_source(ReloadSource source, Config* live);
  // Any thread: the control thread reloads at its next turn (within ~50 ms).
  void request_reload() { reload_requested_.store(true, std::memory_order_release); }

 private:
  ControlPlane(const Config& cfg, JobTable& jobs, const Dataplane& dp);

  // Classes of log lines, each rate-limited on its own (one line per second with the count of
  // the lines held back), so that no client can flood the log and one flood hides no other.
  enum class LogKind : uint8_t {
    kAccept,    // accept() failures, out of descriptors
    kRefused,   // connection limits
    kProtocol,  // malformed frames, unexpected messages
    kJoin,      // failed authentication, Join answers
    kNoJoin,    // no Join by control_join_timeout_ms
    kSilent,    // worker timeouts (kept apart so that floods of the above never hide them)
    kLoop,      // epoll_wait errors, stalls
    kCount
  };

  // control_setup.cc: max_conns_ from max_control_connections and RLIMIT_NOFILE, logged once.
  void limit_connections();

  // control_loop.cc: sockets and event loop
  void handle_events(const epoll_event* evs, int n);
  void accept_all(int listen_fd, Connection::Kind kind);
  // Control connection limits for a new connection from `peer`: at a limit, evicts the oldest
  // connection (of the peer's address, for its limit) that has not joined. False (counted,
  // logged) when every connection that holds the place has joined: the new one is refused.
  bool make_room(const sockaddr_in& peer);
  // Closes the oldest control connection without a Join (from `addr` when given) now, its
  // descriptor included; false when there is none.
  bool evict_oldest(RefuseReason why, const uint32_t* addr);
  bool out_of_fds(int listen_fd, int err);  // true: one waiting connection was shed
  void count_in(const Connection& c);       // a control connection was accepted
  void mark_joined(Connection& c);          // its Join authenticated: no longer evictable
  // Closes and forgets the connection at once (reap(), evict_oldest()).
  void destroy(std::unordered_map<ConnId, Connection>::iterator it);
  void pause_listeners(bool pause);
  void on_stall(Clock::duration gap, Clock::time_point now);
  // True when a line of `kind` may be logged now; *suppressed = lines held back since the last.
  bool may_log(LogKind kind, uint64_t* suppressed);
  void on_readable(Connection& c);
  void on_writable(Connection& c);
  void flush(Connection& c);
  void close_later(Connection& c);
  void reap();
  void tick(Clock::time_point now);
  void shutdown_all();
  void watch_write(Connection& c, bool on);

  // control_messages.cc: framing and message handlers
  void parse_frames(Connection& c);
  void handle(Connection& c, proto::ControlMsg& m);
  void handle_join(Connection& c, const proto::Join& j);
  // Whose secret made the Join's MAC: kSharedTenant (the shared secret, or no authentication
  // configured) or 1 + the index of the tenant in cfg_.tenants, with kPreviousSecret set when
  // it was the secret before a reload (within secret_overlap_s); nullopt when none did.
  std::optional<uint32_t> authenticate(const Connection& c, const proto::Join& j) const;
  void send(Connection& c, const proto::ControlMsg& m);
  void fail(Connection& c, proto::Status s, ControlErrorReason why, const std::string& text);
  void deliver(ConnId conn, const proto::JoinAck& ack) override;
  void end_member(ConnId conn, proto::Status status, const std::string& text) override;
  void send_to(ConnId conn, const proto::ControlMsg& m) override;
  void send_grant(ConnId conn, uint32_t share_mbps, proto::CapacityReason why) override;
  void forget_membership(Connection& c);

  // metrics/metrics_http.cc
  void serve_http(Connection& c);
  // POST /admin/drain, /admin/undrain and /admin/max-mbps/N: the HTTP answer.
  std::string serve_admin(const Connection& c, std::string_view request, std::string_view path);
  // Drained: Joins are refused with shutting_down, ranks waiting in a rendezvous get that
  // answer at once, and every member is told Shutdown{1} and closed (its job ends; the plugin
  // goes on over its other aggregators or the ring). Undrained: Joins are taken again.
  // Returns how many members were told to leave.
  size_t set_draining(bool on);
  // conflux throttle: the cap on result egress becomes `mbps` (0 = none) at once. The
  // dataplane queues pace to it from their next send, the grants are divided again, and every
  // job whose grant changed hears a Capacity update (reason cap_changed). Returns how many
  // jobs were told.
  size_t set_max_mbps(uint32_t mbps);
  // control/reload.cc. Reads the configuration again and applies it when only live keys
  // changed (config_reload.h): the HTTP status (200 applied or nothing to do, 409 refused, 400
  // unreadable) and the text for the log and `conflux reload`.
  std::pair<int, std::string> reload();
  // The previous secrets still valid (secret_overlap_s after a reload changed them).
  bool previous_secrets_valid() const { return Clock::now() < previous_until_; }

  // capacity_.share_mbps from capacity_.line_mbps and capacity_.max_mbps.
  void derive_share();
  // The dataplane's egress cap: max_mbps when set; else, while several jobs are live, the line
  // rate (when known), so that the jobs' paced shares divide the link rather than each job
  // taking what its congestion window wins; else none. Called after every control turn.
  void apply_egress_cap();

  const Config& cfg_;
  JobTable& jobs_;
  const Dataplane& dataplane_;
  ControlCounters counters_;
  std::unique_ptr<UplinkClient> uplink_;  // a leaf of a reduction tree only (cfg.parent)
  MulticastAgreement multicast_;
  JobManager manager_;
  // Sent after JoinAck to workers that ask (kJoinFlagCapacity), share_mbps their job's grant,
  // and again as an update when the grant changes (JobManager::regrant).
  proto::Capacity capacity_;
  int64_t egress_cap_mbps_ = 0;  // what apply_egress_cap() last gave the dataplane
  std::unordered_map<ConnId, Connection> conns_;
  // Open control connections of one peer address, and those of them without a Join (ids in
  // accept order: the oldest first).
  struct AddrConns {
    uint32_t open = 0;
    std::set<ConnId> pre_join;
  };
  std::unordered_map<uint32_t, AddrConns> conns_per_addr_;
  std::set<ConnId> pre_join_;  // every open control connection without a Join, oldest first
  int64_t max_conns_ = 0;      // effective max_control_connections (control_setup.cc)
  std::array<RateLimiter, static_cast<size_t>(LogKind::kCount)> log_limits_;
  int reserve_fd_ = -1;  // spare descriptor, given up to accept-and-close when out of fds
  bool listeners_paused_ = false;
  Clock::time_point resume_listeners_{};
  ConnId next_id_ = 16;  // ids below are the listeners and the stop event
  int epfd_ = -1;
  int control_fd_ = -1;
  int metrics_fd_ = -1;
  int stop_fd_ = -1;
  uint16_t control_port_ = 0;
  int metrics_port_ = -1;
  std::atomic<bool> stopping_{false};
  bool draining_ = false;

  ReloadSource reload_source_;
  Config* live_cfg_ = nullptr;  // == &cfg_, writable (reload only)
  std::atomic<bool> reload_requested_{false};
  // Until when the secrets before the last reload that changed them (JobManager's
  // tenant_secret(t | kPreviousSecret)) still authenticate.
  Clock::time_point previous_until_{};
};

}  // namespace conflux::agg
