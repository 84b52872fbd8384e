// conflux: the operator CLI of Conflux. Exit codes: 0 success, 1 a daemon could not be
// queried (the others are still shown), 2 usage.
//   conflux status HOST[:METRICS_PORT]... [--json] [--interval-ms N] [--timeout-ms N]
//   conflux drain|undrain HOST[:METRICS_PORT]... [--secret S | CONFLUX_SECRET] [--json]
//   conflux check [--aggregators LIST | CONFLUX_AGGREGATORS] [--secret S] [--payload B] [--json]
// check exits 0 when a job would use every aggregator, 1 when the plugin would fall back.
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "aggregator/cli/admin.h"
#include "aggregator/cli/check.h"
#include "aggregator/cli/status.h"
#include "fmt/format.h"

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
  for (const char* name : {"drain", "undrain"}) {
    CLI::App* a = app.add_subcommand(
        name, std::string(name) == "drain"
                  ? "refuse new jobs and tell the running ones to leave (their ranks go on over "
                    "their other aggregators or the ring); the daemon keeps running"
                  : "take new jobs again after a drain");
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
  check->add_flag("--json", json, "print JSON instead of a table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (check->parsed()) {
    const CheckReport r = run_check(copt);
    std::fputs((json ? check_json(r) : check_table(r)).c_str(), stdout);
    return r.usable ? 0 : 1;
  }
  for (CLI::App* a : admin) {
    if (!a->parsed()) continue;
    bool all_ok = true;
    std::string out = "{\"daemons\": [";
    for (size_t i = 0; i < daemons.size(); ++i) {
      const AdminResult r = run_admin(daemons[i], a->get_name(), secret, timeout_ms);
      all_ok = all_ok && r.ok;
      if (json) {
        out += fmt::format("{}{{\"address\": {}, \"ok\": {}, \"message\": {}}}", i ? ", " : "",
                           json_string(daemons[i]), r.ok, json_string(r.message));
      } else if (r.ok) {
        std::printf("%s: %s\n", daemons[i].c_str(), r.message.c_str());
      } else {
        std::fprintf(stderr, "conflux: %s: %s\n", daemons[i].c_str(), r.message.c_str());
      }
    }
    if (json) std::printf("%s]}\n", out.c_str());
    return all_ok ? 0 : 1;
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
