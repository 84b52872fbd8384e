// SPDX-License-Identifier: Apache-2.0
// conflux-allreduce-worker: one rank of an AllReduce run through Conflux aggregators.
// Prints an nccl-tests style table (rank 0 by default), checks every element, writes an
// optional JSON report. Exit code: 0 all correct, 1 wrong results or an engine error,
// 2 usage error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "conflux/client/engine.h"
#include "conflux/common/status.h"
#include "worker/worker_data.h"
#include "worker/worker_options.h"
#include "worker/worker_report.h"

namespace conflux::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Waits for one request. Ok; unavailable with the engine's error; timed_out after timeout_s.
Status wait_for(client::Engine& e, uint64_t id, double timeout_s) {
  const auto t0 = Clock::now();
  const auto limit = std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::string err;
    // The engine polls (busy-poll time, ClientConfig::spin_us) and then sleeps until the
    // request finishes or the slice ends: no sleep of our own adds its timer slack.
    const client::RequestState st = e.wait(id, std::chrono::milliseconds(1), &err);
    if (st == client::RequestState::kDone) {
      return {};
    }
    if (st == client::RequestState::kError) {
      return unavailable(err);
    }
    if (Clock::now() - t0 > limit) {
      return timed_out("request did not finish within the --timeout-s limit");
    }
  }
}

// One AllReduce (or Reduce to o.root) and its wait_for.
Status run_once(client::Engine& e, const void* send, void* recv, uint64_t count,
                const DataSpec& spec, const WorkerOptions& o) {
  if (o.root < 0) {
    return wait_for(e, e.allreduce(send, recv, count, spec.dtype, spec.op), o.timeout_s);
  }
  const auto root = static_cast<uint32_t>(o.root);
  void* out = root == o.client.rank ? recv : nullptr;  // only the root has a receive buffer
  return wait_for(e, e.reduce(send, out, count, spec.dtype, spec.op, root), o.timeout_s);
}

void print_header(const WorkerOptions& o) {
  std::printf("# conflux-allreduce-worker: %u ranks, %s, %s inputs, %d iters%s\n",
              o.client.n_workers, o.client.deterministic ? "deterministic" : "arrival order",
              o.inputs == InputKind::kExact ? "exact" : "random", o.iters,
              o.root < 0 ? "" : (", Reduce to rank " + std::to_string(o.root)).c_str());
  std::printf("#%13s %12s %8s %6s %11s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

void print_row(const ResultRow& r) {
  std::printf(" %13llu %12llu %8s %6s %11.2f %12.3f %12.3f %8s\n",
              static_cast<unsigned long long>(r.bytes), static_cast<unsigned long long>(r.count),
              std::string(dtype_name(r.dtype)).c_str(), std::string(op_name(r.op)).c_str(),
              r.time_us, r.algbw, r.busbw, r.checked ? std::to_string(r.wrong).c_str() : "N/A");
  std::fflush(stdout);
}

void write_json(const WorkerOptions& o, const std::vector<ResultRow>& rows, const client::Engine* e,
                const std::string& error, bool ok) {
  const client::EngineStats stats = e != nullptr ? e->stats() : client::EngineStats{};
  std::ofstream(o.json_path) << worker_report_json(o, rows, e != nullptr ? &stats : nullptr, error,
                                                   ok);
}

// Runs warmup + timed iterations of one size, then one checked run. Ok, or the first error.
Status run_size(client::Engine& e, const WorkerOptions& o, const DataSpec& spec, ResultRow* row,
                std::string* first_wrong) {
  const uint64_t count = row->count;
  std::unique_ptr<uint8_t[]> send(new uint8_t[row->bytes]);
  std::unique_ptr<uint8_t[]> recv_store(o.in_place ? nullptr : new uint8_t[row->bytes]);
  uint8_t* recv = o.in_place ? send.get() : recv_store.get();
  generate(spec, o.client.rank, 0, count, send.get());
  int iters = o.iters, warmup = o.warmup;
  if (o.iter_bytes > 0) {
    iters = static_cast<int>(std::clamp<uint64_t>(o.iter_bytes / row->bytes, 1, o.iters));
    warmup = std::min(warmup, iters);
  }
  for (int i = 0; i < warmup; ++i) {
    CFX_TRY(run_once(e, send.get(), recv, count, spec, o));
  }
  Clock::duration busy{};
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    CFX_TRY(run_once(e, send.get(), recv, count, spec, o));
    busy += Clock::now() - t0;
    if (o.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.pause_ms));
  }
  const double secs = std::chrono::duration<double>(busy).count() / iters;
  row->time_us = secs * 1e6;
  row->algbw = static_cast<double>(row->bytes) / secs / 1e9;
  const double n = o.client.n_workers;
  row->busbw = row->algbw * 2.0 * (n - 1) / n;
  if (!o.check) {
    return {};
  }
  // One more run, untimed, on fresh inputs (in place overwrote them) and a poisoned output.
  generate(spec, o.client.rank, 0, count, send.get());
  if (!o.in_place) {
    poison(recv, row->bytes);
  }
  CFX_TRY(run_once(e, send.get(), recv, count, spec, o));
  if (o.root >= 0 && static_cast<uint32_t>(o.root) != o.client.rank) {
    // Not the root: the result is not ours, and the engine must not have written it.
    row->wrong = o.in_place ? 0 : poisoned_mismatches(recv, row->bytes);
    if (row->wrong > 0 && first_wrong != nullptr) {
      *first_wrong = "a non-root rank's receive buffer was written";
    }
  } else {
    row->wrong = verify(spec, recv, count, first_wrong);
  }
  row->checked = true;
  return {};
}

int run(const WorkerOptions& o) {
  const std::string who = "rank " + std::to_string(o.client.rank);
  client::ClientConfig cfg = o.client;
  const client::LogLevel min_level = o.log_level == "debug"  ? client::LogLevel::kDebug
                                     : o.log_level == "info" ? client::LogLevel::kInfo
                                     : o.log_level == "warn" ? client::LogLevel::kWarn
                                                             : client::LogLevel::kError;
  cfg.log = [who, min_level](client::LogLevel l, std::string_view m) {
    if (l < min_level) {
      return;
    }
    std::fprintf(stderr, "%s: %.*s\n", who.c_str(), static_cast<int>(m.size()), m.data());
  };
  std::vector<ResultRow> rows;
  std::string err;
  auto engine = client::Engine::create(cfg, &err);
  if (!engine) {
    std::fprintf(stderr, "%s: error: %s\n", who.c_str(), err.c_str());
    if (!o.json_path.empty()) {
      write_json(o, rows, nullptr, err, false);
    }
    return 1;
  }
  if (o.table) {
    print_header(o);
  }
  size_t total_wrong = 0, checked = 0;
  std::string first_wrong;
  for (size_t c = 0; c < o.dtypes.size() * o.ops.size() && err.empty(); ++c) {
    DataSpec spec;
    spec.dtype = o.dtypes[c / o.ops.size()];
    spec.op = o.ops[c % o.ops.size()];
    spec.inputs = o.inputs;
    spec.seed = o.seed + c;
    spec.n_ranks = o.client.n_workers;
    spec.leaves = o.tree_leaves;
    spec.bitwise = o.inputs == InputKind::kExact || o.client.deterministic;
    for (uint64_t size : o.counts) {
      ResultRow row;
      row.dtype = spec.dtype;
      row.op = spec.op;
      const size_t es = dtype_size(spec.dtype);
      row.count = o.sizes_in_bytes ? std::max<uint64_t>(1, size / es) : size;
      row.bytes = row.count * es;
      std::string first;
      if (const Status st = run_size(*engine, o, spec, &row, &first); !st.ok()) {
        err = st.message();
        std::fprintf(stderr, "%s: error: allreduce of %llu B %s %s failed: %s\n", who.c_str(),
                     static_cast<unsigned long long>(row.bytes),
                     std::string(dtype_name(spec.dtype)).c_str(),
                     std::string(op_name(spec.op)).c_str(), err.c_str());
        break;
      }
      checked += row.checked ? 1 : 0;
      total_wrong += row.wrong;
      if (row.wrong > 0 && first_wrong.empty()) {
        first_wrong = std::to_string(row.bytes) + " B " + std::string(dtype_name(spec.dtype)) +
                      " " + std::string(op_name(spec.op)) + ": " + first;
      }
      rows.push_back(row);
      if (o.table) {
        print_row(row);
      }
    }
  }
  const bool ok = err.empty() && total_wrong == 0;
  if (!first_wrong.empty()) {
    std::fprintf(stderr, "%s: wrong results: %zu elements, first at %s\n", who.c_str(), total_wrong,
                 first_wrong.c_str());
  }
  if (o.table || !ok) {
    if (ok && o.check) {
      std::printf("verified: all %zu results correct\n", checked);
    } else if (ok) {
      std::printf("not verified (--no-check)\n");
    } else {
      std::printf("FAILED: %s\n", err.empty() ? "wrong results" : err.c_str());
    }
  }
  if (!o.json_path.empty()) {
    write_json(o, rows, engine.get(), err, ok);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace conflux::tools

int main(int argc, char** argv) {
  conflux::tools::WorkerOptions o;
  std::string msg;
  const int rc = conflux::tools::parse_worker_options(argc, argv, &o, &msg);
  if (rc >= 0) {
    std::fputs(msg.c_str(), rc == 0 ? stdout : stderr);
    if (!msg.empty() && msg.back() != '\n') {
      std::fputc('\n', rc == 0 ? stdout : stderr);
    }
    return rc;
  }
  return conflux::tools::run(o);
}
