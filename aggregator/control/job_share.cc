// SPDX-License-Identifier: Apache-2.0
// JobManager, fair share (aggregator/README.md "Fair share"): the capacity divided among the
// live jobs by weight, each job's achieved result rate, and the switch of multicast jobs to
// unicast when the network floods multicast (multicast_flood.h).
#include <arpa/inet.h>

#include <algorithm>

#include "aggregator/control/job_manager.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

uint32_t JobManager::share_mbps(uint64_t job_key) const {
  auto it = active_.find(job_key);
  return it == active_.end() ? 0 : it->second.job->grant_mbps();
}

void JobManager::regrant(uint64_t changed, proto::CapacityReason why, JoinOutbox& out) {
  (void)regrant_except(changed, why, out);
}

size_t JobManager::regrant_all(proto::CapacityReason why, JoinOutbox& out) {
  return regrant_except(std::nullopt, why, out);
}

size_t JobManager::regrant_except(std::optional<uint64_t> changed, proto::CapacityReason why,
                                  JoinOutbox& out) {
  if (active_.empty()) return 0;
  uint64_t weights = 0;
  for (const auto& [key, a] : active_) weights += tenant_weight(a.tenant);
  size_t told = 0;
  for (auto& [key, a] : active_) {
    // In proportion to the weights: with no demands known, that is the weighted max-min share.
    const uint32_t weight = tenant_weight(a.tenant);
    a.job->set_share_weight(weight);
    const auto share = static_cast<uint32_t>(uint64_t{capacity_mbps_} * weight / weights);
    // A job alone is not paced beyond the daemon's own max_mbps bucket (as before fair share).
    const uint32_t pace =
        capacity_mbps_ != 0 && active_.size() > 1 ? std::max<uint32_t>(share, 1) : 0;
    const bool moved = a.job->grant_mbps() != share;
    a.job->set_grant(share, pace);
    // The joining job gets its grant in the Capacity after its JoinAck.
    if (!moved || key == changed) continue;
    spdlog::info(
        "job {} (key {:016x}): grant now {} Mbit/s of {} ({} live jobs, weight {} of {}; {})",
        a.job_id, key, share, capacity_mbps_, active_.size(), weight, weights,
        proto::capacity_reason_name(why));
    for (ConnId c : a.conns) {
      if (c != 0) out.send_grant(c, share, why);
    }
    ++told;
  }
  return told;
}

void JobManager::sample_rates(Clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - last_sample_).count();
  if (dt < 1.0) return;
  last_sample_ = now;
  // What arrived in this namespace because this daemon asked for it: every datagram its
  // dataplane received (contributions, a parent's results, strays).
  uint64_t in_bytes = 0, in_packets = 0;
  for (unsigned q = 0; q < dp_.n_queues(); ++q) {
    in_bytes += dp_.counters(q).bytes_in.get();
    in_packets += dp_.counters(q).packets_in.get();
  }
  const uint64_t asked =
      in_bytes - dp_in_bytes_ + MulticastFlood::kHeaderBytes * (in_packets - dp_in_packets_);
  dp_in_bytes_ = in_bytes;
  dp_in_packets_ = in_packets;
  double egress = 0;
  // The flood is worth watching only while a job here is multicast, and can be told only
  // while no worker shares this network namespace (its results and ring would count too).
  bool multicast = false, local = false;
  for (auto& [key, a] : active_) {
    multicast = multicast || a.job->multicast();
    for (const sockaddr_in& w : a.job->params().workers) local = local || is_local(w);
    uint64_t bytes = 0;
    for (unsigned q = 0; q < a.job->n_queues(); ++q) bytes += a.job->counters(q).result_bytes.get();
    const double mbps = static_cast<double>(bytes - a.result_bytes) * 8 / 1e6 / dt;
    a.job->set_result_mbps(mbps);
    egress += mbps;
    a.result_bytes = bytes;
  }
  flood_to_unicast(multicast && !local, asked, dt, egress);
}

bool JobManager::is_local(const sockaddr_in& a) const {
  const uint32_t ip = ntohl(a.sin_addr.s_addr);
  return (ip >> 24) == 127 || std::find(local_addrs_.begin(), local_addrs_.end(),
                                        a.sin_addr.s_addr) != local_addrs_.end();
}

void JobManager::flood_to_unicast(bool watch, uint64_t asked_bytes, double seconds,
                                  double egress_mbps) {
  const bool was = flood_.flooding();
  const double line = capacity_mbps_;
  const bool flooding =
      flood_.sample(watch ? read_ip_in_octets() : std::nullopt, asked_bytes, seconds, line);
  counters_.multicast_unasked_mbps.set(static_cast<uint64_t>(flood_.unasked_mbps() + 0.5));
  if (uint64_t s = 0; flooding && !was && log_limit_.allow(&s)) {
    spdlog::warn(
        "{:.0f} Mbit/s reach this host unasked (for 2 s, beyond what this daemon's dataplane "
        "received): the network floods multicast to every port (a switch without IGMP "
        "snooping?){} ({} similar suppressed)",
        flood_.unasked_mbps(),
        cfg_.multicast_flood_unicast ? "; multicast jobs go unicast where the fan-out fits"
                                     : " (multicast_flood_unicast = false: nothing changes)",
        s);
  }
  if (!flooding || !cfg_.multicast_flood_unicast) return;
  for (auto& [key, a] : active_) {
    Job& job = *a.job;
    if (!job.multicast()) continue;
    const auto members = static_cast<uint32_t>(job.params().members.size());
    if (!MulticastFlood::unicast_fits(egress_mbps, members, job.result_mbps(), line)) continue;
    job.set_multicast(false);  // for good: back on the group, its flood on the others returns
    egress_mbps += (members - 1) * job.result_mbps();
    counters_.multicast_flood_unicast.inc();
    spdlog::info(
        "job {} (key {:016x}): results by unicast from now on: the network floods multicast "
        "({:.0f} Mbit/s unasked here), and the fan-out to its {} ranks fits the line rate ({:.0f} "
        "of {:.0f} Mbit/s)",
        a.job_id, key, flood_.unasked_mbps(), members, egress_mbps, line);
  }
}

}  // namespace conflux::agg
