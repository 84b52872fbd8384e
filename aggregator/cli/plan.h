// SPDX-License-Identifier: Apache-2.0
// `conflux plan`: capacity planning. From the number of workers, their link rate and the
// aggregator hosts' link rate and cores, the expected AllReduce algbw of each layout: one
// aggregator, k aggregators striped, a reduction tree of L leaves under one root and, with
// max_depth > 2, L leaves under levels of middle aggregators under one root (protocol/SPEC.md
// §7, every fan-out up to max_aggregators hosts),
// next to the ring's ceiling. A bandwidth model (every byte of every
// link, each direction on its own) plus a CPU term per aggregator, and the dataplane cores the
// busiest aggregator host of each layout needs (from bench/capacity's measured Gbit/s per core).
#pragma once

#include <string>
#include <vector>

namespace conflux::cli {

struct PlanInput {
  int workers = 8;
  double worker_gbit = 100;  // each worker's link, Gbit/s
  double agg_gbit = 0;       // each aggregator host's link, Gbit/s (0: worker_gbit)
  double root_gbit = 0;      // a tree root's link (0 = agg_gbit)
  int agg_cores = 0;         // dataplane threads per aggregator (0: as many as it needs)
  double core_gbit = 0;      // contribution Gbit/s one thread reduces (0: the dataplane's measure)
  std::string dataplane = "udp";  // "udp" or "dpdk": whose measured core_gbit is the default
  int max_aggregators = 16;       // layouts using more hosts are not listed
  int max_depth = 2;              // aggregator levels of the deepest tree listed (2..9)
  int top = 0;  // per number of aggregator hosts, only the best this many (0: all)
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
  int cores = 0;       // dataplane cores the busiest aggregator host needs at algbw (ring: 0)
  // The hybrid layout (one aggregator and the worker ring): the share of every AllReduce the
  // ring carries.
  bool hybrid = false;
  double ring_share = 0;
};

// Contribution Gbit/s one dataplane core reduces, as bench/capacity measured it (8 KiB float
// sums; bench/capacity/README.md has the runs): what `--core-gbit` defaults to.
double measured_core_gbit(const std::string& dataplane);

// Every layout that fits max_aggregators, ring first, in order of hosts needed; with in.top,
// of the layouts that need the same number of hosts only the in.top fastest (stable: of equal
// ones, the shallower).
std::vector<PlanRow> plan(const PlanInput& in);
std::string plan_table(const PlanInput& in, const std::vector<PlanRow>& rows);
std::string plan_json(const PlanInput& in, const std::vector<PlanRow>& rows);

}  // namespace conflux::cli
