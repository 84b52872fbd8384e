// SPDX-License-Identifier: Apache-2.0
// conflux plan --fabric direct: small cases whose optimum is worked out by hand, the circuits
// of every plan checked as a graph (each topology spans every worker, no port used twice),
// the baselines, the Pareto rows and the inputs no plan fits.
#include "aggregator/cli/direct_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

namespace conflux::cli::direct {
namespace {

Input input(const std::string& ports, int n, int device_ports, int budget) {
  Input in;
  in.workers = parse_ports(ports, n);
  in.link_gbit = 1;
  in.device_ports = device_ports;
  in.device_budget = budget;
  return in;
}

std::multiset<std::string> kinds(const Plan& p) {
  std::multiset<std::string> out;
  for (const Topology& t : p.topologies) out.insert(kind_name(t.kind));
  return out;
}

// Every circuit's ends exist and no port is used twice; per topology, the circuits form a
// ring through every worker (each node two links, one cycle) or a tree (connected, no cycle)
// whose leaves are all the workers, with every device's ports within device_ports.
void check_circuits(const Input& in, const Plan& p) {
  const int n = in.worker_count();
  std::vector<int> ports_of;
  for (const PortClass& c : in.workers) ports_of.insert(ports_of.end(), c.count, c.ports);
  std::set<std::tuple<bool, int, int>> used;
  for (const Circuit& c : p.circuits) {
    for (const End& e : {c.a, c.b}) {
      EXPECT_TRUE(used.insert({e.device, e.id, e.port}).second)
          << (e.device ? "device " : "worker ") << e.id << " port " << e.port << " twice";
      EXPECT_LT(e.port, e.device ? in.device_ports : ports_of[e.id]);
      if (!e.device) {
        EXPECT_LT(e.id, n);
      }
    }
  }
  for (size_t t = 0; t < p.topologies.size(); ++t) {
    // Nodes: workers 0..n-1, devices n + id.
    std::map<int, std::vector<int>> adj;
    int links = 0;
    for (const Circuit& c : p.circuits) {
      if (c.topology != static_cast<int>(t)) continue;
      const int a = c.a.device ? n + c.a.id : c.a.id, b = c.b.device ? n + c.b.id : c.b.id;
      adj[a].push_back(b);
      adj[b].push_back(a);
      ++links;
    }
    std::set<int> seen{0};
    std::vector<int> todo{0};
    while (!todo.empty()) {
      const int v = todo.back();
      todo.pop_back();
      for (int w : adj[v]) {
        if (seen.insert(w).second) todo.push_back(w);
      }
    }
    EXPECT_EQ(seen.size(), adj.size()) << "topology " << t << " is not connected";
    int devices = 0;
    for (const auto& [v, nbrs] : adj) devices += v >= n;
    EXPECT_EQ(devices, p.topologies[t].devices) << "topology " << t;
    EXPECT_EQ(static_cast<int>(adj.size()) - devices, n) << "topology " << t << " misses workers";
    const Kind kind = p.topologies[t].kind;
    if (kind == Kind::kTree) {
      EXPECT_EQ(links, static_cast<int>(adj.size()) - 1) << "a tree has no cycle";
      for (int w = 0; w < n; ++w) EXPECT_EQ(adj[w].size(), 1u) << "worker " << w;
      continue;
    }
    // A ring: every ring node two links; a member one (to its device), its device two more.
    int members = 0;
    for (int w = 0; w < n; ++w) {
      ASSERT_TRUE(adj[w].size() == 1 || adj[w].size() == 2) << "worker " << w;
      members += adj[w].size() == 1;
    }
    EXPECT_EQ(members, p.topologies[t].members);
    if (kind == Kind::kRing) {
      EXPECT_EQ(members, 0);
    }
  }
}

struct Case {
  std::string ports;
  int n, device_ports, budget;
  double algbw;  // link 1
  int devices;
  std::multiset<std::string> kinds;
};

TEST(DirectPlan, HandWorkedOptima) {
  const std::vector<Case> cases = {
      // Two ports: a ring (N/(N-1)); two 4-port devices make two one-device trees.
      {"2", 4, 4, 0, 4.0 / 3, 0, {"ring"}},
      {"2", 4, 4, 1, 4.0 / 3, 0, {"ring"}},
      {"2", 4, 4, 2, 2.0, 2, {"tree", "tree"}},
      // Three ports: the third port idles until a tree (1 + ceil(4/2) = 3 devices) fits.
      {"3", 8, 4, 2, 8.0 / 7, 0, {"ring"}},
      {"3", 8, 4, 3, 8.0 / 7 + 1, 3, {"ring", "tree"}},
      {"3", 8, 3, 5, 8.0 / 7, 0, {"ring"}},  // 3-port devices: a tree needs 6
      {"3", 8, 3, 6, 8.0 / 7 + 1, 6, {"ring", "tree"}},
      // Four ports: two rings beat a ring and a tree; two trees replace a ring.
      {"4", 8, 4, 3, 16.0 / 7, 0, {"ring", "ring"}},
      {"4", 8, 4, 6, 8.0 / 7 + 2, 6, {"ring", "tree", "tree"}},
      {"4", 8, 4, 11, 8.0 / 7 + 2, 6, {"ring", "tree", "tree"}},
      {"4", 8, 4, 12, 4.0, 12, {"tree", "tree", "tree", "tree"}},
      // Two workers short of a port: one device takes them as members of a segment ring.
      {"4x6,3x2", 8, 4, 0, 8.0 / 7, 0, {"ring"}},
      {"4x6,3x2", 8, 4, 1, 8.0 / 7 + 1, 1, {"ring", "segment ring"}},
      {"4x6,3x2", 8, 4, 7, 3.0, 7, {"segment ring", "tree", "tree"}},
      {"4x6,3x2", 8, 4, 12, 3.0, 7, {"segment ring", "tree", "tree"}},
      // Five workers, one 5-port device: a ring and a one-device tree.
      {"3", 5, 5, 1, 5.0 / 4 + 1, 1, {"ring", "tree"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "ports " << c.ports << " N " << c.n << " E_d "
                                      << c.device_ports << " budget " << c.budget);
    const Input in = input(c.ports, c.n, c.device_ports, c.budget);
    const Plan p = solve(in);
    EXPECT_NEAR(p.algbw_gbit, c.algbw, 1e-9);
    EXPECT_EQ(p.devices, c.devices);
    EXPECT_EQ(kinds(p), c.kinds);
    EXPECT_TRUE(p.optimal);
    EXPECT_EQ(p.gap, 0);
    double shares = 0;
    for (const Topology& t : p.topologies) {
      shares += t.share;
      EXPECT_NEAR(t.share, t.algbw_gbit / p.algbw_gbit, 1e-12);
    }
    EXPECT_NEAR(shares, 1, 1e-12);
    check_circuits(in, p);
  }
}

TEST(DirectPlan, TreeDeviceCount) {
  EXPECT_EQ(tree_devices(4, 4), 1);
  EXPECT_EQ(tree_devices(5, 4), 2);  // root: 3 workers + a device of 2
  EXPECT_EQ(tree_devices(8, 4), 3);
  EXPECT_EQ(tree_devices(128, 4), 63);  // (N - 1) / (E - 2), as a tree over N needs
  EXPECT_EQ(tree_devices(1024, 8), 171);
  EXPECT_EQ(tree_devices(8, 3), 6);
}

TEST(DirectPlan, BudgetZeroIsTheRingAndAFullBudgetTheTree) {
  for (const auto& [ports, n, ed] : std::vector<std::tuple<std::string, int, int>>{
           {"4", 16, 4}, {"5", 12, 6}, {"6", 32, 8}, {"3", 9, 5}}) {
    SCOPED_TRACE(ports + " x " + std::to_string(n));
    Input in = input(ports, n, ed, 0);
    const Baselines b = baselines(in);
    EXPECT_NEAR(solve(in).algbw_gbit, b.ring_gbit, 1e-9);
    EXPECT_EQ(solve(in).devices, 0);
    in.device_budget = b.tree_devices;
    const Plan full = solve(in);
    EXPECT_NEAR(full.algbw_gbit, b.tree_gbit, 1e-9);
    EXPECT_EQ(full.devices, b.tree_devices);
    check_circuits(in, full);
  }
}

TEST(DirectPlan, ParetoIsMonotoneAndWithinEachBudget) {
  const Input in = input("4x20,3x4", 24, 4, 40);
  const std::vector<Plan> rows = pareto(in, /*circuits=*/true);
  ASSERT_EQ(rows.size(), 41u);
  for (size_t b = 0; b < rows.size(); ++b) {
    EXPECT_EQ(rows[b].budget, static_cast<int>(b));
    EXPECT_LE(rows[b].devices, rows[b].budget);
    if (b > 0) {
      EXPECT_GE(rows[b].algbw_gbit, rows[b - 1].algbw_gbit - 1e-9);
    }
    check_circuits(in, rows[b]);
  }
  EXPECT_GT(rows.back().algbw_gbit, rows.front().algbw_gbit);
}

TEST(DirectPlan, CpuBoundsTheDeviceTopologies) {
  Input in = input("3", 8, 4, 3);
  in.agg_cores = 1;
  in.core_gbit = 2;  // a tree device sums 4 streams: 0.5 of the 1 Gbit/s link
  const Plan p = solve(in);
  EXPECT_NEAR(p.algbw_gbit, 8.0 / 7 + 0.5, 1e-9);
}

TEST(DirectPlan, LargeInstanceSolvesToOptimality) {
  // N = 1024 with 8 ports, budget two trees: three rings on six ports and a tree on each of
  // the other two. The program's size does not grow with N.
  const Input in = input("8", 1024, 8, 2 * 171);
  const Plan p = solve(in);
  EXPECT_TRUE(p.optimal);
  EXPECT_NEAR(p.algbw_gbit, 3 * 1024.0 / 1023 + 2, 1e-9);
  EXPECT_EQ(p.devices, 342);
  check_circuits(in, p);
}

// What bench/fabric/fabric_direct.py runs: one one-way ring (Conflux's worker ring) and
// one-device trees (8-port devices over 8 workers), worked out by hand with L = 1: the ring
// carries L * N / (2 (N - 1)) = 4/7, a tree L.
TEST(DirectPlan, OneWayRingAndTreesOnly) {
  auto conflux_input = [](const std::string& ports, int budget) {
    Input in = input(ports, 8, 8, budget);
    in.ring_directions = 1;
    in.max_rings = 1;
    in.kinds = parse_kinds("ring,tree");
    return in;
  };
  struct Case {
    std::string ports;
    int budget;
    std::multiset<std::string> kinds;
    double algbw;
  };
  for (const Case& c : std::vector<Case>{
           {"3", 0, {"ring"}, 4.0 / 7},
           {"3", 1, {"ring", "tree"}, 1 + 4.0 / 7},
           {"3", 2, {"tree", "tree"}, 2},  // two trees beat a ring and a tree
           {"3", 3, {"tree", "tree", "tree"}, 3},
           {"4", 0, {"ring"}, 4.0 / 7},  // one ring at most: two ports stay unused
           {"4", 2, {"ring", "tree", "tree"}, 2 + 4.0 / 7},
           {"4", 4, {"tree", "tree", "tree", "tree"}, 4},
       }) {
    const Input in = conflux_input(c.ports, c.budget);
    const Plan p = solve(in);
    EXPECT_EQ(kinds(p), c.kinds) << "ports " << c.ports << ", budget " << c.budget;
    EXPECT_NEAR(p.algbw_gbit, c.algbw, 1e-9) << "ports " << c.ports << ", budget " << c.budget;
    check_circuits(in, p);
    double shares = 0;
    for (const Topology& t : p.topologies) shares += t.share;
    EXPECT_NEAR(shares, 1, 1e-12);
  }
  // Both directions double the ring: on 4 ports two rings (16/7) beat a ring and a tree
  // (1 + 8/7), and one more port makes a ring and a tree.
  Input two_way = input("4", 8, 8, 1);
  EXPECT_EQ(kinds(solve(two_way)), (std::multiset<std::string>{"ring", "ring"}));
  EXPECT_NEAR(solve(two_way).algbw_gbit, 16.0 / 7, 1e-9);
  two_way = input("5", 8, 8, 1);
  EXPECT_EQ(kinds(solve(two_way)), (std::multiset<std::string>{"ring", "ring", "tree"}));
  EXPECT_NEAR(solve(two_way).algbw_gbit, 1 + 16.0 / 7, 1e-9);
  EXPECT_EQ(baselines(conflux_input("4", 0)).rings, 1);
}

// The plugin environment of a plan: a stripe per tree, the weights from the trees' shares,
// the ring's share as the ring fraction; what the plugin does not run is an error.
TEST(DirectPlan, PluginEnvironmentRunsOneWayRingsAndOneDeviceTrees) {
  Input in = input("4", 8, 8, 2);
  in.ring_directions = 1;
  in.max_rings = 1;
  in.kinds = parse_kinds("ring,tree");
  const Plan p = solve(in);
  const PluginEnv env = plugin_env(in, p, {"10.0.0.1:7470", "10.0.0.2:7470", "10.0.0.3:7470"});
  // A ring (4/7) and two trees (1 each): ring 4/18, each tree 7/18.
  EXPECT_NEAR(env.ring_fraction, 4.0 / 18, 1e-9);
  EXPECT_EQ(env.stripe_weights, "500,500");
  EXPECT_EQ(env.aggregators, "10.0.0.1:7470,10.0.0.2:7470");
  EXPECT_NE(plugin_env_text(env).find("CONFLUX_RING_FRACTION=0.2222"), std::string::npos);
  EXPECT_THROW(plugin_env(in, p, {"10.0.0.1:7470"}), PlanError);  // 2 devices, 1 endpoint
  // A device whose cores bound its tree (2 cores x 0.2 Gbit/s over 8 streams = 0.05 Gbit/s):
  // the ring takes the larger share.
  Input cpu = in;
  cpu.link_gbit = 0.1;
  cpu.agg_cores = 2;
  cpu.core_gbit = 0.2;
  cpu.device_budget = 1;
  const Plan q = solve(cpu);
  const PluginEnv e = plugin_env(cpu, q, {"d0:1"});
  EXPECT_EQ(e.stripe_weights, "1000");
  EXPECT_NEAR(e.ring_fraction, (0.1 * 8 / 14) / (0.1 * 8 / 14 + 0.05), 1e-9);
  // A two-way ring, two rings, a segment ring, a tree of several devices: not run.
  Input two_way = input("4", 8, 8, 1);
  EXPECT_THROW(plugin_env(two_way, solve(two_way), {"d0:1"}), PlanError);
  Input seg = input("3", 8, 4, 2);
  seg.ring_directions = 1;
  seg.max_rings = 1;
  seg.kinds = parse_kinds("segment");
  EXPECT_THROW(plugin_env(seg, solve(seg), {"a:1", "b:1"}), PlanError);
  Input deep = input("1", 8, 4, 3);
  EXPECT_THROW(plugin_env(deep, solve(deep), {"a:1", "b:1", "c:1"}), PlanError);
  // Ring only: no aggregators, the ring takes everything.
  Input ring = in;
  ring.device_budget = 0;
  const PluginEnv r = plugin_env(ring, solve(ring), {});
  EXPECT_EQ(r.aggregators, "");
  EXPECT_NEAR(r.ring_fraction, 1, 1e-12);
}

TEST(DirectPlan, TopologyKindsAreChecked) {
  EXPECT_EQ(parse_kinds("ring,segment,tree"), 0b111u);
  EXPECT_EQ(parse_kinds("tree"), 1u << static_cast<int>(Kind::kTree));
  EXPECT_THROW(parse_kinds("ring,star"), PlanError);
  EXPECT_THROW(parse_kinds(""), PlanError);
  // Trees only, without the devices a tree needs: no plan.
  Input in = input("4", 8, 4, 2);
  in.kinds = parse_kinds("tree");
  EXPECT_THROW(solve(in), PlanError);
  in.kinds = parse_kinds("segment");
  EXPECT_THROW(solve(in), PlanError);
}

TEST(DirectPlan, InputsNoPlanFits) {
  // One port: no ring, and a tree over 8 workers with 4-port devices needs 3.
  EXPECT_THROW(
      {
        try {
          solve(input("1", 8, 4, 2));
        } catch (const PlanError& e) {
          EXPECT_NE(std::string(e.what()).find("needs 3 devices"), std::string::npos) << e.what();
          throw;
        }
      },
      PlanError);
  EXPECT_NEAR(solve(input("1", 8, 4, 3)).algbw_gbit, 1, 1e-9);  // one tree
  EXPECT_THROW(solve(input("4", 8, 2, 4)), PlanError);          // 2-port devices
  EXPECT_THROW(parse_ports("4x3", 8), PlanError);               // 3 workers, not 8
  EXPECT_THROW(parse_ports("4,x", 8), PlanError);
  EXPECT_THROW(parse_ports("0", 8), PlanError);
  EXPECT_THROW(parse_ports("", 8), PlanError);
  EXPECT_THROW(parse_ports("4x4,3", 8), PlanError);  // "3" alone means all 8
  const std::vector<PortClass> two = parse_ports("8x1000,4x24", 1024);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].ports, 8);
  EXPECT_EQ(two[0].count, 1000);
  EXPECT_EQ(two[1].ports, 4);
  EXPECT_EQ(two[1].count, 24);
}

}  // namespace
}  // namespace conflux::cli::direct
