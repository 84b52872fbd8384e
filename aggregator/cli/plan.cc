#include "aggregator/cli/plan.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

namespace conflux::cli {
namespace {

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

PlanRow row(const PlanInput& in, std::string layout, int aggs, const Bound& b, double ring) {
  return {std::move(layout), aggs, b.gbit, b.gbit / in.worker_gbit, b.gbit / ring, b.limit};
}

}  // namespace

std::vector<PlanRow> plan(const PlanInput& in) {
  const double n = in.workers;
  const double cpu = in.agg_cores * in.core_gbit;  // contribution Gbit/s one aggregator takes
  std::vector<PlanRow> rows;
  // Ring (reduce-scatter + all-gather): every worker link carries 2(N-1)/N of the data.
  Bound ring;
  ring.cap(n > 1 ? in.worker_gbit * n / (2 * (n - 1)) : in.worker_gbit, "worker link");
  rows.push_back(row(in, "ring", 0, ring, ring.gbit));
  // One level, k aggregators striped: each takes 1/k of every worker's stream, so its link
  // carries N/k streams each way and its threads reduce N/k streams.
  for (int k = 1; k <= in.max_aggregators; k *= 2) {
    Bound b;
    b.cap(in.worker_gbit, "worker link");
    b.cap(k * in.agg_gbit / n, "aggregator link");
    b.cap(k * cpu / n, "aggregator cores");
    rows.push_back(
        row(in, k == 1 ? "1 aggregator" : fmt::format("{} striped", k), k, b, ring.gbit));
  }
  // Trees: L leaves with ceil(N/L) workers each. A leaf's link carries its workers' streams
  // plus one to (from) its parent each way; the root's link carries its children's.
  const double root_gbit = in.root_gbit > 0 ? in.root_gbit : in.agg_gbit;
  const auto leaves = [&](int l) {
    const double per_leaf = std::ceil(n / l);
    Bound b;
    b.cap(in.worker_gbit, "worker link");
    b.cap(in.agg_gbit / (per_leaf + 1), "leaf link");
    b.cap(cpu / per_leaf, "leaf cores");
    return b;
  };
  const auto root = [&](Bound& b, int children) {
    b.cap(root_gbit / children, "root link");
    b.cap(cpu / children, "root cores");
  };
  // Depth 2: the L leaves under one root.
  for (int l = 2; l + 1 <= in.max_aggregators && l < in.workers; ++l) {
    Bound b = leaves(l);
    root(b, l);
    rows.push_back(row(in, fmt::format("tree {} leaves + root", l), l + 1, b, ring.gbit));
  }
  if (in.max_depth < 3) return rows;
  // Depth 3: M middle aggregators with f leaves each (L = M f leaves), one root. A middle
  // one's link carries its f leaves' streams plus one to (from) the root; the root's M.
  for (int m = 2; 3 * m + 1 <= in.max_aggregators; ++m) {
    for (int f = 2; m * f + m + 1 <= in.max_aggregators && m * f < in.workers; ++f) {
      const int l = m * f;
      Bound b = leaves(l);
      b.cap(in.agg_gbit / (f + 1), "middle link");
      b.cap(cpu / f, "middle cores");
      root(b, m);
      rows.push_back(
          row(in, fmt::format("tree {} leaves + {} mid + root", l, m), l + m + 1, b, ring.gbit));
    }
  }
  return rows;
}

std::string plan_table(const PlanInput& in, const std::vector<PlanRow>& rows) {
  std::string out = fmt::format(
      "# {} workers @ {:g} Gbit/s; aggregators @ {:g} Gbit/s (tree root @ {:g}), {} cores x {:g} "
      "Gbit/s\n",
      in.workers, in.worker_gbit, in.agg_gbit, in.root_gbit > 0 ? in.root_gbit : in.agg_gbit,
      in.agg_cores, in.core_gbit);
  out += fmt::format("{:<30} {:>5} {:>12} {:>8} {:>8}  {}\n", "layout", "aggs", "algbw Gbit/s",
                     "of link", "vs ring", "limited by");
  for (const PlanRow& r : rows) {
    out += fmt::format("{:<30} {:>5} {:>12.3f} {:>8.2f} {:>8.2f}  {}\n", r.layout, r.aggregators,
                       r.algbw_gbit, r.of_link, r.vs_ring, r.limit);
  }
  return out;
}

std::string plan_json(const PlanInput& in, const std::vector<PlanRow>& rows) {
  std::string out = fmt::format(
      "{{\"workers\": {}, \"worker_gbit\": {}, \"agg_gbit\": {}, \"root_gbit\": {}, "
      "\"agg_cores\": {}, \"core_gbit\": {}, \"layouts\": [",
      in.workers, in.worker_gbit, in.agg_gbit, in.root_gbit > 0 ? in.root_gbit : in.agg_gbit,
      in.agg_cores, in.core_gbit);
  for (size_t i = 0; i < rows.size(); ++i) {
    const PlanRow& r = rows[i];
    out += fmt::format(
        "{}{{\"layout\": \"{}\", \"aggregators\": {}, \"algbw_gbit\": {}, \"of_link\": {}, "
        "\"vs_ring\": {}, \"limit\": \"{}\"}}",
        i ? ", " : "", r.layout, r.aggregators, r.algbw_gbit, r.of_link, r.vs_ring, r.limit);
  }
  return out + "]}\n";
}

}  // namespace conflux::cli
