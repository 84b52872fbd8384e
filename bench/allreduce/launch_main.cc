// SPDX-License-Identifier: Apache-2.0
// conflux-allreduce-launch: runs a local AllReduce test/benchmark end to end. Starts
// `--daemons` confluxd processes on 127.0.0.1 (ephemeral ports, --ready-file), N
// conflux-allreduce-worker processes striped over them, waits for every worker, scrapes
// each daemon's /metrics before and after (packets/s per dataplane thread), stops the
// daemons with SIGTERM and exits non-zero if anything failed. Options after `--` go to
// every worker unchanged. JSON fields: bench/allreduce/README.md.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "conflux/common/json_text.h"
#include "util/proc.h"

#ifndef CONFLUX_CONFLUXD_PATH
#define CONFLUX_CONFLUXD_PATH ""
#endif
#ifndef CONFLUX_WORKER_PATH
#define CONFLUX_WORKER_PATH ""
#endif

namespace conflux::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct Daemon {
  pid_t pid = -1;
  uint16_t control_port = 0, metrics_port = 0;
  std::string log, metrics_before, metrics_after;
};

struct Options {
  uint32_t nranks = 2, daemons = 1, threads = 2;
  bool bench = false, verbose = false;
  std::string json, confluxd = CONFLUX_CONFLUXD_PATH, worker = CONFLUX_WORKER_PATH, log_dir;
  std::vector<std::string> daemon_args, worker_args;
  double timeout_s = 600;
};

void stop_daemons(std::vector<Daemon>& ds, std::string* problems) {
  for (Daemon& d : ds) {
    if (d.pid > 0) {
      ::kill(d.pid, SIGTERM);
    }
  }
  for (size_t i = 0; i < ds.size(); ++i) {
    Daemon& d = ds[i];
    if (d.pid <= 0) {
      continue;
    }
    int st = 0;
    if (!wait_exit(d.pid, std::chrono::seconds(5), &st)) {
      ::kill(d.pid, SIGKILL);
      wait_exit(d.pid, std::chrono::seconds(5), &st);
      *problems += "confluxd " + std::to_string(i) + " ignored SIGTERM; killed\n";
    } else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      *problems += "confluxd " + std::to_string(i) + " ended with " + describe_status(st) +
                   " (log " + d.log + ")\n";
    }
    d.pid = -1;
  }
}

// CPU seconds the daemon used between the two scrapes (process_cpu_seconds_total).
double cpu_seconds(const Daemon& d) {
  return prometheus_sum(d.metrics_after, "process_cpu_seconds_total") -
         prometheus_sum(d.metrics_before, "process_cpu_seconds_total");
}

// Per-thread dataplane packet counters between the two scrapes, as JSON.
json::Json metrics_json(const Daemon& d, double secs) {
  const std::string in = "conflux_dataplane_packets_in_total";
  const std::string out = "conflux_dataplane_packets_out_total";
  auto b_in = prometheus_by_label(d.metrics_before, in, "thread");
  auto a_in = prometheus_by_label(d.metrics_after, in, "thread");
  auto b_out = prometheus_by_label(d.metrics_before, out, "thread");
  auto a_out = prometheus_by_label(d.metrics_after, out, "thread");
  json::Json threads = json::Json::array();
  double total = 0;
  for (const auto& [t, v] : a_in) {
    const double pin = v - b_in[t], pout = a_out[t] - b_out[t];
    total += pin;
    threads.push_back({{"thread", t},
                       {"packets_in", json::sig6(pin)},
                       {"packets_out", json::sig6(pout)},
                       {"packets_in_per_s", json::sig6(pin / secs)},
                       {"packets_out_per_s", json::sig6(pout / secs)}});
  }
  return {{"elapsed_s", json::sig6(secs)},
          {"threads", std::move(threads)},
          {"packets_in_per_s_total", json::sig6(total / secs)},
          {"cpu_s", json::sig6(cpu_seconds(d))}};
}

// A worker's --json report as written (null when there is none, or it is not JSON).
json::Json rank_report(const std::string& path) {
  const std::string text = read_file(path);
  if (text.empty()) return nullptr;
  json::Json report = json::Json::parse(text, nullptr, false);
  if (report.is_discarded()) {
    std::fprintf(stderr, "launch: %s is not JSON; its report is null\n", path.c_str());
    return nullptr;
  }
  return report;
}

int run(const Options& o) {
  const std::string dir = o.log_dir.empty() ? make_temp_dir("conflux-launch-") : o.log_dir;
  if (!o.log_dir.empty()) {
    ::mkdir(dir.c_str(), 0755);  // may exist already
  }
  if (dir.empty() || o.confluxd.empty() || o.worker.empty()) {
    std::fprintf(stderr, "launch: need a log directory, --confluxd and --worker\n");
    return 2;
  }
  std::string problems, err;
  std::vector<Daemon> ds(o.daemons);
  std::string aggregators;
  for (uint32_t a = 0; a < o.daemons; ++a) {
    Daemon& d = ds[a];
    d.log = dir + "/confluxd" + std::to_string(a) + ".log";
    std::vector<std::string> args = {"--threads", std::to_string(o.threads)};
    args.insert(args.end(), o.daemon_args.begin(), o.daemon_args.end());
    LocalDaemon local;
    const Status st = start_local_confluxd(o.confluxd, dir + "/ready" + std::to_string(a), args,
                                           d.log, d.log + ".err", &local);
    d.pid = local.pid;
    if (!st.ok()) {
      std::fprintf(stderr, "launch: confluxd %u: %s\n%s", a, st.message().c_str(),
                   read_file(d.log + ".err").c_str());
      stop_daemons(ds, &problems);
      return 1;
    }
    d.control_port = local.control_port;
    d.metrics_port = local.metrics_port;
    d.metrics_before = http_get(d.metrics_port, "/metrics", &err);
    aggregators += (a ? "," : "") + std::string("127.0.0.1:") + std::to_string(d.control_port);
  }
  const uint64_t job_key =
      std::random_device{}() | (uint64_t{static_cast<uint32_t>(::getpid())} << 32);
  const auto t0 = Clock::now();
  std::vector<pid_t> workers(o.nranks, -1);
  for (uint32_t r = 0; r < o.nranks; ++r) {
    std::vector<std::string> argv = {o.worker,
                                     "--aggregators",
                                     aggregators,
                                     "--job-key",
                                     std::to_string(job_key),
                                     "--nranks",
                                     std::to_string(o.nranks),
                                     "--rank",
                                     std::to_string(r),
                                     "--json",
                                     dir + "/rank" + std::to_string(r) + ".json"};
    if (o.bench) {
      argv.insert(argv.end(), {"--sizes", "4:256M:4", "--iter-bytes", "1G", "--no-check"});
    }
    argv.insert(argv.end(), o.worker_args.begin(), o.worker_args.end());
    const std::string base = dir + "/rank" + std::to_string(r);
    workers[r] = spawn(argv, base + ".out", base + ".err", &err);
    if (workers[r] < 0) {
      problems += err + "\n";
    }
  }
  std::vector<std::string> status(o.nranks, "not started");
  bool ok = problems.empty();
  const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(o.timeout_s));
  for (uint32_t r = 0; r < o.nranks; ++r) {
    if (workers[r] < 0) {
      continue;
    }
    const auto left =
        std::max(std::chrono::milliseconds(1),
                 limit - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0));
    int st = 0;
    if (!wait_exit(workers[r], left, &st)) {
      ::kill(workers[r], SIGKILL);
      wait_exit(workers[r], std::chrono::seconds(5), &st);
      status[r] = "timed out after " + std::to_string(o.timeout_s) + " s";
    } else {
      status[r] = describe_status(st);
    }
    if (status[r] != "exit 0") {
      ok = false;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  for (Daemon& d : ds) {
    d.metrics_after = http_get(d.metrics_port, "/metrics", &err);
  }
  stop_daemons(ds, &problems);
  if (!problems.empty()) {
    ok = false;
  }

  std::fputs(read_file(dir + "/rank0.out").c_str(), stdout);
  for (uint32_t r = 0; r < o.nranks; ++r) {
    if (status[r] != "exit 0" || o.verbose) {
      std::fprintf(stderr, "rank %u: %s\n%s", r, status[r].c_str(),
                   read_file(dir + "/rank" + std::to_string(r) + ".err").c_str());
    }
  }
  if (!problems.empty()) {
    std::fputs(problems.c_str(), stderr);
  }
  for (size_t a = 0; a < ds.size(); ++a) {
    const double pps = prometheus_sum(ds[a].metrics_after, "conflux_dataplane_packets_in_total") -
                       prometheus_sum(ds[a].metrics_before, "conflux_dataplane_packets_in_total");
    std::printf(
        "# confluxd %zu: %.0f packets in, %.0f packets/s over %u thread(s) (%.1f s), %.2f CPU-s\n",
        a, pps, pps / secs, o.threads, secs, cpu_seconds(ds[a]));
  }
  if (!o.json.empty()) {
    json::Json ranks = json::Json::array();
    for (uint32_t r = 0; r < o.nranks; ++r) {
      ranks.push_back({{"rank", r},
                       {"status", status[r]},
                       {"report", rank_report(dir + "/rank" + std::to_string(r) + ".json")}});
    }
    json::Json aggregators = json::Json::array();
    for (const Daemon& d : ds) aggregators.push_back(metrics_json(d, secs));
    const json::Json report = {{"ok", ok},
                               {"nranks", o.nranks},
                               {"daemons", o.daemons},
                               {"threads", o.threads},
                               {"elapsed_s", json::sig6(secs)},
                               {"log_dir", ok && o.log_dir.empty() ? "" : dir},
                               {"ranks", std::move(ranks)},
                               {"aggregators", std::move(aggregators)}};
    std::ofstream(o.json) << json::compact(report) << "\n";
  }
  if (ok && o.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else if (!ok) {
    std::fprintf(stderr, "launch: logs in %s\n", dir.c_str());
  }
  std::printf("%s\n", ok ? "launch: all ranks succeeded" : "launch: FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace conflux::tools

int main(int argc, char** argv) {
  conflux::tools::Options o;
  // Everything after "--" goes to the workers.
  std::vector<std::string> own;
  bool rest = false;
  for (int i = 1; i < argc; ++i) {
    if (!rest && std::string(argv[i]) == "--") {
      rest = true;
    } else if (rest) {
      o.worker_args.push_back(argv[i]);
    } else {
      own.push_back(argv[i]);
    }
  }
  CLI::App app{
      "conflux-allreduce-launch: confluxd + N conflux-allreduce-worker processes on "
      "127.0.0.1. Worker options go after `--`."};
  app.add_option("--nranks,-n", o.nranks, "worker processes")->check(CLI::Range(1, 1024));
  app.add_option("--daemons", o.daemons, "confluxd processes (the job is striped)")
      ->check(CLI::Range(1, 16));
  app.add_option("--threads", o.threads, "dataplane threads per confluxd");
  app.add_flag("--bench", o.bench, "sweep 4 B .. 256 MiB by x4 (no check; add --check after --)");
  app.add_option("--json", o.json, "write the merged JSON report here");
  app.add_option("--confluxd", o.confluxd, "confluxd binary")->envname("CONFLUX_CONFLUXD");
  app.add_option("--worker", o.worker, "conflux-allreduce-worker binary");
  app.add_option("--daemon-arg", o.daemon_args, "extra confluxd argument (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--log-dir", o.log_dir, "keep logs and reports here (default: a temp dir)");
  app.add_option("--timeout-s", o.timeout_s, "kill workers still running after this long");
  app.add_flag("--verbose,-v", o.verbose, "print every rank's stderr");
  std::reverse(own.begin(), own.end());
  try {
    app.parse(own);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return conflux::tools::run(o);
}
