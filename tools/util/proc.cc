// SPDX-License-Identifier: Apache-2.0
#include "util/proc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "conflux/common/http_client.h"

extern char** environ;

namespace conflux::tools {

pid_t spawn(const std::vector<std::string>& argv, const std::string& stdout_path,
            const std::string& stderr_path, std::string* error) {
  std::vector<char*> args;
  for (const std::string& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&fa, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    if (error) {
      *error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    }
    return -1;
  }
  return pid;
}

bool wait_exit(pid_t pid, std::chrono::milliseconds timeout, int* status) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (status) {
        *status = st;
      }
      return true;
    }
    if (r < 0 && errno != EINTR) {
      if (status) {
        *status = 0;
      }
      return true;  // not our child or already reaped
    }
    if (std::chrono::steady_clock::now() >= end) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    return "exit " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

std::map<std::string, std::string> wait_ready_file(const std::string& path, pid_t daemon,
                                                   std::chrono::milliseconds timeout,
                                                   std::string* error) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::map<std::string, std::string> kv;
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) {
        kv[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
    if (kv.count("control_port") && kv.count("pid")) {
      return kv;
    }
    int st = 0;
    if (daemon > 0 && ::waitpid(daemon, &st, WNOHANG) == daemon) {
      if (error) {
        *error = "confluxd exited before it was ready (" + describe_status(st) + ")";
      }
      return {};
    }
    if (std::chrono::steady_clock::now() >= end) {
      if (error) {
        *error = "confluxd wrote no ready file " + path + " in time";
      }
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<std::string> local_confluxd_argv(const std::string& confluxd,
                                             const std::string& ready_file,
                                             const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {confluxd, "--listen",     "127.0.0.1", "--control-port",
                                   "0",      "--data-port",  "0",         "--metrics-port",
                                   "0",      "--ready-file", ready_file};
  if (std::find(extra.begin(), extra.end(), "--log-level") == extra.end()) {
    argv.insert(argv.end(), {"--log-level", "warn"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

Status start_local_confluxd(const std::string& confluxd, const std::string& ready_file,
                            const std::vector<std::string>& extra, const std::string& stdout_path,
                            const std::string& stderr_path, LocalDaemon* d) {
  ::unlink(ready_file.c_str());
  std::string err;
  d->pid = spawn(local_confluxd_argv(confluxd, ready_file, extra), stdout_path, stderr_path, &err);
  if (d->pid < 0) {
    return system_error(err);
  }
  auto kv = wait_ready_file(ready_file, d->pid, std::chrono::seconds(10), &err);
  if (kv.empty()) {
    return unavailable(err);
  }
  d->control_port = static_cast<uint16_t>(std::stoi(kv["control_port"]));
  d->metrics_port = static_cast<uint16_t>(std::stoi(kv["metrics_port"]));
  d->data_ports.clear();
  std::stringstream ports(kv["data_ports"]);
  for (std::string p; std::getline(ports, p, ',');) {
    d->data_ports.push_back(static_cast<uint16_t>(std::stoi(p)));
  }
  return {};
}

std::string http_get(uint16_t port, const std::string& path, std::string* error) {
  std::string err;
  std::optional<std::string> body = http::get("127.0.0.1", port, path, 2000, &err);
  if (!body && error != nullptr) *error = "metrics: " + err;
  return body.value_or("");
}

namespace {

// Calls fn(labels, value) for every sample line of metric `name`.
template <typename Fn>
bool for_samples(const std::string& text, const std::string& name, Fn fn) {
  std::istringstream in(text);
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind(name, 0) != 0) {
      continue;
    }
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') {
      continue;
    }
    std::string labels;
    size_t vpos = name.size();
    if (next == '{') {
      const size_t close = line.find('}', name.size());
      if (close == std::string::npos) {
        continue;
      }
      labels = line.substr(name.size() + 1, close - name.size() - 1);
      vpos = close + 1;
    }
    found = true;
    fn(labels, std::strtod(line.c_str() + vpos, nullptr));
  }
  return found;
}

}  // namespace

double prometheus_sum(const std::string& text, const std::string& name,
                      const std::string& label_filter) {
  double sum = 0;
  const bool found = for_samples(text, name, [&](const std::string& labels, double v) {
    if (label_filter.empty() || labels.find(label_filter) != std::string::npos) {
      sum += v;
    }
  });
  return found ? sum : -1;
}

std::map<std::string, double> prometheus_by_label(const std::string& text, const std::string& name,
                                                  const std::string& label) {
  std::map<std::string, double> out;
  for_samples(text, name, [&](const std::string& labels, double v) {
    const std::string key = label + "=\"";
    const size_t p = labels.find(key);
    if (p == std::string::npos) {
      return;
    }
    const size_t q = labels.find('"', p + key.size());
    out[labels.substr(p + key.size(), q - p - key.size())] += v;
  });
  return out;
}

double host_idle_cpu_seconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0;
  if (!(f >> cpu >> user >> nice >> system >> idle >> iowait) || cpu != "cpu") {
    return -1;
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  return hz > 0 ? static_cast<double>(idle + iowait) / static_cast<double>(hz) : -1;
}

HostCpuWindow::HostCpuWindow()
    : idle0_(host_idle_cpu_seconds()),
      cpus_(::sysconf(_SC_NPROCESSORS_ONLN)),
      t0_(std::chrono::steady_clock::now()) {}

void HostCpuWindow::stop() {
  idle1_ = host_idle_cpu_seconds();
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double HostCpuWindow::per_gb(double gbytes) const {
  if (idle0_ < 0 || idle1_ < idle0_ || cpus_ <= 0 || seconds_ < kMinHostCpuWindowS || gbytes <= 0) {
    return -1;
  }
  const double busy = static_cast<double>(cpus_) * seconds_ - (idle1_ - idle0_);
  return std::max(busy, 0.0) / gbytes;
}

std::string host_cpu_line(double cpu_s_per_gb, double window_s) {
  char buf[160];
  if (window_s < kMinHostCpuWindowS) {
    std::snprintf(buf, sizeof buf,
                  "# host cpu: n/a (the timed iterations took %.0f ms; /proc/stat counts 10 ms "
                  "units)",
                  window_s * 1e3);
  } else if (cpu_s_per_gb < 0) {
    std::snprintf(buf, sizeof buf, "# host cpu: n/a (/proc/stat unreadable)");
  } else {
    std::snprintf(buf, sizeof buf,
                  "# host cpu: %.2f CPU-s per GB AllReduced (timed iterations, whole host)",
                  cpu_s_per_gb);
  }
  return buf;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string make_temp_dir(const std::string& prefix) {
  const char* t = std::getenv("TMPDIR");
  std::string templ = std::string(t && *t ? t : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  return ::mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
}

std::string self_dir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) {
    return ".";
  }
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

}  // namespace conflux::tools
