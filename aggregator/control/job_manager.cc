// SPDX-License-Identifier: Apache-2.0
// JobManager: construction, creating a job once its rendezvous (job_rendezvous.cc) or its
// parent (job_tree.cc) granted it, and ending it when its members are gone.
#include "aggregator/control/job_manager.h"

#include <arpa/inet.h>

#include "aggregator/util/link_speed.h"
#include "aggregator/util/random.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

using proto::Join;
using proto::JoinAck;
using proto::Status;

JobManager::JobManager(const Config& cfg, JobTable& jobs, const Dataplane& dp,
                       ControlCounters& counters, UplinkClient* uplink,
                       MulticastAgreement* multicast)
    : cfg_(cfg),
      jobs_(jobs),
      dp_(dp),
      ports_(dp.ports()),
      counters_(counters),
      multicast_(multicast),
      uplink_(uplink) {
  // This host's addresses (its network namespace's): a worker at one of them shares its
  // IPv4 counters.
  for (const auto& [name, addr] : ipv4_interfaces()) local_addrs_.push_back(addr);
  in_addr listen{};
  inet_pton(AF_INET, cfg_.listen.c_str(), &listen);  // checked at load
  local_addrs_.push_back(listen.s_addr);
  if (multicast_ != nullptr && uplink_ != nullptr) {
    multicast_->set_on_multicast([this](Job& job, const std::vector<ConnId>& conns,
                                        JoinOutbox& out) { go_straight_down(job, conns, out); });
  }
}

std::string_view JobManager::tenant_name(uint32_t tenant) const {
  tenant &= ~kPreviousSecret;
  return tenant == kSharedTenant ? std::string_view() : cfg_.tenants.at(tenant - 1).name;
}

uint32_t JobManager::tenant_weight(uint32_t tenant) const {
  tenant &= ~kPreviousSecret;
  return tenant == kSharedTenant ? 1 : static_cast<uint32_t>(cfg_.tenants.at(tenant - 1).weight);
}

const std::string& JobManager::tenant_secret(uint32_t tenant) const {
  if ((tenant & kPreviousSecret) != 0) {
    tenant &= ~kPreviousSecret;
    return tenant == kSharedTenant ? previous_secret_ : previous_tenant_secrets_.at(tenant - 1);
  }
  return tenant == kSharedTenant ? cfg_.secret : cfg_.tenants.at(tenant - 1).secret;
}

void JobManager::create(uint64_t key, Pending& p, uint32_t granted, uint32_t payload_bytes,
                        bool deterministic, std::shared_ptr<const JobParams::Uplink> uplink,
                        Clock::time_point now, JoinOutbox& out) {
  const Join& f = p.first;
  const uint32_t id = jobs_.allocate_id();
  const bool leaf = uplink != nullptr;
  const bool signed_up = leaf && uplink->mac_key.has_value();
  if (id == 0) {
    if (leaf) {
      slots_used_ -= granted;
      uplink_->leave(key);
    }
    return no_capacity(key, p, out);
  }
  JobParams jp;
  jp.id = id;
  jp.key = key;
  jp.token = random_u64();
  jp.n_workers = f.n_workers;
  jp.slots = granted;
  jp.payload_bytes = payload_bytes;
  if (cfg_.data_mac) jp.mac_key = proto::derive_data_key(tenant_secret(p.tenant), id, jp.token);
  jp.tenant = tenant_name(p.tenant);
  jp.share_weight = tenant_weight(p.tenant);
  jp.deterministic = deterministic;
  jp.served = p.joined;
  jp.weight.assign(f.n_workers, 0);
  jp.workers.resize(f.n_workers);
  jp.child_addrs.resize(f.n_workers);
  jp.uplink = std::move(uplink);
  Active a{id,
           granted,
           std::vector<ConnId>(f.n_workers, 0),
           0,
           std::vector<bool>(f.n_workers, false),
           std::vector<bool>(f.n_workers, false)};
  for (uint32_t r = 0; r < f.n_workers; ++r) {
    auto& w = p.ranks[r];
    if (!w) continue;
    jp.members.push_back(r);
    a.child[r] = !w->child_addrs.empty();
    a.direct_ok[r] = a.child[r] && direct_results_ && (w->flags & proto::kJoinFlagDirectResults);
    jp.weight[r] = w->weight;
    jp.workers[r] = w->addr;
    jp.child_addrs[r] = std::move(w->child_addrs);
    a.conns[r] = w->conn;
    ++a.alive;
  }
  JoinAck ack;
  ack.status = Status::kOk;
  ack.job_id = id;
  ack.job_token = jp.token;
  ack.granted_slots = granted;
  ack.payload_bytes = jp.payload_bytes;
  ack.flags = (jp.deterministic ? proto::kJoinFlagDeterministic : 0) |
              (cfg_.data_mac ? proto::kJoinFlagDataMac : 0);
  ack.ports = ports_;
  // Multicast (SPEC §8) when every rank asked for it; without a probe when every rank said so.
  uint8_t all_flags = 0xff;
  for (auto& w : p.ranks) {
    if (w) all_flags &= w->flags;
  }
  std::optional<sockaddr_in> group;
  if (multicast_ != nullptr && (all_flags & proto::kJoinFlagMulticast) != 0) {
    group = multicast_->grant(id);
  }
  if (group) {
    jp.group = *group;
    ack.flags |= proto::kJoinAckFlagMulticast;
    ack.group = ntohl(group->sin_addr.s_addr);
    ack.group_port = ntohs(group->sin_port);
  }
  auto job = std::make_unique<Job>(std::move(jp), static_cast<unsigned>(ports_.size()));
  Job& published = *job;
  a.job = &published;
  a.result_bytes = 0;
  a.tenant = p.tenant;
  jobs_.publish(std::move(job));
  if (!leaf) slots_used_ += granted;  // a leaf reserved them when it went up
  active_.emplace(key, std::move(a));
  regrant(key, proto::CapacityReason::kJobJoined, out);  // before the JoinAcks: their Capacity
  counters_.jobs_created.inc();
  counters_.jobs_active.set(active_.size());
  counters_.slots_in_use.set(slots_used_);
  spdlog::info(
      "job {} (key {:016x}) created: {} of {} ranks here, {} slots, {} bytes/packet{}{}{}{}", id,
      key, p.joined, f.n_workers, granted, ack.payload_bytes,
      (ack.flags & proto::kJoinFlagDeterministic) ? ", deterministic" : "",
      cfg_.data_mac ? ", data MAC" : "",
      leaf
          ? (signed_up ? ", under the parent aggregator (signed)" : ", under the parent aggregator")
          : "",
      (p.tenant & ~kPreviousSecret) == kSharedTenant
          ? std::string()
          : fmt::format(", tenant {} (weight {})", tenant_name(p.tenant), tenant_weight(p.tenant)));
  const Active& live = active_.at(key);
  for (uint32_t r = 0; r < f.n_workers; ++r) {
    if (!p.ranks[r]) continue;
    JoinAck mine = ack;  // a child offered DirectDown hears so (SPEC.md §7), no one else
    if (live.direct_ok[r]) mine.flags |= proto::kJoinAckFlagDirectResults;
    out.deliver(p.ranks[r]->conn, mine);
  }
  if (group) {
    multicast_->start(published, active_.at(key).conns,
                      (all_flags & proto::kJoinFlagMulticastNoProbe) != 0, now, out);
  }
}

void JobManager::on_gone(ConnId conn, uint64_t job_key, uint32_t rank, bool member, bool lost,
                         JoinOutbox& out) {
  if (!member) {
    if (auto u = uplinking_.find(job_key); u != uplinking_.end()) {
      // A member left while its leaf joins the parent: give the job up here and above.
      Pending& p = u->second;
      if (rank >= p.ranks.size() || !p.ranks[rank] || p.ranks[rank]->conn != conn) return;
      p.ranks[rank].reset();
      p.abandoned = true;  // on_tick() answers the others and leaves the parent
      return;
    }
    auto it = pending_.find(job_key);
    if (it == pending_.end()) return;
    Pending& p = it->second;
    if (rank < p.ranks.size() && p.ranks[rank] && p.ranks[rank]->conn == conn) {
      p.joined -= p.ranks[rank]->weight;
      p.ranks[rank].reset();
      if (p.joined == 0) pending_.erase(it);
    }
    return;
  }
  auto it = active_.find(job_key);
  if (it == active_.end()) return;
  Active& a = it->second;
  if (rank >= a.conns.size() || a.conns[rank] != conn) return;
  a.conns[rank] = 0;
  // Without that child's ranks no slot completes again; a lost worker is the workers' business.
  if (lost && a.child[rank]) a.broken = true;
  if (--a.alive > 0) return;
  spdlog::info("job {} (key {:016x}) deleted: every rank left", a.job_id, job_key);
  if (uplink_ != nullptr) uplink_->leave(job_key);
  if (multicast_ != nullptr) multicast_->on_job_end(a.job_id);
  jobs_.retire(a.job_id);
  slots_used_ -= a.slots;
  active_.erase(it);
  counters_.jobs_deleted.inc();
  counters_.jobs_active.set(active_.size());
  counters_.slots_in_use.set(slots_used_);
  regrant(job_key, proto::CapacityReason::kJobLeft, out);
}

void JobManager::on_tick(Clock::time_point now, JoinOutbox& out) {
  sample_rates(now);
  expire_rendezvous(now, out);
  std::vector<uint64_t> broken;
  for (auto& [key, a] : active_) {
    if (a.broken) broken.push_back(key);
  }
  for (uint64_t key : broken) {  // end_member() may delete the job: look it up each time
    auto it = active_.find(key);
    if (it == active_.end()) continue;
    it->second.broken = false;
    spdlog::warn("job {} (key {:016x}): a child aggregator was lost; ending it for the others",
                 it->second.job_id, key);
    const std::vector<ConnId> conns = it->second.conns;
    for (ConnId c : conns) {
      if (c != 0) out.end_member(c, Status::kInternal, "child aggregator lost");
    }
  }
  for (auto it = uplinking_.begin(); it != uplinking_.end();) {
    if (!it->second.abandoned) {
      ++it;
      continue;
    }
    spdlog::warn("job key {:016x}: a rank left while joining the parent; job given up", it->first);
    uplink_->leave(it->first);
    Pending p = std::move(it->second);
    it = uplinking_.erase(it);
    slots_used_ -= p.granted;
    counters_.slots_in_use.set(slots_used_);
    for (auto& w : p.ranks) {
      if (w) reject(w->conn, Status::kJoinTimeout, out);
    }
  }
  jobs_.reclaim();
}

}  // namespace conflux::agg
