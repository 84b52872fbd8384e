// conflux: the operator CLI of Conflux. Exit codes: 0 success, 1 a daemon could not be
// queried (the others are still shown), 2 usage.
//   conflux status HOST[:METRICS_PORT]... [--json] [--interval-ms N] [--timeout-ms N]
//   conflux plan --workers N --worker-gbit R --agg-gbit A [--agg-cores C] ... [--json]
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "aggregator/cli/plan.h"
#include "aggregator/cli/status.h"

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
  PlanInput pin;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan",
      "capacity planning: expected AllReduce algbw of one aggregator, k striped and a tree of L "
      "leaves under a root, next to the ring, from link rates and cores (a model, no traffic)");
  plan_cmd->add_option("--workers", pin.workers, "workers (ranks)")
      ->required()
      ->check(CLI::Range(2, 1024));
  plan_cmd->add_option("--worker-gbit", pin.worker_gbit, "each worker's link, Gbit/s")
      ->required()
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--agg-gbit", pin.agg_gbit, "each aggregator's link, Gbit/s")
      ->required()
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--root-gbit", pin.root_gbit, "a tree root's link (default --agg-gbit)")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--agg-cores", pin.agg_cores, "dataplane threads per aggregator")
      ->check(CLI::Range(1, 64));
  plan_cmd
      ->add_option("--core-gbit", pin.core_gbit,
                   "contribution Gbit/s one dataplane thread reduces (measure: bench/allreduce)")
      ->check(CLI::PositiveNumber);
  plan_cmd->add_option("--max-aggregators", pin.max_aggregators, "list layouts up to this many")
      ->check(CLI::Range(1, 1024));
  plan_cmd->add_flag("--json", json, "print JSON instead of a table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (plan_cmd->parsed()) {
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
