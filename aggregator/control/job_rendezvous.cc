// SPDX-License-Identifier: Apache-2.0
// JobManager, admission and rendezvous (SPEC.md §4): each Join checked against the first of
// its job, the ranks gathered until their weights reach the job's, the slot grant; the
// deadlines of the ranks still waiting, and their cancellation.
#include <arpa/inet.h>

#include <algorithm>

#include "aggregator/control/job_manager.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

using proto::Join;
using proto::JoinAck;
using proto::Status;

namespace {

std::string tenant_label(std::string_view name) {
  return name.empty() ? std::string("the shared secret") : fmt::format("tenant '{}'", name);
}

}  // namespace

void JobManager::reject(ConnId conn, Status s, JoinOutbox& out) {
  JoinAck ack;
  ack.status = s;
  out.deliver(conn, ack);
}

void JobManager::on_join(ConnId conn, const Join& join, uint32_t tenant, const sockaddr_in& peer,
                         Clock::time_point now, JoinOutbox& out) {
  if (join.rank >= join.n_workers) return reject(conn, Status::kBadRank, out);
  // With the data MAC a packet is 28 bytes longer than its payload: the grant takes them from
  // the payload the worker asked for, which must leave room for at least 32 bytes of elements.
  if (cfg_.data_mac && join.payload_bytes < proto::kMinMacPayloadBytes) {
    return reject(conn, Status::kUnsupported, out);
  }
  // A member that counts levels above this aggregator (SPEC.md §7) needs it to have a parent.
  if (!join.served_up.empty() && uplink_ == nullptr) {
    if (uint64_t s = 0; log_limit_.allow(&s)) {
      spdlog::warn(
          "job key {:016x}: rank {} names {} aggregator level(s) above this one, which has no "
          "'parent'; refused ({} similar suppressed)",
          join.job_key, join.rank, join.served_up.size(), s);
    }
    return reject(conn, Status::kUnsupported, out);
  }
  if (active_.contains(join.job_key) || uplinking_.contains(join.job_key)) {
    auto it = active_.find(join.job_key);
    // The job already runs: a second connection for a live rank, or a late/rejoining rank.
    const bool live = it == active_.end() ||
                      (join.rank < it->second.conns.size() && it->second.conns[join.rank] != 0);
    if (uint64_t s = 0; log_limit_.allow(&s)) {
      spdlog::warn("join for running job key {:016x} rank {} rejected ({} similar suppressed)",
                   join.job_key, join.rank, s);
    }
    return reject(conn, live ? Status::kRankInUse : Status::kJobMismatch, out);
  }
  sockaddr_in addr = peer;
  if (join.udp_addr != 0) addr.sin_addr.s_addr = htonl(join.udp_addr);
  addr.sin_port = htons(join.udp_port);

  auto [it, fresh] = pending_.try_emplace(join.job_key);
  Pending& p = it->second;
  if (fresh) {
    p.first = join;
    p.tenant = tenant;
    const int64_t ms = join.join_timeout_ms == 0
                           ? cfg_.join_timeout_ms
                           : std::min<int64_t>(join.join_timeout_ms, cfg_.join_timeout_ms);
    p.deadline = now + std::chrono::milliseconds(ms);
    p.ranks.resize(join.n_workers);
    if (uint64_t s = 0; log_limit_.allow(&s)) {
      spdlog::info(
          "rendezvous for job key {:016x} opened: {} workers, {} slots, {} bytes{} ({} similar "
          "suppressed)",
          join.job_key, join.n_workers, join.requested_slots, join.payload_bytes,
          (join.flags & proto::kJoinFlagDeterministic) ? ", deterministic" : "", s);
    }
  } else {
    const Join& f = p.first;
    if (tenant != p.tenant) {
      // A rank of another tenant (or of the shared secret) cannot enter this job: its secret
      // would not key the job's data MAC, and tenants are kept apart.
      if (uint64_t s = 0; log_limit_.allow(&s)) {
        spdlog::warn(
            "job key {:016x}: rank {} authenticated as {} but the job is {}; refused ({} similar "
            "suppressed)",
            join.job_key, join.rank, tenant_label(tenant_name(tenant)),
            tenant_label(tenant_name(p.tenant)), s);
      }
      return reject(conn, Status::kAuthFailed, out);
    }
    // The multicast bits and capacity are each rank's own; the other flags must agree.
    constexpr uint8_t kPerRank = proto::kJoinFlagMulticast | proto::kJoinFlagMulticastNoProbe |
                                 proto::kJoinFlagCapacity | proto::kJoinFlagDirectResults;
    if (join.n_workers != f.n_workers || ((join.flags ^ f.flags) & ~kPerRank) != 0 ||
        join.payload_bytes != f.payload_bytes || join.requested_slots != f.requested_slots ||
        join.served != f.served || join.served_up != f.served_up) {
      if (uint64_t s = 0; log_limit_.allow(&s)) {
        spdlog::warn(
            "job key {:016x}: rank {} disagrees with the first Join ({} similar suppressed)",
            join.job_key, join.rank, s);
      }
      return reject(conn, Status::kJobMismatch, out);
    }
    if (p.ranks[join.rank].has_value()) return reject(conn, Status::kRankInUse, out);
  }
  // The weights of the members must add up to the ranks served here (SPEC.md §7).
  const uint32_t served = p.first.served == 0 ? p.first.n_workers : p.first.served;
  if (p.joined + join.weight > served) {
    if (fresh) pending_.erase(it);
    return reject(conn, Status::kJobMismatch, out);
  }
  std::vector<sockaddr_in> child_addrs;
  for (uint16_t port : join.data_ports) {
    sockaddr_in a = addr;
    a.sin_port = htons(port);
    child_addrs.push_back(a);
  }
  p.ranks[join.rank] = Waiting{conn, addr, join.weight, std::move(child_addrs), join.flags};
  p.joined += join.weight;
  if (p.joined == served) {
    Pending done = std::move(p);
    pending_.erase(it);
    complete(join.job_key, done, now, out);
  }
}

void JobManager::complete(uint64_t key, Pending& p, Clock::time_point now, JoinOutbox& out) {
  const Join& f = p.first;
  const uint64_t free_slots =
      static_cast<uint64_t>(cfg_.total_slots) > slots_used_ ? cfg_.total_slots - slots_used_ : 0;
  const uint32_t granted = static_cast<uint32_t>(std::min<uint64_t>(
      {f.requested_slots, static_cast<uint64_t>(cfg_.max_slots_per_job), free_slots}));
  if (granted == 0) return no_capacity(key, p, out);
  uint32_t payload =
      std::min<uint32_t>(f.payload_bytes, static_cast<uint32_t>(cfg_.max_payload_bytes));
  if (cfg_.data_mac) {
    // The same datagram size as the worker planned for; elements stay 8-byte aligned.
    payload = (payload - static_cast<uint32_t>(proto::kMacTrailerSize)) & ~7u;
  }
  const bool deterministic = cfg_.deterministic || (f.flags & proto::kJoinFlagDeterministic) != 0;
  if (uplink_ == nullptr) {
    return create(key, p, granted, payload, deterministic, nullptr, now, out);
  }
  // A leaf: join the parent for the whole subtree first (SPEC.md §7); the job is created when
  // the parent answers, with the smaller of the two grants.
  join_parent(key, p, granted, payload, deterministic);
}

void JobManager::no_capacity(uint64_t key, Pending& p, JoinOutbox& out) {
  if (uint64_t s = 0; log_limit_.allow(&s)) {
    spdlog::warn(
        "job key {:016x}: no capacity ({} jobs live, {} of {} slots used; {} similar "
        "suppressed)",
        key, jobs_.live(), slots_used_, cfg_.total_slots, s);
  }
  for (auto& w : p.ranks) {
    if (w) reject(w->conn, Status::kNoCapacity, out);
  }
}

void JobManager::expire_rendezvous(Clock::time_point now, JoinOutbox& out) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now < it->second.deadline) {
      ++it;
      continue;
    }
    if (uint64_t s = 0; log_limit_.allow(&s)) {
      spdlog::warn("job key {:016x}: join timeout with {} of {} ranks ({} similar suppressed)",
                   it->first, it->second.joined, it->second.first.n_workers, s);
    }
    Pending p = std::move(it->second);
    it = pending_.erase(it);
    for (auto& w : p.ranks) {
      if (w) reject(w->conn, Status::kJoinTimeout, out);
    }
  }
}

void JobManager::postpone(Clock::duration by) {
  for (auto& [key, p] : pending_) p.deadline += by;
}

void JobManager::cancel_pending(Status status, JoinOutbox& out) {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [key, p] : uplinking_) pending.emplace(key, std::move(p));
  uplinking_.clear();
  for (auto& [key, p] : pending) {
    for (auto& w : p.ranks) {
      if (w) reject(w->conn, status, out);
    }
  }
}

}  // namespace conflux::agg
