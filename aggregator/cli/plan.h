// `conflux plan`: capacity planning. From the number of workers, their link rate and the
// aggregator hosts' link rate and cores, the expected AllReduce algbw of each layout: one
// aggregator, k aggregators striped, a reduction tree of L leaves under one root and, with
// max_depth > 2, L leaves under levels of middle aggregators under one root (protocol/SPEC.md
// §7, every fan-out up to max_aggregators hosts),
// next to the ring's ceiling. A bandwidth model (every byte of every
// link, each direction on its own) plus a CPU term per aggregator; no measurement.
#pragma once

#include <string>
#include <vector>

namespace conflux::cli {

struct PlanInput {
  int workers = 8;
  double worker_gbit = 100;  // each worker's link, Gbit/s
  double agg_gbit = 100;     // each aggregator host's link, Gbit/s
  double root_gbit = 0;      // a tree root's link (0 = agg_gbit)
  int agg_cores = 8;         // dataplane threads per aggregator
  double core_gbit = 10;     // contribution bytes one thread reduces per second, Gbit/s
  int max_aggregators = 16;  // layouts using more hosts are not listed
  int max_depth = 2;         // aggregator levels of the deepest tree listed (2..9)
  int top = 0;               // per number of aggregator hosts, only the best this many (0: all)
  // The leaves' tree_results = "direct" (protocol/SPEC.md §7): their parent multicasts their
  // members' results straight to the members, so a leaf's link carries no results (for at
  // most kMaxDirectChildren leaves per parent, as confluxd does).
  bool direct_results = false;
  static constexpr int kMaxDirectChildren = 3;  // aggregator/engine/job.h Job::kMaxDirectChildren
};

struct PlanRow {
  std::string layout;   // "ring", "1 aggregator", "4 striped", "tree 2 leaves + root",
                        // "tree 4 leaves + 2 mid + root", "tree 8 leaves + 4 + 2 mid + root"
  int aggregators = 0;  // aggregator hosts it needs
  double algbw_gbit = 0;
  double of_link = 0;  // algbw / worker link
  double vs_ring = 0;  // algbw / the ring's algbw
  std::string limit;   // what binds: "worker link", "aggregator link", "leaf link", ...
};

// Every layout that fits max_aggregators, ring first, in order of hosts needed; with in.top,
// of the layouts that need the same number of hosts only the in.top fastest (stable: of equal
// ones, the shallower).
std::vector<PlanRow> plan(const PlanInput& in);
std::string plan_table(const PlanInput& in, const std::vector<PlanRow>& rows);
std::string plan_json(const PlanInput& in, const std::vector<PlanRow>& rows);

}  // namespace conflux::cli
