// SPDX-License-Identifier: Apache-2.0
// The CLI's --json documents, byte for byte as they were before nlohmann::json wrote them (the
// expected texts were captured from the hand-written writers on the same inputs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "aggregator/cli/admin.h"
#include "aggregator/cli/check.h"
#include "aggregator/cli/plan.h"
#include "aggregator/cli/status.h"

namespace conflux::cli {
namespace {

inline std::vector<DaemonStatus> golden_daemons() {
  DaemonStatus a;
  a.address = "10.0.0.1:9470";
  a.ok = true;
  a.version = "0.1.0";
  a.dataplane = "udp";
  a.health = "ok";
  a.threads = 4;
  a.uptime_s = 3600;
  a.jobs_active = 2;
  a.slots_in_use = 64;
  a.drops = 3;
  a.retransmits = 7;
  a.connections = 5;
  a.packets_per_s = 123456.789;
  a.bytes_per_s = 987654321.06;
  JobStatus j1;
  j1.id = "job \"a\"";
  j1.workers = 8;
  j1.slots = 32;
  j1.packets_per_s = 1000.25;
  j1.bytes_per_s = 0;
  j1.retransmits = 1;
  j1.grant_mbps = 1000;
  j1.share_weight = 2;
  j1.tenant = "t\\1 \xc3\xa9";
  j1.multicast = true;
  JobStatus j2;
  j2.id = "j2";
  j2.workers = 2;
  j2.packets_per_s = 0.05;
  j2.bytes_per_s = 4096.96;
  j2.drops = 9;
  a.jobs = {j1, j2};
  DaemonStatus b;
  b.address = "bad-host:1";
  b.error = "connect: Connection refused \x01";
  DaemonStatus c;
  c.address = "10.0.0.2:9470";
  c.version = "0.1.0";
  c.dataplane = "dpdk";
  c.health = "draining";
  c.draining = true;
  c.error = "unhealthy: /healthz says draining";
  c.multicast_unasked_mbps = 12;
  return {a, b, c};
}

inline CheckReport golden_check() {
  CheckReport r;
  r.usable = true;
  r.verdict = "a job would stripe its AllReduce over 2 aggregator(s), \"8192\" B per packet";
  AggregatorCheck x;
  x.endpoint = "10.0.0.1:9400";
  x.joined = x.round_trip = true;
  x.granted_slots = 64;
  x.payload_bytes = 8192;
  x.data_mac = true;
  x.multicast = true;
  x.group = "239.1.2.3:5000";
  x.rtt_us = 123.45;
  AggregatorCheck y;
  y.endpoint = "10.0.0.3:9400";
  y.error = "no result within 5000 ms (UDP to the data ports blocked or lost?)";
  r.aggregators = {x, y};
  return r;
}

inline PlanInput golden_plan_input() {
  PlanInput in;
  in.workers = 6;
  in.worker_gbit = 25;
  in.agg_gbit = 40;
  in.root_gbit = 100;
  in.agg_cores = 3;
  in.core_gbit = 7.5;
  in.max_aggregators = 12;
  in.max_depth = 3;
  in.direct_results = true;
  return in;
}

TEST(CliJson, StatusAsBefore) {
  EXPECT_EQ(
      status_json(golden_daemons()),
      R"j({"daemons": [)j"
      "\n"
      R"j(  {"address": "10.0.0.1:9470", "ok": true, "health": "ok", "draining": false, "version": "0.1.0", "dataplane": "udp", "threads": 4, "uptime_seconds": 3600, "jobs_active": 2, "slots_in_use": 64, "control_connections": 5, "packets_per_second": 123456.8, "bytes_per_second": 987654321.1, "drops": 3, "retransmits_served": 7, "multicast_unasked_mbps": 0, "config_generation": 0, "jobs": [{"id": "job \"a\"", "workers": 8, "slots": 32, "packets_per_second": 1000.2, "bytes_per_second": 0.0, "drops": 0, "retransmits_served": 1, "grant_mbps": 1000, "share_weight": 2, "tenant": "t\\1 é", "results": "multicast"}, )j"
      R"j({"id": "j2", "workers": 2, "slots": 0, "packets_per_second": 0.1, "bytes_per_second": 4097.0, "drops": 9, "retransmits_served": 0, "grant_mbps": 0, "share_weight": 1, "tenant": "", "results": "unicast"}]},)j"
      "\n"
      R"j(  {"address": "bad-host:1", "ok": false, "error": "connect: Connection refused \u0001"},)j"
      "\n"
      R"j(  {"address": "10.0.0.2:9470", "ok": false, "error": "unhealthy: /healthz says draining", "health": "draining", "draining": true, "version": "0.1.0", "dataplane": "dpdk", "threads": 0, "uptime_seconds": 0, "jobs_active": 0, "slots_in_use": 0, "control_connections": 0, "packets_per_second": 0.0, "bytes_per_second": 0.0, "drops": 0, "retransmits_served": 0, "multicast_unasked_mbps": 12, "config_generation": 0, "jobs": []})j"
      "\n"
      R"j(]})j"
      "\n");
  EXPECT_EQ(status_json({}), R"j({"daemons": [)j"
                             "\n"
                             R"j(]})j"
                             "\n");
}

TEST(CliJson, CheckAsBefore) {
  EXPECT_EQ(
      check_json(golden_check()),
      R"j({"usable": true, "verdict": "a job would stripe its AllReduce over 2 aggregator(s), \"8192\" B per packet", "aggregators": [{"endpoint": "10.0.0.1:9400", "joined": true, "round_trip": true, "granted_slots": 64, "payload_bytes": 8192, "data_mac": true, "deterministic": false, "multicast": true, "group": "239.1.2.3:5000", "rtt_us": 123.5, "error": ""}, )j"
      R"j({"endpoint": "10.0.0.3:9400", "joined": false, "round_trip": false, "granted_slots": 0, "payload_bytes": 0, "data_mac": false, "deterministic": false, "multicast": false, "group": "", "rtt_us": 0.0, "error": "no result within 5000 ms (UDP to the data ports blocked or lost?)"}], "p2p_net": "", "p2p_ok": true, )j"
      R"j("nics": [], "cuda": false, "device_memory": "", "device_ok": true, "resolved": ""})j"
      "\n");
  EXPECT_EQ(
      check_json(CheckReport{}),
      R"j({"usable": false, "verdict": "", "aggregators": [], "p2p_net": "", "p2p_ok": true, )j"
      R"j("nics": [], "cuda": false, "device_memory": "", "device_ok": true, "resolved": ""})j"
      "\n");
}

// The model as it was before cores per host and measured defaults (with the hybrid row since):
// 100 Gbit/s aggregators with 8 cores of 10 Gbit/s.
inline PlanInput fixed_cores_plan_input() {
  PlanInput in;
  in.agg_gbit = 100;
  in.agg_cores = 8;
  in.core_gbit = 10;
  return in;
}

TEST(CliJson, PlanAsBefore) {
  EXPECT_EQ(
      plan_json(fixed_cores_plan_input(), plan(fixed_cores_plan_input())),
      R"j({"workers": 8, "worker_gbit": 100, "agg_gbit": 100, "root_gbit": 100, "agg_cores": 8, "core_gbit": 10, "dataplane": "udp", "tree_results": "leaf", "layouts": [{"layout": "ring", "aggregators": 0, "algbw_gbit": 57.142857142857146, "of_link": 0.5714285714285715, "vs_ring": 1, "limit": "worker link", "cores": 0}, )j"
      R"j({"layout": "1 aggregator", "aggregators": 1, "algbw_gbit": 10, "of_link": 0.1, "vs_ring": 0.175, "limit": "aggregator cores", "cores": 8}, )j"
      R"j({"layout": "1 aggregator + ring (hybrid)", "aggregators": 1, "algbw_gbit": 61.42857142857143, "of_link": 0.6142857142857143, "vs_ring": 1.075, "limit": "worker link and aggregator cores, ring share 0.837", "cores": 8, "ring_share": 0.8372093023255813}, )j"
      R"j({"layout": "2 striped", "aggregators": 2, "algbw_gbit": 20, "of_link": 0.2, "vs_ring": 0.35, "limit": "aggregator cores", "cores": 8}, )j"
      R"j({"layout": "4 striped", "aggregators": 4, "algbw_gbit": 40, "of_link": 0.4, "vs_ring": 0.7, "limit": "aggregator cores", "cores": 8}, )j"
      R"j({"layout": "8 striped", "aggregators": 8, "algbw_gbit": 80, "of_link": 0.8, "vs_ring": 1.4, "limit": "aggregator cores", "cores": 8}, )j"
      R"j({"layout": "16 striped", "aggregators": 16, "algbw_gbit": 100, "of_link": 1, "vs_ring": 1.75, "limit": "worker link", "cores": 5}, )j"
      R"j({"layout": "tree 2 leaves + root", "aggregators": 3, "algbw_gbit": 20, "of_link": 0.2, "vs_ring": 0.35, "limit": "leaf link", "cores": 8}, )j"
      R"j({"layout": "tree 3 leaves + root", "aggregators": 4, "algbw_gbit": 25, "of_link": 0.25, "vs_ring": 0.4375, "limit": "leaf link", "cores": 8}, )j"
      R"j({"layout": "tree 4 leaves + root", "aggregators": 5, "algbw_gbit": 20, "of_link": 0.2, "vs_ring": 0.35, "limit": "root cores", "cores": 8}, )j"
      R"j({"layout": "tree 5 leaves + root", "aggregators": 6, "algbw_gbit": 16, "of_link": 0.16, "vs_ring": 0.27999999999999997, "limit": "root cores", "cores": 8}, )j"
      R"j({"layout": "tree 6 leaves + root", "aggregators": 7, "algbw_gbit": 13.333333333333334, "of_link": 0.13333333333333333, "vs_ring": 0.23333333333333334, "limit": "root cores", "cores": 8}, )j"
      R"j({"layout": "tree 7 leaves + root", "aggregators": 8, "algbw_gbit": 11.428571428571429, "of_link": 0.11428571428571428, "vs_ring": 0.19999999999999998, "limit": "root cores", "cores": 8}]})j"
      "\n");
  EXPECT_EQ(
      plan_json(golden_plan_input(), plan(golden_plan_input())),
      R"j({"workers": 6, "worker_gbit": 25, "agg_gbit": 40, "root_gbit": 100, "agg_cores": 3, "core_gbit": 7.5, "dataplane": "udp", "tree_results": "direct", "layouts": [{"layout": "ring", "aggregators": 0, "algbw_gbit": 15, "of_link": 0.6, "vs_ring": 1, "limit": "worker link", "cores": 0}, )j"
      R"j({"layout": "1 aggregator", "aggregators": 1, "algbw_gbit": 3.75, "of_link": 0.15, "vs_ring": 0.25, "limit": "aggregator cores", "cores": 3}, )j"
      R"j({"layout": "1 aggregator + ring (hybrid)", "aggregators": 1, "algbw_gbit": 16.499999999999996, "of_link": 0.6599999999999998, "vs_ring": 1.0999999999999999, "limit": "worker link and aggregator cores, ring share 0.773", "cores": 3, "ring_share": 0.7727272727272727}, )j"
      R"j({"layout": "2 striped", "aggregators": 2, "algbw_gbit": 7.5, "of_link": 0.3, "vs_ring": 0.5, "limit": "aggregator cores", "cores": 3}, )j"
      R"j({"layout": "4 striped", "aggregators": 4, "algbw_gbit": 15, "of_link": 0.6, "vs_ring": 1, "limit": "aggregator cores", "cores": 3}, )j"
      R"j({"layout": "8 striped", "aggregators": 8, "algbw_gbit": 25, "of_link": 1, "vs_ring": 1.6666666666666667, "limit": "worker link", "cores": 3}, )j"
      R"j({"layout": "tree 2 leaves + root", "aggregators": 3, "algbw_gbit": 7.5, "of_link": 0.3, "vs_ring": 0.5, "limit": "leaf cores", "cores": 3}, )j"
      R"j({"layout": "tree 3 leaves + root", "aggregators": 4, "algbw_gbit": 7.5, "of_link": 0.3, "vs_ring": 0.5, "limit": "root cores", "cores": 3}, )j"
      R"j({"layout": "tree 4 leaves + root", "aggregators": 5, "algbw_gbit": 5.625, "of_link": 0.225, "vs_ring": 0.375, "limit": "root cores", "cores": 3}, )j"
      R"j({"layout": "tree 5 leaves + root", "aggregators": 6, "algbw_gbit": 4.5, "of_link": 0.18, "vs_ring": 0.3, "limit": "root cores", "cores": 3}, )j"
      R"j({"layout": "tree 4 leaves + 2 mid + root", "aggregators": 7, "algbw_gbit": 11.25, "of_link": 0.45, "vs_ring": 0.75, "limit": "leaf cores", "cores": 3}]})j"
      "\n");
}

TEST(CliJson, AdminAsBefore) {
  const std::vector<AdminResult> results = {{true, "draining: 2 jobs told to leave"},
                                            {false, "HTTP 403: bad signature"}};
  EXPECT_EQ(
      admin_json({"h1:9470", "h\"2"}, results),
      R"j({"daemons": [{"address": "h1:9470", "ok": true, "message": "draining: 2 jobs told to leave"}, )j"
      R"j({"address": "h\"2", "ok": false, "message": "HTTP 403: bad signature"}]})j"
      "\n");
}

// The one change: control characters with a short escape in JSON (\b \f \n \r \t) are
// written so; the hand-written writer wrote \u000a and the like. Other control characters
// stay \u00XX; both forms read back as the same string.
TEST(CliJson, ShortEscapesForControlCharacters) {
  const std::vector<AdminResult> results = {{false, "a\nb\tc\rd\x01"}};
  EXPECT_EQ(admin_json({"h"}, results),
            R"j({"daemons": [{"address": "h", "ok": false, "message": "a\nb\tc\rd\u0001"}]})j"
            "\n");
}

}  // namespace
}  // namespace conflux::cli
