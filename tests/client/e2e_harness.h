// SPDX-License-Identifier: Apache-2.0
// Helpers for the end-to-end tests: a real confluxd process and N real
// conflux-allreduce-worker processes on 127.0.0.1, with their output in a temp dir.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "json_number.h"

namespace conflux::client::e2e {

struct DaemonProcess {
  pid_t pid = -1;
  uint16_t control_port = 0, metrics_port = 0;
  std::vector<uint16_t> data_ports;  // the dataplane threads' UDP ports
  std::string log;

  DaemonProcess() = default;
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess();  // SIGKILL if still running

  // Starts confluxd with ephemeral ports, 2 dataplane threads and `extra` arguments and
  // waits for its ready file. Returns "" or an error.
  std::string start(const std::string& dir, const std::vector<std::string>& extra = {});
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(control_port); }
  // SIGTERM, wait; returns the exit status description ("exit 0").
  std::string stop();
  // Sum of conflux_dataplane_packets_in_total (-1 if unreadable).
  double packets_in() const;
  // Sum of one metric of /metrics over the series whose labels contain `labels` (all when
  // empty; -1 if unreadable).
  double metric(const std::string& name, const std::string& labels = "") const;
};

struct WorkerResult {
  int status = -1;         // waitpid status
  bool exited_ok = false;  // exit code 0
  bool timed_out = false;
  std::string out, err, json;
  double seconds = 0;  // from start to exit
};

// Spawns n workers (rank 0..n-1) with common args plus --aggregators/--nranks/--rank/
// --json; returns the pids. Output goes to dir/rank<r>.{out,err,json}.
std::vector<pid_t> start_workers(const std::string& dir, const std::string& aggregators, uint32_t n,
                                 const std::vector<std::string>& args);
// The same, rank r's --aggregators being aggregators_of(r) (a reduction tree: its leaf).
std::vector<pid_t> start_workers(const std::string& dir,
                                 const std::function<std::string(uint32_t)>& aggregators_of,
                                 uint32_t n, const std::vector<std::string>& args);
// Waits for them (killing any still running after `timeout`) and collects outputs.
std::vector<WorkerResult> wait_workers(const std::string& dir, const std::vector<pid_t>& pids,
                                       std::chrono::milliseconds timeout);
// start + wait.
std::vector<WorkerResult> run_workers(const std::string& dir, const std::string& aggregators,
                                      uint32_t n, const std::vector<std::string>& args,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Waits until `d` has received `n` datagrams (data flows); false after `timeout`.
bool wait_packets_in(const DaemonProcess& d, double n, std::chrono::milliseconds timeout);

// Every worker's output, rank by rank, for a failure message.
std::string explain(const std::vector<WorkerResult>& rs);

std::string temp_dir();
std::string worker_path();
std::string launcher_path();  // "" if the bench tools are not built

}  // namespace conflux::client::e2e
