// SPDX-License-Identifier: Apache-2.0
// Process and file helpers for the launcher and the end-to-end tests: spawn a child
// with its output in files, wait with a time limit, start a local confluxd and read its
// ready file, fetch
// its Prometheus /metrics over HTTP. POSIX only; no global state.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "conflux/common/status.h"

namespace conflux::tools {

// Starts argv[0] (a path) with argv; stdout/stderr go to the files (created/truncated;
// "" = inherit). Returns the pid, or -1 and *error.
pid_t spawn(const std::vector<std::string>& argv, const std::string& stdout_path,
            const std::string& stderr_path, std::string* error);

// Waits until pid exits or the timeout passes. Returns true and the waitpid status when
// it exited (reaped), false on timeout.
bool wait_exit(pid_t pid, std::chrono::milliseconds timeout, int* status);

// "exit 0", "exit 1", "signal 9 (Killed)" for a waitpid status.
std::string describe_status(int status);

// Waits for confluxd's ready file (key=value lines: control_port, metrics_port,
// data_ports, pid) while checking that `daemon` still runs. Returns the keys, or empty
// and *error.
std::map<std::string, std::string> wait_ready_file(const std::string& path, pid_t daemon,
                                                   std::chrono::milliseconds timeout,
                                                   std::string* error);

// A confluxd on 127.0.0.1 for the tests and benchmarks, on ephemeral ports that it writes to
// its ready file.
struct LocalDaemon {
  pid_t pid = -1;
  uint16_t control_port = 0, metrics_port = 0;
  std::vector<uint16_t> data_ports;  // one per dataplane thread
};

// Its command line: `confluxd --listen 127.0.0.1`, control, data and metrics ports 0,
// `--ready-file ready_file`, `--log-level warn` unless `extra` names a log level, then `extra`.
std::vector<std::string> local_confluxd_argv(const std::string& confluxd,
                                             const std::string& ready_file,
                                             const std::vector<std::string>& extra);

// Removes a ready file left from an earlier run, spawns local_confluxd_argv() with its output
// in the two files and waits up to 10 s for the ready file. Ok; system_error when it cannot
// be spawned; unavailable when it exits or writes no ready file in time. d->pid is the child
// whenever one was started, ready or not (the caller stops it).
Status start_local_confluxd(const std::string& confluxd, const std::string& ready_file,
                            const std::vector<std::string>& extra, const std::string& stdout_path,
                            const std::string& stderr_path, LocalDaemon* d);

// HTTP/1.0 GET http://127.0.0.1:port/path. Returns the body, or "" and *error.
std::string http_get(uint16_t port, const std::string& path, std::string* error);

// Sum of every sample of a Prometheus metric family `name` (all label sets) whose label
// text contains `label_filter` ("" = all). Returns -1 when the metric is absent.
double prometheus_sum(const std::string& text, const std::string& name,
                      const std::string& label_filter = "");

// Samples of `name` grouped by the value of label `label` (e.g. per dataplane thread).
std::map<std::string, double> prometheus_by_label(const std::string& text, const std::string& name,
                                                  const std::string& label);

// CPU seconds the whole host has been idle so far (/proc/stat: idle + iowait), or -1 when
// unreadable. With a tickless idle (NO_HZ) the kernel measures these exactly, while it only
// samples the busy fields (user, system, softirq, ...) at each tick: on a 250 Hz kernel those
// missed 17-35 % of the busy time of a fabric run, more of short wake-ups than of
// long copies. So the busy time of a window is its CPUs x wall time less the idle time.
double host_idle_cpu_seconds();

// /proc/stat reports in 10 ms units: a shorter window than this gets no figure.
inline constexpr double kMinHostCpuWindowS = 0.25;

// The host's busy CPU over a window, from construction to stop(): online CPUs x wall time less
// the idle time. Everything on the host (every rank, confluxd, the kernel's network stack)
// counts. The driver and the fabric baselines open one around their timed iterations.
class HostCpuWindow {
 public:
  HostCpuWindow();
  void stop();
  double seconds() const { return seconds_; }  // wall time of the window
  // Busy CPU seconds per GB moved in the window, or -1: /proc/stat unreadable, or the window
  // shorter than kMinHostCpuWindowS.
  double per_gb(double gbytes) const;

 private:
  double idle0_, idle1_ = -1, seconds_ = 0;
  long cpus_;
  std::chrono::steady_clock::time_point t0_;
};

// The comment line that follows a result row of the driver and the fabric baselines, and that
// bench/fabric/fabric_run.py reads: "# host cpu: 12.34 CPU-s per GB AllReduced (timed
// iterations, whole host)"; "# host cpu: n/a (...)" when the timed iterations took less than
// kMinHostCpuWindowS (window_s) or cpu_s_per_gb < 0 (unreadable).
std::string host_cpu_line(double cpu_s_per_gb, double window_s);

std::string read_file(const std::string& path);
// A fresh directory under $TMPDIR (or /tmp).
std::string make_temp_dir(const std::string& prefix);
// Directory of the running executable (from /proc/self/exe).
std::string self_dir();

}  // namespace conflux::tools
