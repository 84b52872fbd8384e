// SPDX-License-Identifier: Apache-2.0
#include "aggregator/cli/plan.h"

#include <algorithm>
#include <cmath>

#include "conflux/common/json_text.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace conflux::cli {

double measured_core_gbit(const std::string& dataplane) {
  // bench/capacity/capacity.py on a 2-vCPU AMD EPYC VM (TSC 2.6 GHz), 2026-11-28/29, the lower
  // ends of its runs: the DPDK lcore's busy cycles per 8 KiB contribution, saturated (backlog
  // mode, every poll a full burst: medians 27-40 Gbit/s, the VM's spread), and
  // confluxd's CPU-s per GB on loopback with unicast fan-out to 4 workers (22-26 Gbit/s; the
  // kernel's copies in and out are most of it).
  return dataplane == "dpdk" ? 28 : 22;
}

namespace {

double agg_gbit(const PlanInput& in) { return in.agg_gbit > 0 ? in.agg_gbit : in.worker_gbit; }

double core_gbit(const PlanInput& in) {
  return in.core_gbit > 0 ? in.core_gbit : measured_core_gbit(in.dataplane);
}

// The smallest of the candidate rates, and the name of the one that binds.
struct Bound {
  double gbit = 1e300;
  std::string limit;
  void cap(double g, const char* what) {
    if (g < gbit) {
      gbit = g;
      limit = what;
    }
  }
};

// `streams`: the most contribution streams one aggregator host of the layout reduces.
PlanRow row(const PlanInput& in, std::string layout, int aggs, const Bound& b, double ring,
            double streams) {
  const int cores =
      streams > 0 ? static_cast<int>(std::ceil(streams * b.gbit / core_gbit(in) - 1e-9)) : 0;
  return {std::move(layout),
          aggs,
          b.gbit,
          b.gbit / in.worker_gbit,
          b.gbit / ring,
          b.limit,
          std::max(cores, streams > 0 ? 1 : 0)};
}

// One aggregator and the worker ring at once (the plugin's hybrid split): a share f of every
// AllReduce goes around the ring, which costs each worker link c = 2(N-1)/N bytes per byte,
// the rest through the aggregator, which costs the worker link 1 and the aggregator 1 / A (A:
// its own algbw bound, from its link and cores, without the worker link's). The worker link
// then needs f c + (1 - f) and the aggregator (1 - f) L / A link-times per byte; the best f
// makes them equal, 1 - f = c / (L / A - 1 + c) (collnet/split.h's auto split), and the algbw
// is L / (f c + 1 - f).
PlanRow hybrid(const PlanInput& in, double ring) {
  const double n = in.workers, c = 2 * (n - 1) / n, l = in.worker_gbit;
  Bound agg;  // the aggregator's own bound, the worker link left out
  const double cpu = in.agg_cores > 0 ? in.agg_cores * core_gbit(in) : 1e300;
  agg.cap(in.agg_gbit / n, "aggregator link");
  agg.cap(cpu / n, "aggregator cores");
  const double through = std::min(1.0, c / (l / agg.gbit - 1 + c));
  const double f = 1 - through;
  Bound b;
  b.cap(l / (f * c + 1 - f), "worker link");
  PlanRow r = row(in, "1 aggregator + ring (hybrid)", 1, b, ring, n * through);
  r.hybrid = true;
  r.ring_share = f;
  if (f > 0) r.limit = fmt::format("worker link and {}, ring share {:.3f}", agg.limit, f);
  return r;
}

// The ring, then for each number of aggregator hosts the `top` fastest layouts that need it
// (equal ones in the order they came), by hosts ascending.
std::vector<PlanRow> best_per_host_count(std::vector<PlanRow> rows, size_t top) {
  std::stable_sort(rows.begin(), rows.end(), [](const PlanRow& a, const PlanRow& b) {
    if (a.aggregators != b.aggregators) return a.aggregators < b.aggregators;
    return a.algbw_gbit > b.algbw_gbit;
  });
  std::vector<PlanRow> kept;
  size_t same = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    same = i > 0 && rows[i].aggregators == rows[i - 1].aggregators ? same + 1 : 0;
    if (rows[i].aggregators == 0 || same < top) kept.push_back(std::move(rows[i]));
  }
  return kept;
}

}  // namespace

std::vector<PlanRow> plan(const PlanInput& given) {
  PlanInput in = given;
  in.agg_gbit = agg_gbit(given);
  const double n = in.workers;
  // Contribution Gbit/s one aggregator's cores take; without a core count, no limit.
  const double cpu = in.agg_cores > 0 ? in.agg_cores * core_gbit(in) : 1e300;
  std::vector<PlanRow> rows;
  // Ring (reduce-scatter + all-gather): every worker link carries 2(N-1)/N of the data.
  Bound ring;
  ring.cap(n > 1 ? in.worker_gbit * n / (2 * (n - 1)) : in.worker_gbit, "worker link");
  rows.push_back(row(in, "ring", 0, ring, ring.gbit, 0));
  // One level, k aggregators striped: each takes 1/k of every worker's stream, so its link
  // carries N/k streams each way and its threads reduce N/k streams.
  for (int k = 1; k <= in.max_aggregators; k *= 2) {
    Bound b;
    b.cap(in.worker_gbit, "worker link");
    b.cap(k * in.agg_gbit / n, "aggregator link");
    b.cap(k * cpu / n, "aggregator cores");
    rows.push_back(
        row(in, k == 1 ? "1 aggregator" : fmt::format("{} striped", k), k, b, ring.gbit, n / k));
    if (k == 1 && n > 1) rows.push_back(hybrid(in, ring.gbit));
  }
  // Trees, described by their fan-outs from the root down: the root has fanout[0] children,
  // each of those fanout[1], and so on; the last level's nodes are the leaves, ceil(N/L)
  // workers each. A node's link carries its children's streams plus one to (from) its parent
  // each way; the root's link carries its children's only. With results straight down, a
  // leaf's link carries its workers' streams in and one partial out, no results (when its
  // parent has no more children than it sends straight down for); its parent sends the same
  // number of result streams as before, to the leaves' groups. Every level reduces its
  // children's streams on its cores.
  const double root_gbit = in.root_gbit > 0 ? in.root_gbit : in.agg_gbit;
  const auto tree = [&](const std::vector<int>& fanout) {
    int nodes = 1, leaves = 1;
    for (int f : fanout) nodes += leaves *= f;
    const double per_leaf = std::ceil(n / leaves);
    Bound b;
    b.cap(in.worker_gbit, "worker link");
    const bool direct = in.direct_results && fanout.back() <= PlanInput::kMaxDirectChildren;
    b.cap(in.agg_gbit / (per_leaf + (direct ? 0 : 1)), "leaf link");
    b.cap(cpu / per_leaf, "leaf cores");
    for (size_t i = 1; i < fanout.size(); ++i) {
      b.cap(in.agg_gbit / (fanout[i] + 1), "middle link");
      b.cap(cpu / fanout[i], "middle cores");
    }
    b.cap(root_gbit / fanout[0], "root link");
    b.cap(cpu / fanout[0], "root cores");
    // "tree 8 leaves + root", "tree 8 leaves + 4 + 2 mid + root": middle levels bottom up.
    std::string name = fmt::format("tree {} leaves", leaves);
    if (fanout.size() > 1) {
      std::vector<int> mid;
      for (int i = static_cast<int>(fanout.size()) - 2, count = leaves; i >= 0; --i) {
        mid.push_back(count /= fanout[i + 1]);
      }
      name += fmt::format(" + {} mid", fmt::join(mid, " + "));
    }
    double busiest = std::max<double>(per_leaf, fanout[0]);
    for (size_t i = 1; i < fanout.size(); ++i) busiest = std::max<double>(busiest, fanout[i]);
    rows.push_back(row(in, name + " + root", nodes, b, ring.gbit, busiest));
  };
  // Every fan-out vector of each depth (each fan-out >= 2, fewer leaves than workers, at most
  // max_aggregators hosts), shallow trees first, each depth in lexicographic order.
  std::vector<int> fanout;
  const auto grow = [&](auto&& self, int depth, int nodes, int leaves) -> void {
    if (static_cast<int>(fanout.size()) + 1 == depth) {
      tree(fanout);
      return;
    }
    for (int f = 2; nodes + leaves * f <= in.max_aggregators && leaves * f < in.workers; ++f) {
      fanout.push_back(f);
      self(self, depth, nodes + leaves * f, leaves * f);
      fanout.pop_back();
    }
  };
  for (int depth = 2; depth <= in.max_depth; ++depth) grow(grow, depth, 1, 1);
  if (in.top > 0) rows = best_per_host_count(std::move(rows), static_cast<size_t>(in.top));
  return rows;
}

std::string plan_table(const PlanInput& in, const std::vector<PlanRow>& rows) {
  const std::string cores =
      in.agg_cores > 0 ? fmt::format("{} cores", in.agg_cores) : std::string("cores as needed");
  std::string out = fmt::format(
      "# {} workers @ {:g} Gbit/s; aggregators @ {:g} Gbit/s (tree root @ {:g}), {} x {:g} "
      "Gbit/s ({}{}){}\n",
      in.workers, in.worker_gbit, agg_gbit(in), in.root_gbit > 0 ? in.root_gbit : agg_gbit(in),
      cores, core_gbit(in), in.dataplane, in.core_gbit > 0 ? ", given" : ", measured",
      in.direct_results ? "; tree results straight down" : "");
  out += fmt::format("{:<36} {:>5} {:>12} {:>8} {:>8} {:>10}  {}\n", "layout", "aggs",
                     "algbw Gbit/s", "of link", "vs ring", "cores/host", "limited by");
  for (const PlanRow& r : rows) {
    out += fmt::format("{:<36} {:>5} {:>12.3f} {:>8.2f} {:>8.2f} {:>10}  {}\n", r.layout,
                       r.aggregators, r.algbw_gbit, r.of_link, r.vs_ring,
                       r.cores > 0 ? std::to_string(r.cores) : "-", r.limit);
  }
  return out;
}

std::string plan_json(const PlanInput& in, const std::vector<PlanRow>& rows) {
  json::Json layouts = json::Json::array();
  for (const PlanRow& r : rows) {
    json::Json row = {{"layout", r.layout},
                      {"aggregators", r.aggregators},
                      {"algbw_gbit", json::shortest(r.algbw_gbit)},
                      {"of_link", json::shortest(r.of_link)},
                      {"vs_ring", json::shortest(r.vs_ring)},
                      {"limit", r.limit},
                      {"cores", r.cores}};
    if (r.hybrid) row["ring_share"] = json::shortest(r.ring_share);
    layouts.push_back(std::move(row));
  }
  const json::Json out = {
      {"workers", in.workers},
      {"worker_gbit", json::shortest(in.worker_gbit)},
      {"agg_gbit", json::shortest(agg_gbit(in))},
      {"root_gbit", json::shortest(in.root_gbit > 0 ? in.root_gbit : agg_gbit(in))},
      {"agg_cores", in.agg_cores},
      {"core_gbit", json::shortest(core_gbit(in))},
      {"dataplane", in.dataplane},
      {"tree_results", in.direct_results ? "direct" : "leaf"},
      {"layouts", std::move(layouts)}};
  return json::one_line(out) + "\n";
}

}  // namespace conflux::cli
