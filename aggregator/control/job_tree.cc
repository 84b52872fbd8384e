// SPDX-License-Identifier: Apache-2.0
// JobManager, the reduction tree (SPEC.md §7): a leaf joins its parent for a job and creates
// the job with the parent's grant, ends it when the parent is lost; results straight down,
// asked for by a leaf and granted by a parent.
#include <arpa/inet.h>

#include <algorithm>

#include "aggregator/control/job_manager.h"
#include "aggregator/util/ipv4.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

using proto::Join;
using proto::Status;

void JobManager::join_parent(uint64_t key, Pending& p, uint32_t granted, uint32_t payload,
                             bool deterministic) {
  const Join& f = p.first;
  Join up;
  up.job_key = key;
  up.n_workers = f.n_workers;
  up.weight = static_cast<uint16_t>(p.joined);
  // Deeper trees: the parent serves the first level above, and passes the rest on up.
  if (!f.served_up.empty()) {
    up.served = f.served_up.front();
    up.served_up.assign(f.served_up.begin() + 1, f.served_up.end());
  }
  up.rank = 0;
  for (uint32_t r = 0; r < p.ranks.size(); ++r) {
    if (p.ranks[r]) {
      up.rank = r;  // the leaf's contributor id at the parent: its lowest rank
      break;
    }
  }
  up.flags = (deterministic ? proto::kJoinFlagDeterministic : 0) |
             (cfg_.tree_results == "direct" ? proto::kJoinFlagDirectResults : 0);
  up.requested_slots = granted;
  up.payload_bytes = payload;
  // What is left of the rendezvous deadline: the whole tree must form within it.
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline - Clock::now());
  up.join_timeout_ms = static_cast<uint32_t>(std::max<int64_t>(left.count(), 1));
  p.granted = granted;
  p.payload_bytes = payload;
  slots_used_ += granted;
  counters_.slots_in_use.set(slots_used_);
  spdlog::info("job key {:016x}: {} of {} ranks joined here; joining the parent aggregator", key,
               p.joined, f.n_workers);
  uplink_->join(up);
  uplinking_.emplace(key, std::move(p));
}

void JobManager::on_uplink_events(JoinOutbox& out) {
  for (const UplinkEvent& e : uplink_->take_events()) {
    if (e.kind == UplinkEvent::Kind::kJoined) {
      uplink_joined(e, out);
      continue;
    }
    if (auto it = uplinking_.find(e.job_key); it != uplinking_.end()) {
      spdlog::warn("job key {:016x}: joining the parent aggregator failed: {}", e.job_key, e.why);
      give_up_uplinking(it, e.status == Status::kOk ? Status::kInternal : e.status, out);
      continue;
    }
    auto it = active_.find(e.job_key);
    if (it == active_.end()) continue;
    // The parent is gone: no slot of this job can complete again. End it for every member
    // (SPEC.md §7), which moves the workers to their ring.
    spdlog::warn("job {} (key {:016x}): {}; ending it for its members", it->second.job_id,
                 e.job_key, e.why);
    const std::vector<ConnId> conns = it->second.conns;  // end_member() comes back to on_gone
    for (ConnId c : conns) {
      if (c != 0) out.end_member(c, Status::kInternal, "parent aggregator lost: " + e.why);
    }
  }
}

void JobManager::give_up_uplinking(std::unordered_map<uint64_t, Pending>::iterator it,
                                   Status status, JoinOutbox& out) {
  Pending p = std::move(it->second);
  uplinking_.erase(it);
  slots_used_ -= p.granted;
  counters_.slots_in_use.set(slots_used_);
  for (auto& w : p.ranks) {
    if (w) reject(w->conn, status, out);
  }
}

void JobManager::uplink_joined(const UplinkEvent& e, JoinOutbox& out) {
  auto it = uplinking_.find(e.job_key);
  if (it == uplinking_.end()) {  // the job was given up meanwhile
    uplink_->leave(e.job_key);
    return;
  }
  // Data MAC across levels (SPEC.md §7): the link to the parent is signed when the parent
  // signs. A leaf that signs its own members' traffic does not forward unsigned partials.
  const bool parent_mac = (e.ack.flags & proto::kJoinFlagDataMac) != 0;
  if (cfg_.data_mac && !parent_mac) {
    spdlog::warn(
        "job key {:016x}: the parent aggregator runs without 'data_mac' but this leaf has it; "
        "refusing the job rather than sending its partial sums up unsigned",
        e.job_key);
    uplink_->leave(e.job_key);
    give_up_uplinking(it, Status::kUnsupported, out);
    return;
  }
  Pending p = std::move(it->second);
  uplinking_.erase(it);
  auto up = std::make_shared<JobParams::Uplink>();
  up->job_id = e.ack.job_id;
  up->token = e.ack.job_token;
  // The parent keys the job with the secret this leaf's Join verified under: the tree's.
  if (parent_mac) up->mac_key = proto::derive_data_key(cfg_.secret, up->job_id, up->token);
  for (uint32_t r = 0; r < p.ranks.size(); ++r) {
    if (p.ranks[r]) {
      up->contributor = static_cast<uint16_t>(r);
      break;
    }
  }
  // Results straight down (SPEC.md §7) when the parent offers it and every member can take
  // them. A signed job only under the shared secret: the parent signs for the members with a
  // key derived from it (the tree's), which a tenant's job does not use.
  up->direct = (e.ack.flags & proto::kJoinAckFlagDirectResults) != 0 &&
               (!cfg_.data_mac || p.tenant == kSharedTenant);
  for (const auto& w : p.ranks) {
    if (w && (w->flags & proto::kJoinFlagDirectResults) == 0) up->direct = false;
  }
  for (uint16_t port : e.ack.ports) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = e.parent_ip;
    a.sin_port = htons(port);
    up->ports.push_back(a);
  }
  const uint32_t slots = std::min(p.granted, e.ack.granted_slots);
  slots_used_ -= p.granted - slots;
  const bool deterministic = (e.ack.flags & proto::kJoinFlagDeterministic) != 0;
  create(e.job_key, p, slots, std::min(p.payload_bytes, e.ack.payload_bytes), deterministic,
         std::move(up), Clock::now(), out);
}

void JobManager::go_straight_down(Job& job, const std::vector<ConnId>& conns, JoinOutbox& out) {
  const JobParams& p = job.params();
  if (p.uplink == nullptr || !p.uplink->direct) return;
  // First the members learn where else their results may come from (the parent's data
  // address and ports), then the parent is asked: no result reaches the group from the parent
  // before a member can take it (a member waits for MulticastMode, which follows, before its
  // first contribution).
  proto::ResultSource src;
  src.addr = ntohl(p.uplink->ports.front().sin_addr.s_addr);
  for (const sockaddr_in& a : p.uplink->ports) src.ports.push_back(ntohs(a.sin_port));
  for (ConnId c : conns) {
    if (c != 0) out.send_to(c, src);
  }
  uplink_->direct_down(
      p.key, proto::DirectDown{ntohl(p.group.sin_addr.s_addr), ntohs(p.group.sin_port), job.id(),
                               p.token, p.mac_key ? proto::kDirectDownSigned : uint16_t{0}});
  spdlog::info("job {}: the parent aggregator is asked to send its results straight to group {}:{}",
               job.id(), ipv4_text(ntohl(p.group.sin_addr.s_addr)), ntohs(p.group.sin_port));
}

// conflux::Status: Status in this file is proto::Status.
conflux::Status JobManager::on_direct_down(uint64_t job_key, uint32_t rank,
                                           const proto::DirectDown& d) {
  auto it = active_.find(job_key);
  if (it == active_.end()) return {};  // the job ended meanwhile
  Active& a = it->second;
  if (rank >= a.direct_ok.size() || !a.direct_ok[rank]) {
    return invalid_argument("DirectDown from a member that was not offered direct results");
  }
  sockaddr_in g{};
  g.sin_family = AF_INET;
  g.sin_addr.s_addr = htonl(d.group);
  g.sin_port = htons(d.group_port);
  const std::string where = ipv4_text(d.group) + ":" + std::to_string(d.group_port);
  // A signed child job's key derives from the tree's shared secret, which a parent that signs
  // for it must hold (SPEC.md §7).
  std::optional<proto::DataKey> key;
  if ((d.flags & proto::kDirectDownSigned) != 0) {
    if (cfg_.secret.empty()) {
      spdlog::warn(
          "job {}: child aggregator {} signs its members' data but this daemon has no shared "
          "secret to sign for it; its results still go through it",
          a.job_id, rank);
      return {};
    }
    key = proto::derive_data_key(cfg_.secret, d.job_id, d.job_token);
  }
  if (!a.job->set_direct(rank, g, d.job_id, d.job_token, key)) {
    spdlog::info(
        "job {}: child aggregator {} asked again, or {} children already take results straight "
        "down; its results still go through it",
        a.job_id, rank, Job::kMaxDirectChildren);
    return {};
  }
  spdlog::info("job {}: results for child aggregator {} go straight to its members' group {}{}",
               a.job_id, rank, where, key ? " (signed with the child's job key)" : "");
  return {};
}

}  // namespace conflux::agg
