// SPDX-License-Identifier: Apache-2.0
// `conflux plan --fabric direct`: in-network aggregation on a direct-connect network, where
// every host has a few ports wired point to point (an optical circuit switch, a fixed torus)
// and an aggregation device reaches only the hosts its own ports are wired to.
//
// Every AllReduce is split into shares, each carried by one *topology* that spans all N
// workers and runs a whole AllReduce of its share on its own ports:
//   ring          the workers in a ring, 2 ports each, both directions (two counter-rotating
//                 rings of half the share): algbw = link * N / (N - 1);
//   segment ring  a ring in which groups of up to E_d - 2 workers ("members") sit behind a
//                 device each: a member has 1 port (to its device), the device sits in the ring
//                 (2 ports) and sums its members first; the others have 2 ports as in a ring.
//                 Bound by the members' one link: algbw = link;
//   tree          a reduction tree of devices over all workers, 1 port each:
//                 1 + ceil((N - E_d) / (E_d - 2)) devices (1 when N <= E_d): algbw = link.
// Shares run side by side, each over its own ports, so the plan's algbw is the sum of its
// topologies' (each share in proportion to its topology's algbw). A device's dataplane cores
// bound its topology too: algbw <= cores * core_gbit / (streams it sums).
//
// The selection is a mixed-integer program (GLPK): at most min(ports) topologies; per worker
// port class, the ports used (2 per ring, 1 per tree, 1 less per membership) fit the class's
// ports; the devices fit the budget. Workers with the same number of ports are
// interchangeable under a circuit switch, so the program counts memberships per class and the
// circuits spread them round-robin: the program is exact for these topologies and its size does
// not grow with N.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace conflux::cli::direct {

// Input the planner cannot plan for (no topology fits, bad port classes): the message names
// the reason and is meant for the operator.
struct PlanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PortClass {
  int ports = 0;  // ports of each worker of the class
  int count = 0;  // workers in the class
};

struct Input {
  std::vector<PortClass> workers;  // workers 0.. in class order
  double link_gbit = 100;          // every link's rate, Gbit/s, each direction
  int device_ports = 4;            // E_d, ports of each aggregation device
  int device_budget = 0;           // devices available
  int agg_cores = 0;               // dataplane threads per device (0: as many as it needs)
  double core_gbit = 0;            // contribution Gbit/s one thread sums (0: the dataplane's)
  std::string dataplane = "udp";
  double time_limit_s = 60;  // the solver's limit; then the best plan found and its gap
  // A ring's directions: 2, both ways on its ports (the algbw above); 1, one way (a ring that
  // only sends to its next worker, as Conflux's worker ring: half of it).
  int ring_directions = 2;
  int max_rings = -1;      // the most rings a plan may hold; -1 as many as the ports allow
  unsigned kinds = 0b111;  // bit Kind: the topology kinds a plan may use (parse_kinds)

  int worker_count() const;
  int min_ports() const;
};

// "8" (every worker 8 ports) or "8x1000,4x24" (1000 workers of 8 ports, 24 of 4), for
// `workers` workers in all. Throws PlanError naming what is wrong.
std::vector<PortClass> parse_ports(const std::string& spec, int workers);

enum class Kind { kRing, kSegmentRing, kTree };
const char* kind_name(Kind k);
// "ring,segment,tree" (any of them, comma-separated) -> Input::kinds. Throws PlanError naming
// an unknown kind, or for none.
unsigned parse_kinds(const std::string& spec);
inline bool allows(const Input& in, Kind k) { return (in.kinds >> static_cast<int>(k)) & 1u; }

struct Topology {
  Kind kind = Kind::kRing;
  int devices = 0;  // devices it needs
  int members = 0;  // segment ring: workers behind its devices
  int depth = 0;    // tree: device levels
  double algbw_gbit = 0;
  double share = 0;  // of every AllReduce
};

// One end of a circuit: worker or device `id`, its port `port` (both from 0).
struct End {
  bool device = false;
  int id = 0;
  int port = 0;
};
struct Circuit {
  End a, b;
  int topology = 0;  // index into Plan::topologies
};

struct Plan {
  int budget = 0;
  std::vector<Topology> topologies;
  std::vector<Circuit> circuits;
  int devices = 0;
  double algbw_gbit = 0;
  bool optimal = false;  // proved optimal within the time limit
  double gap = 0;        // relative gap to the solver's bound (0 when optimal)
  double solve_s = 0;
};

// Closed-form figures the plan is compared with: every port pair a ring, and every port a
// tree.
struct Baselines {
  int rings = 0;
  double ring_gbit = 0;
  int trees = 0;
  int tree_devices = 0;
  double tree_gbit = 0;
};

// Devices one reduction tree over n workers needs with device_ports ports per device.
int tree_devices(int n, int device_ports);

// The best plan within in.device_budget. Throws PlanError when no topology fits (ports < 2
// and too few devices for a tree) or the input is invalid; every circuit it returns is checked
// against the ports (a worker's or a device's port is used once).
Plan solve(const Input& in);
Baselines baselines(const Input& in);
// The best plan for every budget 0..in.device_budget, one per budget (their circuits only
// with `circuits`: at N = 1024 they take megabytes per plan).
std::vector<Plan> pareto(const Input& in, bool circuits = false);

// What runs a plan on Conflux: every rank's plugin environment (the same on every rank).
// Each tree is one stripe, its device's control endpoint `devices[d]` in CONFLUX_AGGREGATORS;
// the trees' shares become CONFLUX_STRIPE_WEIGHTS (per mille of their sum), the ring's share
// CONFLUX_RING_FRACTION. Throws PlanError for what the plugin does not run: a segment ring, a
// tree of several devices, more than one ring, a two-way ring (plan with --ring-directions 1),
// or fewer endpoints than the plan's devices.
struct PluginEnv {
  std::string aggregators;     // CONFLUX_AGGREGATORS (empty: ring only)
  std::string stripe_weights;  // CONFLUX_STRIPE_WEIGHTS
  double ring_fraction = 0;    // CONFLUX_RING_FRACTION
};
PluginEnv plugin_env(const Input& in, const Plan& p, const std::vector<std::string>& devices);
std::string plugin_env_text(const PluginEnv& e);

std::string plan_table(const Input& in, const Plan& p, bool circuits);
std::string pareto_table(const Input& in, const std::vector<Plan>& plans);
std::string plan_json(const Input& in, const Plan& p, const std::vector<Plan>* pareto_rows,
                      const PluginEnv* env = nullptr);

}  // namespace conflux::cli::direct
