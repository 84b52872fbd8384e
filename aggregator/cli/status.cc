// SPDX-License-Identifier: Apache-2.0
#include "aggregator/cli/status.h"

#include <chrono>
#include <map>
#include <thread>

#include "aggregator/cli/http_get.h"
#include "aggregator/cli/prom_text.h"
#include "conflux/common/json_text.h"
#include "fmt/format.h"

namespace conflux::cli {
namespace {

// Per-job sums of `name` from a scrape.
std::map<std::string, double> by_job(const std::vector<Sample>& s, std::string_view name) {
  std::map<std::string, double> out;
  for (const Sample& x : s) {
    if (x.name == name && x.labels.count("conflux_job")) out[x.labels.at("conflux_job")] += x.value;
  }
  return out;
}

std::optional<std::vector<Sample>> scrape(const std::string& host, int port, int timeout_ms,
                                          std::string* err) {
  auto body = http::get(host, port, "/metrics", timeout_ms, err);
  if (!body) return std::nullopt;
  return parse_prom_text(*body, err);
}

json::Json job_json(const JobStatus& j) {
  return {{"id", j.id},
          {"workers", j.workers},
          {"slots", j.slots},
          {"packets_per_second", json::fixed(j.packets_per_s, 1)},
          {"bytes_per_second", json::fixed(j.bytes_per_s, 1)},
          {"drops", j.drops},
          {"retransmits_served", j.retransmits},
          {"grant_mbps", j.grant_mbps},
          {"share_weight", j.share_weight},
          {"tenant", j.tenant},
          {"results", j.multicast ? "multicast" : "unicast"}};
}

json::Json daemon_json(const DaemonStatus& d) {
  json::Json out = {{"address", d.address}, {"ok", d.ok}};
  if (!d.ok) out["error"] = d.error;
  if (d.version.empty()) return out;
  out.update(json::Json{{"health", d.health},
                        {"draining", d.draining},
                        {"version", d.version},
                        {"dataplane", d.dataplane},
                        {"threads", d.threads},
                        {"uptime_seconds", d.uptime_s},
                        {"jobs_active", d.jobs_active},
                        {"slots_in_use", d.slots_in_use},
                        {"control_connections", d.connections},
                        {"packets_per_second", json::fixed(d.packets_per_s, 1)},
                        {"bytes_per_second", json::fixed(d.bytes_per_s, 1)},
                        {"drops", d.drops},
                        {"retransmits_served", d.retransmits},
                        {"multicast_unasked_mbps", d.multicast_unasked_mbps},
                        {"config_generation", d.config_generation}});
  json::Json& jobs = out["jobs"] = json::Json::array();
  for (const JobStatus& j : d.jobs) jobs.push_back(job_json(j));
  return out;
}

}  // namespace

DaemonStatus query_status(const std::string& address, int interval_ms, int timeout_ms) {
  DaemonStatus d;
  d.address = address;
  std::string host;
  int port = 0;
  if (Status st = parse_target(address, &host, &port); !st.ok()) {
    d.error = st.message();
    return d;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto first = scrape(host, port, timeout_ms, &d.error);
  if (!first) return d;
  std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  const auto t1 = std::chrono::steady_clock::now();
  auto second = scrape(host, port, timeout_ms, &d.error);
  if (!second) return d;
  auto health = http::get(host, port, "/healthz", timeout_ms, &d.error);
  d.health = health ? (health->starts_with("ok") ? "ok" : *health) : "unreachable";
  if (!health) return d;
  const double dt = std::chrono::duration<double>(t1 - t0).count();
  const auto& m = *second;
  for (const Sample& s : m) {
    if (s.name == "conflux_build_info") {
      d.version = s.labels.count("version") ? s.labels.at("version") : "";
      d.dataplane = s.labels.count("dataplane") ? s.labels.at("dataplane") : "";
    }
  }
  d.threads = static_cast<uint64_t>(sum(m, "conflux_dataplane_threads"));
  d.uptime_s = static_cast<uint64_t>(sum(m, "conflux_uptime_seconds"));
  d.jobs_active = static_cast<uint64_t>(sum(m, "conflux_jobs_active"));
  d.draining = sum(m, "conflux_draining") > 0;
  d.config_generation = static_cast<uint64_t>(sum(m, "conflux_config_generation"));
  d.slots_in_use = static_cast<uint64_t>(sum(m, "conflux_slots_in_use"));
  d.drops = static_cast<uint64_t>(sum(m, "conflux_dataplane_drops_total"));
  d.retransmits = static_cast<uint64_t>(sum(m, "conflux_dataplane_retransmits_served_total"));
  d.connections = static_cast<uint64_t>(sum(m, "conflux_control_connections"));
  d.multicast_unasked_mbps = static_cast<uint64_t>(sum(m, "conflux_multicast_unasked_mbps"));
  d.packets_per_s = (sum(m, "conflux_dataplane_packets_in_total") -
                     sum(*first, "conflux_dataplane_packets_in_total")) /
                    dt;
  d.bytes_per_s = (sum(m, "conflux_dataplane_bytes_in_total") -
                   sum(*first, "conflux_dataplane_bytes_in_total")) /
                  dt;
  const auto workers = by_job(m, "conflux_job_workers"), slots = by_job(m, "conflux_job_slots");
  const auto p0 = by_job(*first, "conflux_job_packets_in_total");
  const auto p1 = by_job(m, "conflux_job_packets_in_total");
  const auto b0 = by_job(*first, "conflux_job_bytes_in_total");
  const auto b1 = by_job(m, "conflux_job_bytes_in_total");
  const auto jd = by_job(m, "conflux_job_drops_total");
  const auto jr = by_job(m, "conflux_job_unicast_resends_total");
  const auto grants = by_job(m, "conflux_job_grant_mbps");
  const auto weights = by_job(m, "conflux_job_share_weight");
  const auto multicast = by_job(m, "conflux_job_multicast");
  std::map<std::string, std::string> tenants;
  for (const Sample& x : m) {
    if (x.name == "conflux_job_share_weight" && x.labels.count("conflux_job") &&
        x.labels.count("tenant")) {
      tenants[x.labels.at("conflux_job")] = x.labels.at("tenant");
    }
  }
  for (const auto& [id, w] : workers) {
    JobStatus j;
    j.id = id;
    j.workers = static_cast<uint64_t>(w);
    j.slots = slots.count(id) ? static_cast<uint64_t>(slots.at(id)) : 0;
    // A job that joined between the scrapes counts from 0.
    j.packets_per_s = (p1.count(id) ? p1.at(id) : 0) - (p0.count(id) ? p0.at(id) : 0);
    j.bytes_per_s = (b1.count(id) ? b1.at(id) : 0) - (b0.count(id) ? b0.at(id) : 0);
    j.packets_per_s /= dt;
    j.bytes_per_s /= dt;
    j.drops = jd.count(id) ? static_cast<uint64_t>(jd.at(id)) : 0;
    j.retransmits = jr.count(id) ? static_cast<uint64_t>(jr.at(id)) : 0;
    j.grant_mbps = grants.count(id) ? static_cast<uint64_t>(grants.at(id)) : 0;
    j.share_weight = weights.count(id) ? static_cast<uint64_t>(weights.at(id)) : 1;
    j.tenant = tenants.count(id) ? tenants.at(id) : "";
    j.multicast = multicast.count(id) && multicast.at(id) > 0;
    d.jobs.push_back(j);
  }
  d.ok = d.health == "ok";
  if (!d.ok) d.error = "unhealthy: /healthz says " + d.health;
  return d;
}

std::string status_table(const std::vector<DaemonStatus>& all) {
  std::string out = fmt::format(
      "{:<22} {:<8} {:<8} {:<9} {:>7} {:>8} {:>5} {:>6} {:>11} {:>12} "
      "{:>8} {:>8} {:>6}\n",
      "DAEMON", "HEALTH", "VERSION", "DATAPLANE", "THREADS", "UPTIME", "JOBS", "SLOTS", "PKT/S",
      "BYTES/S", "DROPS", "RETRANS", "CONFIG");
  for (const DaemonStatus& d : all) {
    if (!d.ok && d.version.empty()) {
      out += fmt::format("{:<22} {:<8} {}\n", d.address, "DOWN", d.error);
      continue;
    }
    out += fmt::format(
        "{:<22} {:<8} {:<8} {:<9} {:>7} {:>7}s {:>5} {:>6} {:>11.0f} {:>12.0f} {:>8} {:>8} "
        "{:>6}\n",
        d.address, d.ok ? (d.draining ? "draining" : "ok") : d.health, d.version, d.dataplane,
        d.threads, d.uptime_s, d.jobs_active, d.slots_in_use, d.packets_per_s, d.bytes_per_s,
        d.drops, d.retransmits, d.config_generation);
    if (d.multicast_unasked_mbps > 0) {
      out += fmt::format(
          "  {} Mbit/s of multicast reach this host unasked: the network floods it to every "
          "port (no IGMP snooping?)\n",
          d.multicast_unasked_mbps);
    }
    for (const JobStatus& j : d.jobs) {
      out += fmt::format(
          "  job {:<10} workers {:>4}  slots {:>5}  {:>11.0f} pkt/s {:>12.0f} B/s  drops {}  "
          "retrans {}  grant {} Mbit/s  weight {}{}  results by {}\n",
          j.id, j.workers, j.slots, j.packets_per_s, j.bytes_per_s, j.drops, j.retransmits,
          j.grant_mbps, j.share_weight, j.tenant.empty() ? "" : " (tenant " + j.tenant + ")",
          j.multicast ? "multicast" : "unicast");
    }
  }
  return out;
}

std::string status_json(const std::vector<DaemonStatus>& all) {
  // {"daemons": [ with one daemon a line.
  std::string out = "{\"daemons\": [";
  for (size_t i = 0; i < all.size(); ++i) {
    out += (i ? ",\n  " : "\n  ") + json::one_line(daemon_json(all[i]));
  }
  return out + "\n]}\n";
}

}  // namespace conflux::cli
