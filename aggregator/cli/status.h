// SPDX-License-Identifier: Apache-2.0
// `conflux status`: what each daemon's /metrics and /healthz say, and rates over an interval.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conflux::cli {

struct JobStatus {
  std::string id;
  uint64_t workers = 0;
  uint64_t slots = 0;
  double packets_per_s = 0;
  double bytes_per_s = 0;
  uint64_t drops = 0;        // of its datagrams, dropped by the slot state machine
  uint64_t retransmits = 0;  // results served again
  uint64_t grant_mbps = 0;   // its fair share of the daemon's bandwidth (0 = unknown)
  uint64_t share_weight = 1;
  std::string tenant;      // "" = the shared secret
  bool multicast = false;  // its results go to its multicast group (else unicast fan-out)
};

struct DaemonStatus {
  std::string address;  // host:metrics_port as asked
  bool ok = false;      // answered /metrics and /healthz
  std::string error;    // why not, when !ok
  std::string version, dataplane, health;
  bool draining = false;  // conflux drain: Joins refused
  uint64_t threads = 0, uptime_s = 0, jobs_active = 0, slots_in_use = 0;
  uint64_t drops = 0, retransmits = 0, connections = 0;
  double packets_per_s = 0, bytes_per_s = 0;
  // Multicast reaching the daemon's host unasked, Mbit/s: the network floods it there.
  uint64_t multicast_unasked_mbps = 0;
  // The configuration's generation (conflux_config_generation: 1 at start, +1 per reload
  // applied); 0 from a daemon that does not say.
  uint64_t config_generation = 0;
  std::vector<JobStatus> jobs;
};

// Scrapes host[:port] (default port 9470, the metrics port) twice, `interval_ms` apart.
DaemonStatus query_status(const std::string& address, int interval_ms, int timeout_ms);
// The human table, and the JSON document ({"daemons": [...]}).
std::string status_table(const std::vector<DaemonStatus>& all);
std::string status_json(const std::vector<DaemonStatus>& all);

}  // namespace conflux::cli
