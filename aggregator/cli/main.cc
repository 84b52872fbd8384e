// SPDX-License-Identifier: Apache-2.0
// conflux: the operator CLI of Conflux. Exit codes: 0 success, 1 a daemon could not be
// queried (the others are still shown), 2 usage.
//   conflux status HOST[:METRICS_PORT]... [--json] [--interval-ms N] [--timeout-ms N]
//   conflux drain|undrain HOST[:METRICS_PORT]... [--secret S | CONFLUX_SECRET] [--json]
//   conflux drain --wait [--wait-timeout S] ...: returns once the daemon serves no job
//   conflux throttle HOST[:METRICS_PORT]... --max-mbps N [--secret S] [--json]
//   conflux reload HOST[:METRICS_PORT]... [--secret S] [--json]
//   conflux check [--aggregators LIST | CONFLUX_AGGREGATORS] [--secret S] [--payload B] [--json]
//   conflux plan --workers N --worker-gbit R [--agg-gbit A] [--dataplane udp|dpdk] [--agg-cores C]
//   ... [--json]
//   conflux plan --fabric direct --workers N --worker-gbit R --ports E[,PxN...] --devices D
//   ... [--device-ports E_d] [--pareto] [--circuits] [--time-limit S] [--json]
// check exits 0 when a job would use every aggregator, 1 when the plugin would fall back.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "aggregator/cli/admin.h"
#include "aggregator/cli/check.h"
#include "aggregator/cli/direct_plan.h"
#include "aggregator/cli/plan.h"
#include "aggregator/cli/status.h"
#include "fmt/format.h"

namespace {

struct DirectArgs {
  std::string fabric = "switched";
  std::string ports;
  int device_ports = 0;  // 0: the fewest ports a worker has
  int devices = 0;
  double time_limit_s = 60;
  bool pareto = false;
  bool circuits = false;
  int ring_directions = 2;
  int max_rings = -1;  // -1: as many as the ports allow
  std::string topologies = "ring,segment,tree";
  std::vector<std::string> device_endpoints;
};

void add_direct_options(CLI::App* plan, DirectArgs& d) {
  plan->add_option("--fabric", d.fabric,
                   "switched (every host reaches every aggregator; the layouts above) or direct "
                   "(hosts and devices wired port to port: the fewest devices for the most "
                   "algbw, a MILP solved by GLPK)")
      ->check(CLI::IsMember({"switched", "direct"}));
  plan->add_option("--ports", d.ports,
                   "direct: ports per worker, E for all or PORTSxCOUNT,... (8x1000,4x24)");
  plan->add_option("--device-ports", d.device_ports,
                   "direct: ports per aggregation device (default: the fewest a worker has)")
      ->check(CLI::Range(3, 256));
  plan->add_option("--devices", d.devices, "direct: devices available (the budget)")
      ->check(CLI::Range(0, 1000000));
  plan->add_option("--time-limit", d.time_limit_s,
                   "direct: seconds the solver may take per plan; then the best plan found and "
                   "its gap")
      ->check(CLI::Range(0.01, 86400.0));
  plan->add_flag("--pareto", d.pareto, "direct: the best plan for every budget 0..--devices");
  plan->add_flag("--circuits", d.circuits, "direct: list every circuit in the table");
  plan->add_option("--ring-directions", d.ring_directions,
                   "direct: 2 (a ring sends both ways on its ports: two counter-rotating rings) "
                   "or 1 (one way, as Conflux's worker ring does: half the algbw)")
      ->check(CLI::Range(1, 2));
  plan->add_option("--max-rings", d.max_rings,
                   "direct: the most rings a plan may hold (default: as many as the ports allow; "
                   "Conflux's plugin runs 1)")
      ->check(CLI::Range(0, 1024));
  plan->add_option("--topologies", d.topologies,
                   "direct: the kinds a plan may use, of ring,segment,tree (default all; "
                   "bench/fabric/fabric_direct.py runs ring,tree)");
  plan->add_option("--device-endpoints", d.device_endpoints,
                   "direct: host:port of each device's confluxd, device 0 first: print the "
                   "plugin environment that runs the plan (CONFLUX_AGGREGATORS, "
                   "CONFLUX_STRIPE_WEIGHTS, CONFLUX_RING_FRACTION)")
      ->delimiter(',');
}

int run_direct_plan(const conflux::cli::PlanInput& pin, const DirectArgs& d, bool json) {
  namespace direct = conflux::cli::direct;
  try {
#ifndef CONFLUX_DIRECT_PLANNER
    throw direct::PlanError(
        "this conflux was built without the direct-connect planner (CONFLUX_DIRECT_PLANNER=OFF, "
        "no GLPK)");
#else
    if (d.ports.empty()) throw direct::PlanError("--fabric direct needs --ports");
    direct::Input in;
    in.workers = direct::parse_ports(d.ports, pin.workers);
    in.link_gbit = pin.worker_gbit;
    in.device_ports = d.device_ports > 0 ? d.device_ports : in.min_ports();
    in.device_budget = d.devices;
    in.agg_cores = pin.agg_cores;
    in.core_gbit = pin.core_gbit;
    in.dataplane = pin.dataplane;
    in.time_limit_s = d.time_limit_s;
    in.ring_directions = d.ring_directions;
    in.max_rings = d.max_rings;
    in.kinds = direct::parse_kinds(d.topologies);
    const direct::Plan plan = direct::solve(in);
    std::vector<direct::Plan> rows;
    if (d.pareto) rows = direct::pareto(in);
    std::optional<direct::PluginEnv> env;
    if (!d.device_endpoints.empty()) env = direct::plugin_env(in, plan, d.device_endpoints);
    if (json) {
      std::fputs(
          direct::plan_json(in, plan, d.pareto ? &rows : nullptr, env ? &*env : nullptr).c_str(),
          stdout);
    } else {
      std::fputs(
          (d.pareto ? direct::pareto_table(in, rows) : direct::plan_table(in, plan, d.circuits))
              .c_str(),
          stdout);
      if (env) std::fputs(direct::plugin_env_text(*env).c_str(), stdout);
    }
    return 0;
#endif
  } catch (const direct::PlanError& e) {
    std::fprintf(stderr, "conflux plan: %s\n", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace conflux::cli;
  CLI::App app{"conflux: operator CLI of the Conflux aggregators (confluxd)"};
  app.require_subcommand(1);
  std::vector<std::string> daemons;
  bool json = false;
  int interval_ms = 500, timeout_ms = 2000;
  CLI::App* status = app.add_subcommand(
      "status",
      "per daemon: health, version, dataplane, threads, uptime, jobs (workers, slots, packets/s, "
      "bytes/s), drops and retransmits, read from its /metrics endpoint");
  status
      ->add_option("daemons", daemons,
                   "HOST[:PORT] of each daemon's metrics endpoint "
                   "(default port 9470)")
      ->required();
  status->add_flag("--json", json, "print JSON instead of a table");
  status->add_option("--interval-ms", interval_ms, "rates over this interval (two scrapes)")
      ->check(CLI::Range(50, 60000));
  status->add_option("--timeout-ms", timeout_ms, "per request")->check(CLI::Range(100, 60000));
  std::string secret;
  std::vector<CLI::App*> admin;
  uint32_t max_mbps = 0;
  bool drain_wait = false;
  double drain_wait_s = 120;
  for (const char* name : {"drain", "undrain", "throttle", "reload"}) {
    const std::string n = name;
    CLI::App* a = app.add_subcommand(
        name, n == "drain" ? "refuse new jobs and tell the running ones to leave (their ranks go "
                             "on over their other aggregators or the ring); the daemon keeps "
                             "running"
              : n == "undrain" ? "take new jobs again after a drain"
              : n == "reload"
                  ? "read the configuration again (as SIGHUP): max_mbps, log_level, the secret "
                    "(the previous one stays valid secret_overlap_s) and the tenants' weights "
                    "and secrets apply at once; a change to any other key is refused, naming "
                    "it, and nothing changes"
                  : "change the daemon's cap on the result bytes it sends (max_mbps) while it "
                    "runs: its jobs' grants are divided again and each running job hears its "
                    "new grant (the plugin moves work to or from its ring)");
    if (n == "drain") {
      a->add_flag("--wait", drain_wait,
                  "return only when the daemon serves no job any more (conflux_jobs_active 0): "
                  "each job has moved off at its next collective (a rolling upgrade's preStop)");
      a->add_option("--wait-timeout", drain_wait_s, "seconds --wait waits at most (exit 1 then)")
          ->check(CLI::Range(1.0, 86400.0));
    }
    if (n == "throttle") {
      a->add_option("--max-mbps", max_mbps, "the new cap, Mbit/s over all threads (0 = none)")
          ->required()
          ->check(CLI::Range(0, 10000000));
    }
    a->add_option("daemons", daemons, "HOST[:PORT] of each daemon's metrics endpoint")->required();
    a->add_option("--secret", secret,
                  "the daemons' shared secret (without one a daemon takes admin commands from "
                  "loopback only)")
        ->envname("CONFLUX_SECRET");
    a->add_flag("--json", json, "print JSON instead of text");
    a->add_option("--timeout-ms", timeout_ms, "per request")->check(CLI::Range(100, 60000));
    admin.push_back(a);
  }
  CheckOptions copt;
  CLI::App* check = app.add_subcommand(
      "check",
      "preflight on a worker host: joins each aggregator as a one-rank job (control port, "
      "authentication) and round-trips full-payload UDP packets through it, then says whether "
      "a job would use the aggregators or fall back to the ring, and why");
  check->add_option("--aggregators", copt.aggregators, "host:port,... of the control ports")
      ->envname("CONFLUX_AGGREGATORS");
  check->add_option("--secret", copt.secret, "the aggregators' shared secret")
      ->envname("CONFLUX_SECRET");
  check->add_option("--payload", copt.payload_bytes, "payload bytes per packet, as the plugin")
      ->envname("CONFLUX_PAYLOAD_BYTES")
      ->check(CLI::Range(64, 61440));
  check->add_option("--bind", copt.bind_addr, "local IPv4 address of the UDP socket");
  check->add_option("--timeout-ms", copt.timeout_ms, "per step")->check(CLI::Range(100, 60000));
  check
      ->add_option("--net-delegate", copt.net_delegate,
                   "the net plugin that carries point-to-point traffic (loaded as the plugin "
                   "loads it)")
      ->envname("CONFLUX_NET_DELEGATE");
  check
      ->add_option("--net-delegate-fallback", copt.net_delegate_fallback,
                   "1: a delegate that cannot be loaded falls back to Conflux's TCP net")
      ->envname("CONFLUX_NET_DELEGATE_FALLBACK");
  check->add_flag("--json", json, "print JSON instead of a table");
  PlanInput pin;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan",
      "capacity planning: expected AllReduce algbw of one aggregator, k striped and a tree of L "
      "leaves under a root (or under levels of middle aggregators, --max-depth), next to the ring, "
      "from "
      "link rates and cores (a model, no traffic)");
  plan_cmd->add_option("--workers", pin.workers, "workers (ranks)")
      ->required()
      ->check(CLI::Range(2, 65536));
  plan_cmd->add_option("--worker-gbit", pin.worker_gbit, "each worker's link, Gbit/s")
      ->required()
      ->check(CLI::PositiveNumber);
  plan_cmd
      ->add_option("--agg-gbit", pin.agg_gbit,
                   "each aggregator's link, Gbit/s (default: a worker's, --worker-gbit)")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--root-gbit", pin.root_gbit, "a tree root's link (default --agg-gbit)")
      ->check(CLI::PositiveNumber);
  plan_cmd
      ->add_option("--agg-cores", pin.agg_cores,
                   "dataplane threads per aggregator (default: as many as each layout needs, "
                   "shown as cores/host)")
      ->check(CLI::Range(1, 64));
  plan_cmd
      ->add_option("--dataplane", pin.dataplane,
                   "udp or dpdk: the dataplane whose measured Gbit/s per core (bench/capacity) "
                   "--core-gbit defaults to")
      ->check(CLI::IsMember({"udp", "dpdk"}));
  plan_cmd
      ->add_option("--core-gbit", pin.core_gbit,
                   "contribution Gbit/s one dataplane thread reduces (default: --dataplane's "
                   "measure; measure yours: bench/capacity/capacity.py)")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--max-aggregators", pin.max_aggregators, "list layouts up to this many")
      ->check(CLI::Range(1, 1024));
  plan_cmd
      ->add_option(
          "--max-depth", pin.max_depth,
          "aggregator levels of the deepest tree listed: 2 (leaves, root) up to 9 (leaves, "
          "7 levels of middle aggregators, root; protocol/SPEC.md section 7)")
      ->check(CLI::Range(2, 9));
  plan_cmd
      ->add_option("--top", pin.top,
                   "of the layouts that need the same number of aggregator hosts, list only the "
                   "N fastest (default: all)")
      ->check(CLI::Range(1, 1000000));
  std::string tree_results = "leaf";
  plan_cmd
      ->add_option("--tree-results", tree_results,
                   "the leaves' tree_results: leaf (results through the leaf) or direct (the "
                   "parent multicasts them straight to the leaf's workers)")
      ->check(CLI::IsMember({"leaf", "direct"}));
  plan_cmd->add_flag("--json", json, "print JSON instead of a table");
  DirectArgs direct;
  add_direct_options(plan_cmd, direct);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (check->parsed()) {
    const CheckReport r = run_check(copt);
    std::fputs((json ? check_json(r) : check_table(r)).c_str(), stdout);
    return r.usable && r.p2p_ok && r.device_ok ? 0 : 1;
  }
  for (CLI::App* a : admin) {
    if (!a->parsed()) continue;
    bool all_ok = true;
    std::vector<AdminResult> results;
    for (const std::string& d : daemons) {
      const std::string command =
          a->get_name() == "throttle" ? fmt::format("max-mbps/{}", max_mbps) : a->get_name();
      AdminResult& r = results.emplace_back(run_admin(d, command, secret, timeout_ms));
      if (r.ok && drain_wait && a->get_name() == "drain") {
        const AdminResult w = wait_drained(d, drain_wait_s, timeout_ms);
        r.ok = w.ok;
        r.message += "; " + w.message;
      }
      all_ok = all_ok && r.ok;
      if (json) continue;
      if (r.ok) {
        std::printf("%s: %s\n", d.c_str(), r.message.c_str());
      } else {
        std::fprintf(stderr, "conflux: %s: %s\n", d.c_str(), r.message.c_str());
      }
    }
    if (json) std::fputs(admin_json(daemons, results).c_str(), stdout);
    return all_ok ? 0 : 1;
  }
  if (plan_cmd->parsed() && direct.fabric == "direct") return run_direct_plan(pin, direct, json);
  if (plan_cmd->parsed()) {
    if (!direct.ports.empty()) {
      std::fprintf(stderr,
                   "conflux plan: --ports and the other direct-connect options need "
                   "--fabric direct\n");
      return 2;
    }
    pin.direct_results = tree_results == "direct";
    const std::vector<PlanRow> rows = plan(pin);
    std::fputs((json ? plan_json(pin, rows) : plan_table(pin, rows)).c_str(), stdout);
    return 0;
  }
  std::vector<DaemonStatus> all;
  bool all_ok = true;
  for (const std::string& d : daemons) {
    all.push_back(query_status(d, interval_ms, timeout_ms));
    all_ok = all_ok && all.back().ok;
  }
  std::fputs((json ? status_json(all) : status_table(all)).c_str(), stdout);
  for (const DaemonStatus& d : all) {
    if (!d.ok) std::fprintf(stderr, "conflux: %s: %s\n", d.address.c_str(), d.error.c_str());
  }
  return all_ok ? 0 : 1;
}
