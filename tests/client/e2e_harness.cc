// SPDX-License-Identifier: Apache-2.0
#include "e2e_harness.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "tests/common/wait_until.h"
#include "util/proc.h"

namespace conflux::client::e2e {

using tools::describe_status;
using tools::read_file;
using tools::spawn;
using tools::wait_exit;

std::string temp_dir() { return tools::make_temp_dir("conflux-e2e-"); }
std::string worker_path() { return CONFLUX_WORKER_PATH; }
std::string launcher_path() { return CONFLUX_LAUNCH_PATH; }

DaemonProcess::~DaemonProcess() {
  if (pid > 0) {
    ::kill(pid, SIGCONT);
    ::kill(pid, SIGKILL);
    wait_exit(pid, std::chrono::seconds(5), nullptr);
  }
}

std::string DaemonProcess::start(const std::string& dir, const std::vector<std::string>& extra) {
  log = dir + "/confluxd.log";
  std::vector<std::string> args = {"--threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  tools::LocalDaemon d;
  const conflux::Status st =
      tools::start_local_confluxd(CONFLUX_CONFLUXD_PATH, dir + "/ready", args, log, log, &d);
  if (!st.ok()) {
    pid = -1;
    return d.pid > 0 ? st.message() + "\n" + read_file(log) : st.message();
  }
  pid = d.pid;
  control_port = d.control_port;
  metrics_port = d.metrics_port;
  data_ports = d.data_ports;
  return "";
}

std::string DaemonProcess::stop() {
  if (pid <= 0) {
    return "not running";
  }
  ::kill(pid, SIGCONT);
  ::kill(pid, SIGTERM);
  int st = 0;
  std::string out;
  if (!wait_exit(pid, std::chrono::seconds(10), &st)) {
    ::kill(pid, SIGKILL);
    wait_exit(pid, std::chrono::seconds(5), &st);
    out = "ignored SIGTERM";
  } else {
    out = describe_status(st);
  }
  pid = -1;
  return out;
}

double DaemonProcess::packets_in() const { return metric("conflux_dataplane_packets_in_total"); }

double DaemonProcess::metric(const std::string& name, const std::string& labels) const {
  std::string err;
  const std::string m = tools::http_get(metrics_port, "/metrics", &err);
  return m.empty() ? -1 : tools::prometheus_sum(m, name, labels);
}

bool wait_packets_in(const DaemonProcess& d, double n, std::chrono::milliseconds timeout) {
  return test::wait_until([&] { return d.packets_in() >= n; }, timeout,
                          std::chrono::milliseconds(20));
  return true;
}

std::string explain(const std::vector<WorkerResult>& rs) {
  std::string s;
  for (size_t r = 0; r < rs.size(); ++r) {
    s += "rank " + std::to_string(r) + (rs[r].timed_out ? " timed out" : "") + ":\n" + rs[r].out +
         rs[r].err;
  }
  return s;
}

std::vector<pid_t> start_workers(const std::string& dir, const std::string& aggregators, uint32_t n,
                                 const std::vector<std::string>& args) {
  return start_workers(
      dir, [&](uint32_t) { return aggregators; }, n, args);
}

std::vector<pid_t> start_workers(const std::string& dir,
                                 const std::function<std::string(uint32_t)>& aggregators_of,
                                 uint32_t n, const std::vector<std::string>& args) {
  std::vector<pid_t> pids;
  const std::string key = std::to_string((static_cast<uint64_t>(::getpid()) << 20) ^
                                         static_cast<uint64_t>(std::rand()));
  for (uint32_t r = 0; r < n; ++r) {
    const std::string base = dir + "/rank" + std::to_string(r);
    std::vector<std::string> argv = {
        worker_path(), "--aggregators",   aggregators_of(r), "--job-key",       key,
        "--nranks",    std::to_string(n), "--rank",          std::to_string(r), "--json",
        base + ".json"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string err;
    pids.push_back(spawn(argv, base + ".out", base + ".err", &err));
  }
  return pids;
}

std::vector<WorkerResult> wait_workers(const std::string& dir, const std::vector<pid_t>& pids,
                                       std::chrono::milliseconds timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<WorkerResult> res(pids.size());
  for (size_t r = 0; r < pids.size(); ++r) {
    WorkerResult& w = res[r];
    if (pids[r] < 0) {
      continue;
    }
    const auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - t0);
    if (!wait_exit(pids[r], std::max(left, std::chrono::milliseconds(1)), &w.status)) {
      w.timed_out = true;
      ::kill(pids[r], SIGKILL);
      wait_exit(pids[r], std::chrono::seconds(5), &w.status);
    }
    w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    w.exited_ok = !w.timed_out && WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
    const std::string base = dir + "/rank" + std::to_string(r);
    w.out = read_file(base + ".out");
    w.err = read_file(base + ".err");
    w.json = read_file(base + ".json");
  }
  return res;
}

std::vector<WorkerResult> run_workers(const std::string& dir, const std::string& aggregators,
                                      uint32_t n, const std::vector<std::string>& args,
                                      std::chrono::milliseconds timeout) {
  return wait_workers(dir, start_workers(dir, aggregators, n, args), timeout);
}

}  // namespace conflux::client::e2e
