#include "aggregator/control/job_manager.h"

#include <arpa/inet.h>

#include <algorithm>

#include "aggregator/util/ipv4.h"
#include "aggregator/util/link_speed.h"
#include "aggregator/util/random.h"
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

std::string JobManager::on_direct_down(uint64_t job_key, uint32_t rank,
                                       const proto::DirectDown& d) {
  auto it = active_.find(job_key);
  if (it == active_.end()) return "";  // the job ended meanwhile
  Active& a = it->second;
  if (rank >= a.direct_ok.size() || !a.direct_ok[rank]) {
    return "DirectDown from a member that was not offered direct results";
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
      return "";
    }
    key = proto::derive_data_key(cfg_.secret, d.job_id, d.job_token);
  }
  if (!a.job->set_direct(rank, g, d.job_id, d.job_token, key)) {
    spdlog::info(
        "job {}: child aggregator {} asked again, or {} children already take results straight "
        "down; its results still go through it",
        a.job_id, rank, Job::kMaxDirectChildren);
    return "";
  }
  spdlog::info("job {}: results for child aggregator {} go straight to its members' group {}{}",
               a.job_id, rank, where, key ? " (signed with the child's job key)" : "");
  return "";
}

void JobManager::reject(ConnId conn, Status s, JoinOutbox& out) {
  JoinAck ack;
  ack.status = s;
  out.deliver(conn, ack);
}

std::string_view JobManager::tenant_name(uint32_t tenant) const {
  return tenant == kSharedTenant ? std::string_view() : cfg_.tenants.at(tenant - 1).name;
}

uint32_t JobManager::tenant_weight(uint32_t tenant) const {
  return tenant == kSharedTenant ? 1 : static_cast<uint32_t>(cfg_.tenants.at(tenant - 1).weight);
}

const std::string& JobManager::tenant_secret(uint32_t tenant) const {
  return tenant == kSharedTenant ? cfg_.secret : cfg_.tenants.at(tenant - 1).secret;
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
      p.tenant == kSharedTenant
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
  for (const auto& [key, a] : active_) weights += a.job->params().share_weight;
  size_t told = 0;
  for (auto& [key, a] : active_) {
    // In proportion to the weights: with no demands known, that is the weighted max-min share.
    const uint32_t weight = a.job->params().share_weight;
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

void JobManager::on_tick(Clock::time_point now, JoinOutbox& out) {
  sample_rates(now);
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
