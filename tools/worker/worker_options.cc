// SPDX-License-Identifier: Apache-2.0
#include "worker/worker_options.h"

#include <CLI/CLI.hpp>

#include "util/size_list.h"

namespace conflux::tools {

namespace {

// "a,b,c" or "all" into values through `parse`.
template <typename T, typename Parse>
bool parse_list(const std::string& text, int n_all, Parse parse, std::vector<T>* out) {
  out->clear();
  if (text == "all") {
    for (int i = 0; i < n_all; ++i) {
      out->push_back(static_cast<T>(i));
    }
    return true;
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const auto v = parse(std::string_view(text).substr(pos, comma - pos));
    if (!v) {
      return false;
    }
    out->push_back(*v);
    pos = comma + 1;
  }
  return !out->empty();
}

}  // namespace

int parse_worker_options(int argc, char** argv, WorkerOptions* o, std::string* message) {
  CLI::App app{
      "conflux-allreduce-worker: one rank of an AllReduce test/benchmark through Conflux "
      "aggregators. Every rank generates every rank's input from --seed and checks every "
      "result element against the contributor-order reference."};
  client::ClientConfig& c = o->client;
  std::string aggs, dtype = "float", op = "sum", counts, sizes, inputs, iter_bytes;
  bool all_tables = false, no_table = false;
  int64_t rto_us = 2000, rto_max_ms = 100, agg_timeout_ms = 5000, stall_ms = 0, hb_ms = 1000,
          join_ms = 30000, connect_ms = 5000;
  app.add_option("--aggregators", aggs, "host:port[,host:port...] of confluxd control ports")
      ->required()
      ->envname("CONFLUX_AGGREGATORS");
  app.add_option("--stripe-weights", c.stripe_weights,
                 "weight of each --aggregators entry, w1,w2,... (default equal): entry i carries "
                 "w_i of every sum(w) packets")
      ->delimiter(',')
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--job-key", c.job_key, "job key, identical on every rank")->default_val(1);
  app.add_option("--nranks", c.n_workers, "number of ranks")->required();
  app.add_option("--rank", c.rank, "this rank")->required();
  app.add_option("--dtype", dtype, "datatypes: list of int8 ... f8e5m2 (nccl-tests names) or all");
  app.add_option("--op", op, "ops: list of sum, prod, max, min, or all");
  app.add_option("--count", counts, "element counts, e.g. 1,7,1023 or 1K:1M:4");
  app.add_option("--sizes", sizes, "sizes in bytes, e.g. 4:256M:4 (overrides --count)");
  app.add_option("--iters", o->iters, "timed iterations per size")->check(CLI::Range(1, 1 << 20));
  app.add_option("--iter-bytes", iter_bytes,
                 "cap iterations per size at this many bytes moved (bench sweeps)");
  app.add_option("--warmup", o->warmup, "untimed iterations per size")->check(CLI::Range(0, 1000));
  app.add_flag("--check,!--no-check", o->check, "verify every result element (default on)");
  app.add_flag("--deterministic", c.deterministic, "ask for deterministic (rank-order) reduction");
  app.add_option("--inputs", inputs, "exact (default) or random (default with --deterministic)")
      ->check(CLI::IsMember({"exact", "random"}));
  app.add_option("--seed", o->seed, "input seed");
  app.add_flag("--in-place", o->in_place, "send buffer == receive buffer");
  app.add_option("--root", o->root,
                 "Reduce to this rank instead of AllReduce: only it receives results, the "
                 "other ranks get acknowledgements and pass no receive buffer")
      ->check(CLI::Range(0, 1023));
  app.add_option("--tree-leaves", o->tree_leaves,
                 "reduction tree: the ranks sit under leaf aggregators in contiguous groups of "
                 "these sizes (e.g. 2,2); --aggregators names this rank's leaf, which is told how "
                 "many ranks it serves, and results are checked against the two-level reduction")
      ->delimiter(',');
  app.add_option("--tree-mid-of", o->tree_mid_of,
                 "depth 3: for each leaf of --tree-leaves, the middle aggregator it sits under "
                 "(0, 1, ...; -1: directly under the root); each rank tells its leaf how many "
                 "ranks its middle aggregator serves. Check with exact inputs (the reference "
                 "is the two-level one)")
      ->delimiter(',');
  app.add_option("--window", c.window_slots, "requested window slots per aggregator");
  app.add_option("--payload", c.payload_bytes, "requested payload bytes per packet");
  app.add_option("--secret", c.secret, "shared secret")->envname("CONFLUX_SECRET");
  app.add_option("--bind", c.bind_addr, "local IPv4 address for UDP");
  app.add_option("--spin-us", c.spin_us, "progress thread busy-poll time");
  app.add_option("--caller-progress", c.caller_progress,
                 "the calling thread does the I/O while it polls (1, the default) or only the "
                 "progress thread does (0)");
  app.add_option("--udp-offload", c.udp_offload, "UDP GSO/GRO where the kernel has them (1/0)");
  app.add_option("--rto-us", rto_us, "initial retransmission timeout (us)");
  app.add_option("--rto-max-ms", rto_max_ms, "maximum retransmission timeout (ms)");
  app.add_option("--aggregator-timeout-ms", agg_timeout_ms, "aggregator silence limit (ms)");
  app.add_option("--stall-timeout-ms", stall_ms, "per-packet result limit, 0 = off (ms)");
  app.add_option("--heartbeat-ms", hb_ms, "heartbeat interval (ms)");
  app.add_option("--join-timeout-ms", join_ms, "join timeout (ms)");
  app.add_option("--connect-timeout-ms", connect_ms, "connect timeout (ms)");
  app.add_option("--fault-drop", c.faults.drop, "drop probability (sent and received)");
  app.add_option("--fault-dup", c.faults.dup, "duplication probability");
  app.add_option("--fault-reorder", c.faults.reorder, "reordering probability");
  app.add_option("--fault-seed", c.faults.seed, "fault injection seed");
  int fault_rank = -1;
  app.add_option("--fault-rank", fault_rank, "the rank the --fault-* settings apply to (-1: all)");
  app.add_option("--fault-multicast-drop", c.faults.multicast_drop,
                 "drop probability of datagrams received on multicast groups (1: none heard)");
  app.add_option("--multicast", c.multicast, "multicast result delivery: auto, on, off")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, client::MulticastMode>{{"auto", client::MulticastMode::kAuto},
                                                       {"on", client::MulticastMode::kOn},
                                                       {"off", client::MulticastMode::kOff}},
          CLI::ignore_case));
  app.add_option("--json", o->json_path, "write a JSON report to this file");
  app.add_flag("--all-tables", all_tables, "every rank prints its table (default: rank 0)");
  app.add_flag("--no-table", no_table, "print no table");
  app.add_option("--timeout-s", o->timeout_s, "give up on a request after this long");
  app.add_option("--pause-ms", o->pause_ms,
                 "idle this long after each timed iteration, the job still joined (a training "
                 "step's compute; not counted in the time)")
      ->check(CLI::Range(0, 3600000));
  app.add_option("--log-level", o->log_level, "engine log level: debug, info, warn, error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    const int rc = app.exit(e, out, err);
    *message = out.str() + err.str();
    return rc == 0 ? 0 : 2;
  }
  std::string err;
  if (!client::parse_endpoints(aggs, &c.aggregators, &err)) {
    *message = "--aggregators: " + err;
    return 2;
  }
  if (!parse_list(dtype, kNumDTypes, parse_dtype, &o->dtypes) ||
      !parse_list(op, kNumOps, parse_op, &o->ops)) {
    *message = "unknown --dtype or --op '" + dtype + "' / '" + op + "'";
    return 2;
  }
  if (!iter_bytes.empty()) {
    const auto v = parse_size(iter_bytes);
    if (!v) {
      *message = "--iter-bytes: bad size '" + iter_bytes + "'";
      return 2;
    }
    o->iter_bytes = *v;
  }
  std::vector<uint64_t> list;
  if (!sizes.empty()) {
    if (!parse_size_list(sizes, &list, &err)) {
      *message = "--sizes: " + err;
      return 2;
    }
    o->sizes_in_bytes = true;
    o->counts = list;
  } else if (!counts.empty()) {
    if (!parse_size_list(counts, &o->counts, &err)) {
      *message = "--count: " + err;
      return 2;
    }
  } else {
    o->counts = {1 << 20};
  }
  if (inputs.empty()) {
    o->inputs = c.deterministic ? InputKind::kRandom : InputKind::kExact;
  } else {
    o->inputs = inputs == "random" ? InputKind::kRandom : InputKind::kExact;
  }
  c.rto_initial = std::chrono::microseconds(rto_us);
  c.rto_max = std::chrono::milliseconds(rto_max_ms);
  c.aggregator_timeout = std::chrono::milliseconds(agg_timeout_ms);
  c.stall_timeout = std::chrono::milliseconds(stall_ms);
  c.heartbeat_interval = std::chrono::milliseconds(hb_ms);  // the engine caps it
  c.join_timeout = std::chrono::milliseconds(join_ms);
  c.connect_timeout = std::chrono::milliseconds(connect_ms);
  size_t my_leaf = 0;  // index of this rank's leaf in --tree-leaves
  if (!o->tree_leaves.empty()) {
    uint32_t first = 0, mine = 0;
    size_t leaf = 0;
    for (uint32_t n : o->tree_leaves) {
      if (n == 0) {
        *message = "--tree-leaves: a leaf serves at least one rank";
        return 2;
      }
      if (c.rank >= first && c.rank < first + n) {
        mine = n;
        my_leaf = leaf;
      }
      first += n;
      ++leaf;
    }
    if (first != c.n_workers) {
      *message = "--tree-leaves must add up to --nranks";
      return 2;
    }
    c.served_ranks.assign(c.aggregators.size(), mine);
  }
  if (!o->tree_mid_of.empty()) {
    if (o->tree_mid_of.size() != o->tree_leaves.size()) {
      *message = "--tree-mid-of needs one entry per leaf of --tree-leaves";
      return 2;
    }
    const int my_mid = o->tree_mid_of[my_leaf];
    if (my_mid >= 0) {
      uint32_t under_mid = 0;  // ranks under this rank's middle aggregator
      for (size_t l = 0; l < o->tree_leaves.size(); ++l) {
        if (o->tree_mid_of[l] == my_mid) under_mid += o->tree_leaves[l];
      }
      c.served_up_ranks.assign(c.aggregators.size(), {under_mid});
    }
  }
  o->table = !no_table && (all_tables || c.rank == 0);
  if (fault_rank >= 0 && static_cast<uint32_t>(fault_rank) != c.rank) {
    c.faults = client::FaultInjection{};
  }
  if (o->root >= 0 && static_cast<uint32_t>(o->root) >= c.n_workers) {
    *message = "--root " + std::to_string(o->root) + " is not a rank (--nranks " +
               std::to_string(c.n_workers) + ")";
    return 2;
  }
  if (const Status v = client::validate(c); !v.ok()) {
    *message = v.message();
    return 2;
  }
  return -1;
}

}  // namespace conflux::tools
