#include "aggregator/control/job_manager.h"

#include <arpa/inet.h>

#include <algorithm>

#include "aggregator/util/random.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

using proto::Join;
using proto::JoinAck;
using proto::Status;

JobManager::JobManager(const Config& cfg, JobTable& jobs, std::vector<uint16_t> ports,
                       ControlCounters& counters, MulticastAgreement* multicast)
    : cfg_(cfg),
      jobs_(jobs),
      ports_(std::move(ports)),
      counters_(counters),
      multicast_(multicast) {}

void JobManager::reject(ConnId conn, Status s, JoinOutbox& out) {
  JoinAck ack;
  ack.status = s;
  out.deliver(conn, ack);
}

void JobManager::on_join(ConnId conn, const Join& join, const sockaddr_in& peer,
                         Clock::time_point now, JoinOutbox& out) {
  if (join.rank >= join.n_workers) return reject(conn, Status::kBadRank, out);
  if (auto it = active_.find(join.job_key); it != active_.end()) {
    // The job already runs: a second connection for a live rank, or a late/rejoining rank.
    const bool live = join.rank < it->second.conns.size() && it->second.conns[join.rank] != 0;
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
    constexpr uint8_t kPerRank = proto::kJoinFlagMulticast | proto::kJoinFlagMulticastNoProbe;
    if (join.n_workers != f.n_workers || ((join.flags ^ f.flags) & ~kPerRank) != 0 ||
        join.payload_bytes != f.payload_bytes || join.requested_slots != f.requested_slots) {
      if (uint64_t s = 0; log_limit_.allow(&s)) {
        spdlog::warn(
            "job key {:016x}: rank {} disagrees with the first Join ({} similar suppressed)",
            join.job_key, join.rank, s);
      }
      return reject(conn, Status::kJobMismatch, out);
    }
    if (p.ranks[join.rank].has_value()) return reject(conn, Status::kRankInUse, out);
  }
  p.ranks[join.rank] = Waiting{conn, addr, join.flags};
  if (++p.joined == p.first.n_workers) {
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
  const uint32_t id = granted == 0 ? 0 : jobs_.allocate_id();
  if (id == 0) {
    if (uint64_t s = 0; log_limit_.allow(&s)) {
      spdlog::warn(
          "job key {:016x}: no capacity ({} jobs live, {} of {} slots used; {} similar "
          "suppressed)",
          key, jobs_.live(), slots_used_, cfg_.total_slots, s);
    }
    for (auto& w : p.ranks) reject(w->conn, Status::kNoCapacity, out);
    return;
  }
  JobParams jp;
  jp.id = id;
  jp.key = key;
  jp.token = random_u64();
  jp.n_workers = f.n_workers;
  jp.slots = granted;
  jp.payload_bytes =
      std::min<uint32_t>(f.payload_bytes, static_cast<uint32_t>(cfg_.max_payload_bytes));
  jp.deterministic = cfg_.deterministic || (f.flags & proto::kJoinFlagDeterministic) != 0;
  Active a{id, granted, {}, f.n_workers};
  for (auto& w : p.ranks) {
    jp.workers.push_back(w->addr);
    a.conns.push_back(w->conn);
  }
  JoinAck ack;
  ack.status = Status::kOk;
  ack.job_id = id;
  ack.job_token = jp.token;
  ack.granted_slots = granted;
  ack.payload_bytes = jp.payload_bytes;
  ack.flags = jp.deterministic ? proto::kJoinFlagDeterministic : 0;
  ack.ports = ports_;
  // Multicast (SPEC §7) when every rank asked for it; without a probe when every rank said so.
  uint8_t all_flags = 0xff;
  for (auto& w : p.ranks) all_flags &= w->flags;
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
  jobs_.publish(std::move(job));
  slots_used_ += granted;
  active_.emplace(key, std::move(a));
  counters_.jobs_created.inc();
  counters_.jobs_active.set(active_.size());
  counters_.slots_in_use.set(slots_used_);
  spdlog::info("job {} (key {:016x}) created: {} workers, {} slots, {} bytes/packet{}", id, key,
               f.n_workers, granted, ack.payload_bytes,
               (ack.flags & proto::kJoinFlagDeterministic) ? ", deterministic" : "");
  for (auto& w : p.ranks) out.deliver(w->conn, ack);
  if (group) {
    multicast_->start(published, active_.at(key).conns,
                      (all_flags & proto::kJoinFlagMulticastNoProbe) != 0, now, out);
  }
}

void JobManager::on_gone(ConnId conn, uint64_t job_key, uint32_t rank, bool member) {
  if (!member) {
    auto it = pending_.find(job_key);
    if (it == pending_.end()) return;
    Pending& p = it->second;
    if (rank < p.ranks.size() && p.ranks[rank] && p.ranks[rank]->conn == conn) {
      p.ranks[rank].reset();
      if (--p.joined == 0) pending_.erase(it);
    }
    return;
  }
  auto it = active_.find(job_key);
  if (it == active_.end()) return;
  Active& a = it->second;
  if (rank >= a.conns.size() || a.conns[rank] != conn) return;
  a.conns[rank] = 0;
  if (--a.alive > 0) return;
  spdlog::info("job {} (key {:016x}) deleted: every rank left", a.job_id, job_key);
  if (multicast_ != nullptr) multicast_->on_job_end(a.job_id);
  jobs_.retire(a.job_id);
  slots_used_ -= a.slots;
  active_.erase(it);
  counters_.jobs_deleted.inc();
  counters_.jobs_active.set(active_.size());
  counters_.slots_in_use.set(slots_used_);
}

void JobManager::on_tick(Clock::time_point now, JoinOutbox& out) {
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
  jobs_.reclaim();
}

void JobManager::postpone(Clock::duration by) {
  for (auto& [key, p] : pending_) p.deadline += by;
}

void JobManager::cancel_pending(Status status, JoinOutbox& out) {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [key, p] : pending) {
    for (auto& w : p.ranks) {
      if (w) reject(w->conn, status, out);
    }
  }
}

}  // namespace conflux::agg
