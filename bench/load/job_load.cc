// SPDX-License-Identifier: Apache-2.0
// conflux-job-load: many jobs on one confluxd, and many job lifetimes.
//
// Starts one confluxd on 127.0.0.1, then
//   1. twice, `--jobs` concurrent jobs of `--ranks` ranks (one thread and one client engine per
//      rank, all in this process), each running `--iters` AllReduces of mixed sizes, dtypes
//      and ops;
//   2. `--cycles` job lifetimes (join, one AllReduce, leave), `--lanes` at a time;
// checks every result element exactly, and samples the daemon (RSS, open fds, threads from
// /proc; jobs, slots, multicast groups and control connections from /metrics) after a warm-up,
// after each round of phase 1 and after phase 2, each once the daemon is idle again. Reports the
// join latency (Engine::create: the control loop's Join → JoinAck round, both ranks joining
// together) as percentiles. Exits 1 on a wrong element, a failed job, or a leak: fds, threads,
// jobs, slots, groups or connections above the warm-up figures, or RSS after the second round
// or the cycles more than `--max-rss-growth` above its level after the first round.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conflux/client/engine.h"
#include "conflux/common/json_text.h"
#include "util/proc.h"

#ifndef CONFLUX_CONFLUXD_PATH
#define CONFLUX_CONFLUXD_PATH ""
#endif

namespace conflux::tools {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int jobs = 64;
  int ranks = 2;
  int iters = 20;
  int cycles = 1000;
  int lanes = 4;
  int warmup_cycles = 20;
  double max_rss_growth = 0.05;
  std::string confluxd = CONFLUX_CONFLUXD_PATH;
  std::string json;
};

// One AllReduce shape. Inputs are small integers (exact in every dtype used, sums included).
struct Shape {
  size_t count;
  DType dtype;
  Op op;
};

constexpr Shape kShapes[] = {
    {1, DType::kInt32, Op::kSum},       {1000, DType::kFloat32, Op::kSum},
    {4096, DType::kInt32, Op::kMax},    {33000, DType::kFloat32, Op::kSum},
    {777, DType::kInt8, Op::kMin},      {20000, DType::kUint64, Op::kSum},
    {65536, DType::kFloat32, Op::kMax}, {3, DType::kFloat64, Op::kSum},
};

int64_t input(uint64_t job, int rank, size_t i) {
  return static_cast<int64_t>((i * 7 + static_cast<size_t>(rank) * 13 + job * 5) % 9) - 4;
}

// Unsigned inputs are shifted to 0..8.
int64_t shift(DType t) { return t == DType::kUint64 ? 4 : 0; }

int64_t expected(const Shape& s, uint64_t job, int ranks, size_t i) {
  int64_t r = input(job, 0, i) + shift(s.dtype);
  for (int k = 1; k < ranks; ++k) {
    const int64_t v = input(job, k, i) + shift(s.dtype);
    r = s.op == Op::kSum ? r + v : s.op == Op::kMax ? std::max(r, v) : std::min(r, v);
  }
  return r;
}

template <class T>
void fill_t(std::vector<uint8_t>& buf, const Shape& s, uint64_t job, int rank) {
  T* p = reinterpret_cast<T*>(buf.data());
  for (size_t i = 0; i < s.count; ++i) {
    p[i] = static_cast<T>(input(job, rank, i) + shift(s.dtype));
  }
}

template <class T>
uint64_t count_wrong_t(const std::vector<uint8_t>& buf, const Shape& s, uint64_t job, int ranks) {
  const T* p = reinterpret_cast<const T*>(buf.data());
  uint64_t wrong = 0;
  for (size_t i = 0; i < s.count; ++i) {
    wrong += p[i] != static_cast<T>(expected(s, job, ranks, i));
  }
  return wrong;
}

// Calls f(T{}) with the C++ type of a dtype this program uses.
template <class F>
auto with_type(DType t, F&& f) {
  switch (t) {
    case DType::kInt8:
      return f(int8_t{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kUint64:
      return f(uint64_t{});
    case DType::kFloat32:
      return f(float{});
    default:
      return f(double{});  // kShapes uses no other dtype
  }
}

void fill(std::vector<uint8_t>& buf, const Shape& s, uint64_t job, int rank) {
  buf.assign(s.count * dtype_size(s.dtype), 0);
  with_type(s.dtype, [&](auto z) { fill_t<decltype(z)>(buf, s, job, rank); });
}

uint64_t count_wrong(const std::vector<uint8_t>& buf, const Shape& s, uint64_t job, int ranks) {
  return with_type(s.dtype, [&](auto z) { return count_wrong_t<decltype(z)>(buf, s, job, ranks); });
}

struct Totals {
  std::mutex mu;
  std::vector<double> join_ms;
  uint64_t collectives = 0, elements = 0, wrong = 0, failures = 0;
  std::string first_error;

  void fail(const std::string& what) {
    std::lock_guard lock(mu);
    ++failures;
    if (first_error.empty()) first_error = what;
  }
};

// One rank of job `job`: join, run `iters` AllReduces (shapes from `shape0` on), leave.
void run_rank(uint16_t port, uint64_t job, int rank, int ranks, int iters, size_t shape0,
              Totals* t) {
  client::ClientConfig cfg;
  cfg.aggregators = {client::Endpoint{"127.0.0.1", port}};
  cfg.job_key = job;
  cfg.n_workers = static_cast<uint32_t>(ranks);
  cfg.rank = static_cast<uint32_t>(rank);
  cfg.window_slots = 8;
  cfg.bind_addr = "127.0.0.1";
  cfg.socket_buffer_bytes = 1 << 20;
  cfg.spin_us = 0;  // hundreds of engines on two cores: no busy polling
  std::string error;
  const auto t0 = Clock::now();
  auto engine = client::Engine::create(cfg, &error);
  const double join_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!engine) {
    t->fail("job " + std::to_string(job) + " rank " + std::to_string(rank) + ": " + error);
    return;
  }
  uint64_t done = 0, elements = 0, wrong = 0;
  std::vector<uint8_t> send, recv;
  for (int it = 0; it < iters; ++it) {
    const Shape& s = kShapes[(shape0 + static_cast<size_t>(it)) % std::size(kShapes)];
    fill(send, s, job, rank);
    recv.assign(send.size(), 0xA5);
    const uint64_t h = engine->allreduce(send.data(), recv.data(), s.count, s.dtype, s.op);
    if (engine->wait(h, std::chrono::seconds(60), &error) != client::RequestState::kDone) {
      t->fail("job " + std::to_string(job) + " rank " + std::to_string(rank) + ": " + error);
      return;
    }
    ++done;
    elements += s.count;
    wrong += count_wrong(recv, s, job, ranks);
  }
  engine.reset();
  std::lock_guard lock(t->mu);
  t->join_ms.push_back(join_ms);
  t->collectives += done;
  t->elements += elements;
  t->wrong += wrong;
}

// Runs jobs first_job .. first_job + n - 1 at once, each with `ranks` threads.
void run_jobs(uint16_t port, uint64_t first_job, int n, int ranks, int iters, Totals* t) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n * ranks));
  for (int j = 0; j < n; ++j) {
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back(run_rank, port, first_job + static_cast<uint64_t>(j), r, ranks, iters,
                           static_cast<size_t>(j), t);
    }
  }
  for (auto& th : threads) th.join();
}

struct Sample {
  long rss_kb = -1, fds = -1, threads = -1;
  double jobs = -1, slots = -1, groups = -1, connections = -1;
};

long status_field(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

Sample sample(pid_t pid, uint16_t metrics_port) {
  Sample s;
  s.rss_kb = status_field(pid, "VmRSS");
  s.threads = status_field(pid, "Threads");
  std::error_code ec;
  s.fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++s.fds;
  }
  std::string error;
  const std::string m = http_get(metrics_port, "/metrics", &error);
  s.jobs = prometheus_sum(m, "conflux_jobs_active");
  s.slots = prometheus_sum(m, "conflux_slots_in_use");
  s.groups = prometheus_sum(m, "conflux_multicast_groups_in_use");
  s.connections = prometheus_sum(m, "conflux_control_connections");
  return s;
}

// Waits (up to 10 s) for the daemon to forget every job and close every control connection,
// then samples it.
// want_fds >= 0: also for its open descriptors to come down to that many (a metrics request
// of the previous sample may not be closed yet on a loaded host); a leak stays after 10 s.
Sample idle_sample(pid_t pid, uint16_t metrics_port, long want_fds = -1) {
  Sample s = sample(pid, metrics_port);
  for (int i = 0; i < 100 && (s.jobs != 0 || s.slots > 0 || s.connections != 0 ||
                              (want_fds >= 0 && s.fds > want_fds));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = sample(pid, metrics_port);
  }
  return s;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

json::Json sample_json(const Sample& s) {
  return {{"rss_kb", s.rss_kb},
          {"fds", s.fds},
          {"threads", s.threads},
          {"jobs_active", s.jobs},
          {"slots_in_use", s.slots},
          {"multicast_groups", s.groups},
          {"control_connections", s.connections}};
}

int run(const Options& o) {
  const std::string dir = make_temp_dir("conflux-job-load");
  LocalDaemon d;
  const Status st = start_local_confluxd(
      o.confluxd, dir + "/ready",
      {"--threads", "2", "--max-jobs", std::to_string(std::max(64, o.jobs + o.lanes))},
      dir + "/confluxd.out", dir + "/confluxd.err", &d);
  if (!st.ok()) {
    std::fprintf(stderr, "conflux-job-load: %s\n", st.message().c_str());
    if (d.pid > 0) kill(d.pid, SIGKILL);
    return 1;
  }
  uint64_t next_job = 1;
  Totals warm;
  for (int c = 0; c < o.warmup_cycles; c += o.lanes) {
    run_jobs(d.control_port, next_job, o.lanes, o.ranks, 1, &warm);
    next_job += static_cast<uint64_t>(o.lanes);
  }
  const Sample s0 = idle_sample(d.pid, d.metrics_port);

  // Twice: the first round raises the heap to its high-water mark for this many jobs, the
  // second must not raise it further.
  Totals many;
  const auto ta = Clock::now();
  run_jobs(d.control_port, next_job, o.jobs, o.ranks, o.iters, &many);
  next_job += static_cast<uint64_t>(o.jobs);
  const Sample s1a = idle_sample(d.pid, d.metrics_port, s0.fds);
  run_jobs(d.control_port, next_job, o.jobs, o.ranks, o.iters, &many);
  next_job += static_cast<uint64_t>(o.jobs);
  const double many_s = std::chrono::duration<double>(Clock::now() - ta).count();
  const Sample s1 = idle_sample(d.pid, d.metrics_port, s0.fds);

  Totals cyc;
  const auto tb = Clock::now();
  std::vector<std::thread> lanes;
  std::atomic<int> left{o.cycles};
  std::atomic<uint64_t> job_ids{next_job};
  for (int l = 0; l < o.lanes; ++l) {
    lanes.emplace_back([&] {
      while (left.fetch_sub(1) > 0) {
        run_jobs(d.control_port, job_ids.fetch_add(1), 1, o.ranks, 1, &cyc);
      }
    });
  }
  for (auto& th : lanes) th.join();
  const double cyc_s = std::chrono::duration<double>(Clock::now() - tb).count();
  const Sample s2 = idle_sample(d.pid, d.metrics_port, s0.fds);
  const long daemon_alive = kill(d.pid, 0) == 0;
  kill(d.pid, SIGTERM);
  int status = 0;
  if (!wait_exit(d.pid, std::chrono::seconds(10), &status)) {
    kill(d.pid, SIGKILL);
    wait_exit(d.pid, std::chrono::seconds(5), &status);
  }

  // Verdicts.
  std::vector<std::string> problems;
  if (!daemon_alive) problems.push_back("confluxd died");
  for (const Totals* t : {&warm, &many, &cyc}) {
    if (t->wrong) problems.push_back(std::to_string(t->wrong) + " wrong elements");
    if (t->failures) {
      problems.push_back(std::to_string(t->failures) + " ranks failed: " + t->first_error);
    }
  }
  const uint64_t want_many = 2ull * static_cast<uint64_t>(o.jobs) * o.ranks * o.iters;
  const uint64_t want_cyc = static_cast<uint64_t>(o.cycles) * o.ranks;
  if (many.collectives != want_many || cyc.collectives != want_cyc) {
    problems.push_back("collectives completed " + std::to_string(many.collectives) + "/" +
                       std::to_string(want_many) + " and " + std::to_string(cyc.collectives) + "/" +
                       std::to_string(want_cyc));
  }
  for (const Sample* s : {&s1a, &s1, &s2}) {
    const char* when = s == &s1a  ? "after the first round of concurrent jobs"
                       : s == &s1 ? "after the second round of concurrent jobs"
                                  : "after the cycles";
    // At most the warm-up's figure (one fewer fd is a metrics request that was still open
    // when the warm-up was sampled), none of what belongs to a job.
    auto check = [&](const char* what, double got, double want) {
      if (got > want) {
        problems.push_back(std::string(what) + " " + when + ": " + std::to_string(got) +
                           " (after warm-up: " + std::to_string(want) + ")");
      }
    };
    check("open fds", static_cast<double>(s->fds), static_cast<double>(s0.fds));
    check("threads", static_cast<double>(s->threads), static_cast<double>(s0.threads));
    check("jobs active", s->jobs, 0);
    check("slots in use", std::max(0.0, s->slots), 0);
    check("multicast groups", std::max(0.0, s->groups), std::max(0.0, s0.groups));
    check("control connections", s->connections, 0);
  }
  // RSS: against its level after the first round, the high-water mark of this many jobs.
  for (const Sample* s : {&s1, &s2}) {
    const char* when = s == &s1 ? "after the second round of concurrent jobs" : "after the cycles";
    if (s->rss_kb > s1a.rss_kb * (1 + o.max_rss_growth)) {
      problems.push_back(std::string("RSS ") + when + ": " + std::to_string(s->rss_kb) +
                         " kB, more than " + std::to_string(o.max_rss_growth * 100) +
                         " % above the first round's " + std::to_string(s1a.rss_kb) + " kB");
    }
  }

  auto print_sample = [](const char* when, const Sample& s) {
    std::printf("  %-26s %8ld %5ld %7ld %5.0f %6.0f %6.0f %6.0f\n", when, s.rss_kb, s.fds,
                s.threads, s.jobs, s.slots, s.groups, s.connections);
  };
  std::printf(
      "# conflux-job-load: %d concurrent jobs x %d ranks x %d AllReduces, twice; %d cycles, "
      "%d at a time\n",
      o.jobs, o.ranks, o.iters, o.cycles, o.lanes);
  std::printf("  %-26s %8s %5s %7s %5s %6s %6s %6s\n", "confluxd", "RSS kB", "fds", "threads",
              "jobs", "slots", "groups", "conns");
  print_sample("after warm-up", s0);
  print_sample("after concurrent round 1", s1a);
  print_sample("after concurrent round 2", s1);
  print_sample("after join/leave cycles", s2);
  std::printf("  concurrent jobs: %llu collectives, %llu elements, %llu wrong, %.2f s\n",
              static_cast<unsigned long long>(many.collectives),
              static_cast<unsigned long long>(many.elements),
              static_cast<unsigned long long>(many.wrong), many_s);
  std::printf("  cycles: %llu collectives, %llu wrong, %.2f s (%.1f jobs/s)\n",
              static_cast<unsigned long long>(cyc.collectives),
              static_cast<unsigned long long>(cyc.wrong), cyc_s, o.cycles / cyc_s);
  std::printf("  join latency ms (Engine::create), concurrent jobs: p50 %.2f p99 %.2f max %.2f\n",
              percentile(many.join_ms, 0.5), percentile(many.join_ms, 0.99),
              percentile(many.join_ms, 1.0));
  std::printf("  join latency ms (Engine::create), cycles:          p50 %.2f p99 %.2f max %.2f\n",
              percentile(cyc.join_ms, 0.5), percentile(cyc.join_ms, 0.99),
              percentile(cyc.join_ms, 1.0));
  for (const auto& p : problems) std::printf("FAILED: %s\n", p.c_str());
  if (problems.empty()) std::printf("ok: every result exact, confluxd back to idle, no growth\n");

  if (!o.json.empty()) {
    const json::Json j = {
        {"schema", "conflux.job_load.v1"},
        {"jobs", o.jobs},
        {"ranks", o.ranks},
        {"iters", o.iters},
        {"cycles", o.cycles},
        {"lanes", o.lanes},
        {"after_warmup", sample_json(s0)},
        {"after_jobs_round1", sample_json(s1a)},
        {"after_jobs_round2", sample_json(s1)},
        {"after_cycles", sample_json(s2)},
        {"collectives", many.collectives + cyc.collectives},
        {"wrong_elements", many.wrong + cyc.wrong + warm.wrong},
        {"join_ms_p50", json::fixed(percentile(cyc.join_ms, 0.5), 3)},
        {"join_ms_p99", json::fixed(percentile(cyc.join_ms, 0.99), 3)},
        {"join_ms_max", json::fixed(percentile(cyc.join_ms, 1.0), 3)},
        {"concurrent_join_ms_p99", json::fixed(percentile(many.join_ms, 0.99), 3)},
        {"cycles_per_s", json::fixed(o.cycles / cyc_s, 2)},
        {"ok", problems.empty()}};
    std::ofstream(o.json) << json::lines(j);
  }
  if (problems.empty())
    std::filesystem::remove_all(dir);
  else
    std::printf("confluxd's log: %s/confluxd.err\n", dir.c_str());
  return problems.empty() ? 0 : 1;
}

}  // namespace
}  // namespace conflux::tools

int main(int argc, char** argv) {
  conflux::tools::Options o;
  CLI::App app{"conflux-job-load: many concurrent jobs and many job lifetimes on one confluxd"};
  app.add_option("--jobs", o.jobs, "concurrent jobs")->check(CLI::Range(1, 1024));
  app.add_option("--ranks", o.ranks, "ranks per job")->check(CLI::Range(1, 64));
  app.add_option("--iters", o.iters, "AllReduces per concurrent job")->check(CLI::Range(1, 100000));
  app.add_option("--cycles", o.cycles, "job lifetimes (join, one AllReduce, leave)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--lanes", o.lanes, "job lifetimes at a time")->check(CLI::Range(1, 64));
  app.add_option("--warmup-cycles", o.warmup_cycles, "job lifetimes before the first sample");
  app.add_option("--max-rss-growth", o.max_rss_growth, "allowed RSS growth after warm-up");
  app.add_option("--confluxd", o.confluxd, "confluxd to start");
  app.add_option("--json", o.json, "write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  return conflux::tools::run(o);
}
