// SPDX-License-Identifier: Apache-2.0
#include "aggregator/cli/direct_plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "aggregator/cli/direct_model.h"
#include "aggregator/cli/plan.h"
#include "conflux/common/json_text.h"
#include "fmt/format.h"

namespace conflux::cli::direct {

int Input::worker_count() const {
  int n = 0;
  for (const PortClass& c : workers) n += c.count;
  return n;
}

int Input::min_ports() const {
  int p = std::numeric_limits<int>::max();
  for (const PortClass& c : workers) p = std::min(p, c.ports);
  return workers.empty() ? 0 : p;
}

namespace {

int parse_int(std::string_view s, std::string_view what, const std::string& spec) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 1) {
    throw PlanError(fmt::format("--ports {}: {} '{}' is not a positive number", spec, what, s));
  }
  return v;
}

}  // namespace

std::vector<PortClass> parse_ports(const std::string& spec, int workers) {
  std::vector<PortClass> classes;
  std::string_view rest = spec;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t x = item.find('x');
    PortClass c{parse_int(item.substr(0, x), "ports", spec), workers};
    if (x != std::string_view::npos) c.count = parse_int(item.substr(x + 1), "count", spec);
    if (c.ports > 64)
      throw PlanError(fmt::format("--ports {}: {} ports per worker (at most 64)", spec, c.ports));
    classes.push_back(c);
  }
  int total = 0;
  for (const PortClass& c : classes) total += c.count;
  if (classes.empty() || total != workers) {
    throw PlanError(
        fmt::format("--ports {}: {} workers in the port classes, --workers says {} (give PORTS, or "
                    "PORTSxCOUNT,... adding up to --workers)",
                    spec, total, workers));
  }
  return classes;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kRing:
      return "ring";
    case Kind::kSegmentRing:
      return "segment ring";
    case Kind::kTree:
      return "tree";
  }
  return "?";
}

unsigned parse_kinds(const std::string& spec) {
  unsigned kinds = 0;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string name = spec.substr(at, comma - at);
    if (name == "ring") {
      kinds |= 1u << static_cast<int>(Kind::kRing);
    } else if (name == "segment") {
      kinds |= 1u << static_cast<int>(Kind::kSegmentRing);
    } else if (name == "tree") {
      kinds |= 1u << static_cast<int>(Kind::kTree);
    } else {
      throw PlanError(
          fmt::format("--topologies {}: '{}' is not ring, segment or tree", spec, name));
    }
    at = comma + 1;
  }
  return kinds;
}

int tree_devices(int n, int device_ports) {
  if (n <= device_ports) return 1;
  return 1 + (n - device_ports + device_ports - 3) / (device_ports - 2);
}

Rates rates(const Input& in) {
  const double n = in.worker_count();
  const double b = in.link_gbit;
  const double core = in.core_gbit > 0 ? in.core_gbit : measured_core_gbit(in.dataplane);
  const double cpu =
      in.agg_cores > 0 ? in.agg_cores * core : std::numeric_limits<double>::infinity();
  Rates r;
  r.group = in.device_ports - 2;
  r.tree_devices = tree_devices(in.worker_count(), in.device_ports);
  r.ring = b * n / (n - 1) * in.ring_directions / 2;
  // A segment device sums its members and the partials the ring brings; a tree device its
  // children (the root up to E_d of them).
  r.segment = std::min(b, cpu / (r.group + 1));
  r.tree = std::min(b, cpu / std::min<double>(in.device_ports, n));
  return r;
}

Baselines baselines(const Input& in) {
  const Rates r = rates(in);
  Baselines out;
  out.rings = in.min_ports() / 2;
  if (in.max_rings >= 0) out.rings = std::min(out.rings, in.max_rings);
  out.ring_gbit = out.rings * r.ring;
  out.trees = in.min_ports();
  out.tree_devices = out.trees * r.tree_devices;
  out.tree_gbit = out.trees * r.tree;
  return out;
}

namespace {

void validate(const Input& in) {
  const int n = in.worker_count();
  if (n < 2) throw PlanError(fmt::format("{} workers: an AllReduce needs at least 2", n));
  if (in.device_ports < 3) {
    throw PlanError(fmt::format(
        "--device-ports {}: a device needs 3 ports or more (two in a ring and one member, or "
        "two children and its parent)",
        in.device_ports));
  }
  if (in.device_budget < 0) throw PlanError("--devices must be 0 or more");
  const int pmin = in.min_ports();
  if (pmin < 1) throw PlanError("every worker needs at least one port");
  const Rates r = rates(in);
  const bool ring = allows(in, Kind::kRing) && in.max_rings != 0;
  if (!ring && !allows(in, Kind::kTree)) {
    throw PlanError("--topologies without ring or tree: no AllReduce spans the workers");
  }
  if ((pmin < 2 || !ring) && in.device_budget < r.tree_devices) {
    throw PlanError(fmt::format(
        "no AllReduce fits: a worker with {} port cannot be in a ring, and a tree over {} "
        "workers with {}-port devices needs {} devices (--devices {})",
        pmin, n, in.device_ports, r.tree_devices, in.device_budget));
  }
}

}  // namespace

Plan solve(const Input& in) {
  validate(in);
  const Rates r = rates(in);
  const Selection s = select(in, r);
  Plan p;
  p.budget = in.device_budget;
  p.circuits = wire(in, r, s, p.topologies);
  p.optimal = s.optimal;
  p.gap = s.gap;
  p.solve_s = s.solve_s;
  for (const Topology& t : p.topologies) {
    p.devices += t.devices;
    p.algbw_gbit += t.algbw_gbit;
  }
  if (p.topologies.empty()) throw PlanError("no topology fits these ports and devices");
  for (Topology& t : p.topologies) t.share = t.algbw_gbit / p.algbw_gbit;
  if (p.devices > in.device_budget) {
    throw std::logic_error(fmt::format("direct plan: {} devices wired for a budget of {}",
                                       p.devices, in.device_budget));
  }
  return p;
}

std::vector<Plan> pareto(const Input& in, bool circuits) {
  std::vector<Plan> plans;
  Input one = in;
  for (one.device_budget = 0; one.device_budget <= in.device_budget; ++one.device_budget) {
    try {
      plans.push_back(solve(one));
      if (!circuits) std::vector<Circuit>().swap(plans.back().circuits);
    } catch (const PlanError&) {
      if (one.device_budget == in.device_budget) throw;  // nothing fits at any budget
    }
  }
  return plans;
}

namespace {

std::string end_name(const End& e) {
  return fmt::format("{}{}:{}", e.device ? "d" : "w", e.id, e.port);
}

std::string header(const Input& in) {
  std::string ports;
  for (const PortClass& c : in.workers) {
    ports += fmt::format("{}{} x {} ports", ports.empty() ? "" : ", ", c.count, c.ports);
  }
  return fmt::format("# direct-connect: {} workers ({}) @ {:g} Gbit/s; devices of {} ports\n",
                     in.worker_count(), ports, in.link_gbit, in.device_ports);
}

}  // namespace

std::string plan_table(const Input& in, const Plan& p, bool circuits) {
  const Baselines base = baselines(in);
  std::string out = header(in);
  out += fmt::format("{:<4} {:<13} {:>7} {:>7} {:>5} {:>12} {:>7}\n", "#", "topology", "devices",
                     "members", "depth", "algbw Gbit/s", "share");
  for (size_t i = 0; i < p.topologies.size(); ++i) {
    const Topology& t = p.topologies[i];
    out += fmt::format("{:<4} {:<13} {:>7} {:>7} {:>5} {:>12.3f} {:>7.4f}\n", i, kind_name(t.kind),
                       t.devices, t.members, t.depth, t.algbw_gbit, t.share);
  }
  out += fmt::format(
      "plan:      {} of {} devices, algbw {:.3f} Gbit/s ({:.3f}x the ring), {} (gap {:.4f}), "
      "solved in {:.3f} s\n",
      p.devices, p.budget, p.algbw_gbit, base.ring_gbit > 0 ? p.algbw_gbit / base.ring_gbit : 0.0,
      p.optimal ? "optimal" : "time limit", p.gap, p.solve_s);
  out += fmt::format("ring only: {} ring(s), 0 devices, algbw {:.3f} Gbit/s\n", base.rings,
                     base.ring_gbit);
  out += fmt::format("full tree: {} tree(s), {} devices, algbw {:.3f} Gbit/s\n", base.trees,
                     base.tree_devices, base.tree_gbit);
  if (circuits) {
    out += "circuits (topology: worker wN:port or device dN:port <-> ...):\n";
    for (const Circuit& c : p.circuits) {
      out += fmt::format("{:<4} {} <-> {}\n", c.topology, end_name(c.a), end_name(c.b));
    }
  }
  return out;
}

std::string pareto_table(const Input& in, const std::vector<Plan>& plans) {
  const Baselines base = baselines(in);
  std::string out = header(in);
  out += fmt::format("{:>11} {:>7} {:>12} {:>8}  {}\n", "budget", "devices", "algbw Gbit/s",
                     "vs ring", "topologies");
  // Budgets that give the same plan share a row ("342-682").
  for (size_t i = 0; i < plans.size();) {
    const Plan& p = plans[i];
    size_t j = i + 1;
    while (j < plans.size() && plans[j].devices == p.devices &&
           plans[j].algbw_gbit == p.algbw_gbit) {
      ++j;
    }
    std::string kinds;
    for (const Topology& t : p.topologies) {
      kinds += fmt::format("{}{}", kinds.empty() ? "" : " + ", kind_name(t.kind));
    }
    const std::string budgets =
        j - 1 > i ? fmt::format("{}-{}", p.budget, plans[j - 1].budget) : std::to_string(p.budget);
    out += fmt::format("{:>11} {:>7} {:>12.3f} {:>8.3f}  {}\n", budgets, p.devices, p.algbw_gbit,
                       base.ring_gbit > 0 ? p.algbw_gbit / base.ring_gbit : 0.0, kinds);
    i = j;
  }
  out += fmt::format("full tree: {} devices, algbw {:.3f} Gbit/s\n", base.tree_devices,
                     base.tree_gbit);
  return out;
}

namespace {

json::Json plan_doc(const Plan& p, double ring_gbit, bool circuits) {
  json::Json tops = json::Json::array();
  for (const Topology& t : p.topologies) {
    tops.push_back({{"kind", kind_name(t.kind)},
                    {"devices", t.devices},
                    {"members", t.members},
                    {"depth", t.depth},
                    {"algbw_gbit", json::shortest(t.algbw_gbit)},
                    {"share", json::shortest(t.share)}});
  }
  json::Json doc = {{"budget", p.budget},
                    {"devices", p.devices},
                    {"algbw_gbit", json::shortest(p.algbw_gbit)},
                    {"vs_ring", json::shortest(ring_gbit > 0 ? p.algbw_gbit / ring_gbit : 0.0)},
                    {"optimal", p.optimal},
                    {"gap", json::shortest(p.gap)},
                    {"solve_s", json::shortest(p.solve_s)},
                    {"topologies", std::move(tops)}};
  if (!circuits) return doc;
  json::Json wires = json::Json::array();
  for (const Circuit& c : p.circuits) wires.push_back({c.topology, end_name(c.a), end_name(c.b)});
  doc["circuits"] = std::move(wires);
  return doc;
}

}  // namespace

PluginEnv plugin_env(const Input& in, const Plan& p, const std::vector<std::string>& devices) {
  if (p.devices > static_cast<int>(devices.size())) {
    throw PlanError(fmt::format("--device-endpoints names {} devices; the plan uses {}",
                                devices.size(), p.devices));
  }
  PluginEnv env;
  double trees = 0;
  int rings = 0;
  for (const Topology& t : p.topologies) {
    if (t.kind == Kind::kSegmentRing) {
      throw PlanError(
          "the plan holds a segment ring, which the plugin does not run (plan with "
          "--topologies ring,tree)");
    }
    if (t.kind == Kind::kTree && t.devices != 1) {
      throw PlanError(
          fmt::format("the plan holds a tree of {} devices; the plugin runs trees of "
                      "one device (--device-ports >= --workers)",
                      t.devices));
    }
    if (t.kind == Kind::kRing) {
      if (++rings > 1 || in.ring_directions != 1) {
        throw PlanError(
            "the plugin runs one worker ring, which sends one way: plan with "
            "--ring-directions 1 --max-rings 1");
      }
      env.ring_fraction += t.share;
    } else {
      trees += t.share;
    }
  }
  for (size_t t = 0; t < p.topologies.size(); ++t) {
    if (p.topologies[t].kind != Kind::kTree) continue;
    const auto c = std::find_if(p.circuits.begin(), p.circuits.end(), [&](const Circuit& c) {
      return c.topology == static_cast<int>(t) && (c.a.device || c.b.device);
    });
    if (c == p.circuits.end()) throw std::logic_error("direct plan: a tree without a device");
    const int device = c->a.device ? c->a.id : c->b.id;
    const auto weight = std::max(1L, std::lround(1000 * p.topologies[t].share / trees));
    env.aggregators += (env.aggregators.empty() ? "" : ",") + devices.at(device);
    env.stripe_weights += (env.stripe_weights.empty() ? "" : ",") + std::to_string(weight);
  }
  return env;
}

std::string plugin_env_text(const PluginEnv& e) {
  if (e.aggregators.empty()) return "# plugin: ring only (no CollNet: NCCL's own ring)\n";
  return fmt::format(
      "# plugin environment, every rank:\nCONFLUX_AGGREGATORS={}\nCONFLUX_STRIPE_WEIGHTS={}\n"
      "CONFLUX_RING_FRACTION={:.4f}\n",
      e.aggregators, e.stripe_weights, e.ring_fraction);
}

std::string plan_json(const Input& in, const Plan& p, const std::vector<Plan>* pareto_rows,
                      const PluginEnv* env) {
  const Baselines base = baselines(in);
  json::Json classes = json::Json::array();
  for (const PortClass& c : in.workers) classes.push_back({{"ports", c.ports}, {"count", c.count}});
  json::Json doc = {
      {"fabric", "direct"},
      {"workers", in.worker_count()},
      {"port_classes", std::move(classes)},
      {"link_gbit", json::shortest(in.link_gbit)},
      {"device_ports", in.device_ports},
      {"device_budget", in.device_budget},
      {"plan", plan_doc(p, base.ring_gbit, true)},
      {"ring_only",
       {{"rings", base.rings}, {"devices", 0}, {"algbw_gbit", json::shortest(base.ring_gbit)}}},
      {"full_tree",
       {{"trees", base.trees},
        {"devices", base.tree_devices},
        {"algbw_gbit", json::shortest(base.tree_gbit)}}}};
  if (env != nullptr) {
    doc["plugin_env"] = {{"CONFLUX_AGGREGATORS", env->aggregators},
                         {"CONFLUX_STRIPE_WEIGHTS", env->stripe_weights},
                         {"CONFLUX_RING_FRACTION", json::shortest(env->ring_fraction)}};
  }
  if (pareto_rows) {
    json::Json rows = json::Json::array();
    for (const Plan& row : *pareto_rows) rows.push_back(plan_doc(row, base.ring_gbit, false));
    doc["pareto"] = std::move(rows);
  }
  return json::one_line(doc) + "\n";
}

}  // namespace conflux::cli::direct
