// conflux: the operator CLI of Conflux. Exit codes: 0 success, 1 a daemon could not be
// queried (the others are still shown), 2 usage.
//   conflux status HOST[:METRICS_PORT]... [--json] [--interval-ms N] [--timeout-ms N]
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
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
