// SPDX-License-Identifier: Apache-2.0
// confluxd as an object: the job table, the dataplane and the control plane, wired together.
// Used by main() and by in-process tests. All methods from one owning thread except
// request_stop(), which any thread (or a signal handler) may call.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/control/control_plane.h"
#include "aggregator/dataplane/dataplane.h"
#include "aggregator/engine/job_table.h"
#include "conflux/common/status.h"

namespace conflux::agg {

class Daemon {
 public:
  // Opens and binds every socket. nullptr + *err on failure (e.g. a port in use).
  static std::unique_ptr<Daemon> create(const Config& cfg, std::string* err);
  ~Daemon();  // stop() + wait()

  // Starts the dataplane and control threads and writes cfg.ready_file. Ok, or the error of
  // the step that failed.
  Status start();
  // Asks everything to stop (async-signal-safe). wait() then returns within ~0.5 s.
  void request_stop();
  // Blocks until the control plane has said Shutdown and every thread has ended.
  void wait();
  // Reloading (SIGHUP): `source` reads the configuration again as at start; the running one
  // is this daemon's. Before start().
  void set_reload_source(ControlPlane::ReloadSource source) {
    control_->set_reload_source(std::move(source), &cfg_);
  }
  // Any thread: the control thread reloads within ~50 ms (ControlPlane::reload()).
  void request_reload() { control_->request_reload(); }

  uint16_t control_port() const { return control_->control_port(); }
  int metrics_port() const { return control_->metrics_port(); }
  std::vector<uint16_t> data_ports() const { return dataplane_->ports(); }
  const Dataplane& dataplane() const { return *dataplane_; }
  const ControlCounters& control_counters() const { return control_->counters(); }
  // Effective max_control_connections (lowered to what RLIMIT_NOFILE allows).
  int64_t max_control_connections() const { return control_->max_control_connections(); }

 private:
  explicit Daemon(const Config& cfg);

  Config cfg_;
  std::unique_ptr<JobTable> jobs_;
  std::unique_ptr<Dataplane> dataplane_;
  std::unique_ptr<ControlPlane> control_;
  std::thread control_thread_;
  bool started_ = false;
};

// Writes `control_port=N\nmetrics_port=M\ndata_ports=a,b\npid=P\n` to `path` atomically
// (temporary file + rename). metrics_port is -1 when disabled. Ok, or system_error.
Status write_ready_file(const std::string& path, uint16_t control_port, int metrics_port,
                        const std::vector<uint16_t>& data_ports);

// Configures the default spdlog logger (stderr, "[confluxd]" prefix) at `level`.
void setup_logging(const std::string& level);

}  // namespace conflux::agg
