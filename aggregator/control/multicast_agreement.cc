// SPDX-License-Identifier: Apache-2.0
#include "aggregator/control/multicast_agreement.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>

#include "aggregator/control/job_manager.h"
#include "aggregator/util/ipv4.h"
#include "conflux/protocol/data.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

constexpr auto kProbeInterval = std::chrono::milliseconds(20);

}  // namespace

MulticastAgreement::MulticastAgreement(const Config& cfg, const Dataplane& dp,
                                       const std::vector<uint16_t>& ports,
                                       ControlCounters& counters)
    : cfg_(cfg), dp_(dp), counters_(counters) {
  MulticastRange range;
  if (cfg.multicast == "off" || cfg.multicast_range.empty() || !dp.can_multicast() ||
      ports.empty() || !parse_multicast_range(cfg.multicast_range, &range).ok()) {
    return;
  }
  // Daemons that share one configuration grant from disjoint slices of the range, chosen by
  // their own addresses: no agreement between daemons is needed, and it holds for the stripes
  // and leaves of one job and for different jobs alike.
  const uint32_t self = daemon_address(cfg.listen, cfg.multicast_interface);
  uint32_t index = 0, slices = 1;
  const MulticastRange mine =
      multicast_slice(range, static_cast<uint32_t>(cfg.multicast_slice), self, &index, &slices);
  groups_.emplace(mine);
  port_ = htons(cfg.multicast_port != 0 ? static_cast<uint16_t>(cfg.multicast_port) : ports[0]);
  spdlog::info("multicast: groups {}..{} (slice {} of {} of {}, from this daemon's address {})",
               ipv4_text(mine.base), ipv4_text(mine.base + mine.size - 1), index, slices,
               cfg.multicast_range, ipv4_text(self));
  if (slices == 1) {
    spdlog::warn(
        "multicast: this daemon grants from the whole of {} (multicast_slice {}): "
        "daemons sharing it must not share a network segment, or they grant the same "
        "groups",
        cfg.multicast_range, cfg.multicast_slice);
  } else if (slices < 256) {
    spdlog::warn(
        "multicast: {} has {} slices of {} groups: daemons whose addresses are equal "
        "mod {} grant the same groups (a larger range or a smaller multicast_slice "
        "gives every host of a /24 its own)",
        cfg.multicast_range, slices, cfg.multicast_slice, slices);
  }
}

std::optional<sockaddr_in> MulticastAgreement::grant(uint32_t job_id) {
  if (!groups_) return std::nullopt;
  const std::optional<uint32_t> g = groups_->acquire();
  if (!g) {
    spdlog::warn("job {}: every multicast group of {} is held; results by unicast", job_id,
                 cfg_.multicast_range);
    return std::nullopt;
  }
  group_of_[job_id] = *g;
  counters_.multicast_groups_in_use.set(groups_->in_use());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(*g);
  a.sin_port = port_;
  return a;
}

void MulticastAgreement::start(Job& job, const std::vector<ConnId>& conns, bool no_probe,
                               Clock::time_point now, JoinOutbox& out) {
  // Only the ranks connected here answer: a leaf of a reduction tree serves some of the
  // job's ranks, and its group reaches only those.
  const auto here =
      static_cast<uint32_t>(conns.size() - std::count(conns.begin(), conns.end(), ConnId{0}));
  Probe p{&job,
          conns,
          std::vector<bool>(conns.size(), false),
          here,
          now + std::chrono::milliseconds(cfg_.multicast_probe_ms),
          now};
  if (no_probe || cfg_.multicast == "on") {
    return decide(p, {true, proto::MulticastReason::kForced, 0}, out);
  }
  if (!send_probe(p)) return decide(p, {false, proto::MulticastReason::kSendFailed, 0}, out);
  probing_.emplace(job.id(), std::move(p));
}

bool MulticastAgreement::send_probe(Probe& p) {
  std::array<uint8_t, proto::kDataHeaderSize> bytes{};
  proto::encode_data_header(proto::probe_header(p.job->id(), p.job->params().token, p.sent++),
                            bytes.data());
  p.next_send += kProbeInterval;
  return dp_.send_datagram(p.job->params().group, bytes);
}

void MulticastAgreement::on_ack(uint32_t job_id, uint32_t rank, JoinOutbox& out) {
  auto it = probing_.find(job_id);
  if (it == probing_.end()) return;  // decided already: a late answer
  Probe& p = it->second;
  if (rank >= p.confirmed.size() || p.conns[rank] == 0 || p.confirmed[rank]) return;
  p.confirmed[rank] = true;
  if (--p.left > 0) return;
  Probe done = std::move(p);
  probing_.erase(it);
  decide(done, {true, proto::MulticastReason::kConfirmed, 0}, out);
}

void MulticastAgreement::on_tick(Clock::time_point now, JoinOutbox& out) {
  for (auto it = probing_.begin(); it != probing_.end();) {
    Probe& p = it->second;
    proto::MulticastMode mode{false, proto::MulticastReason::kNoConfirm, 0};
    if (now < p.deadline) {
      if (now < p.next_send || send_probe(p)) {
        ++it;
        continue;
      }
      mode.reason = proto::MulticastReason::kSendFailed;
    } else {
      // The lowest rank here that did not answer.
      while (p.conns[mode.rank] == 0 || p.confirmed[mode.rank]) ++mode.rank;
    }
    Probe done = std::move(p);
    it = probing_.erase(it);
    decide(done, mode, out);
  }
}

void MulticastAgreement::decide(Probe& p, proto::MulticastMode mode, JoinOutbox& out) {
  Job& job = *p.job;
  if (mode.multicast) job.set_multicast(true);
  counters_.multicast_decisions[mode.multicast ? 1 : 0].inc();
  const sockaddr_in& g = job.params().group;
  const std::string where =
      ipv4_text(ntohl(g.sin_addr.s_addr)) + ":" + std::to_string(ntohs(g.sin_port));
  if (mode.reason == proto::MulticastReason::kNoConfirm) {
    spdlog::info(
        "job {}: results by unicast: rank {} did not receive the probe of group {} within {} ms",
        job.id(), mode.rank, where, cfg_.multicast_probe_ms);
  } else {
    spdlog::info("job {}: results by {} to group {} ({})", job.id(),
                 mode.multicast ? "multicast" : "unicast", where,
                 proto::multicast_reason_name(mode.reason));
  }
  if (mode.multicast && on_multicast_) on_multicast_(job, p.conns, out);
  for (ConnId c : p.conns) {
    if (c != 0) out.send_to(c, mode);
  }
}

void MulticastAgreement::on_job_end(uint32_t job_id) {
  probing_.erase(job_id);
  auto it = group_of_.find(job_id);
  if (it == group_of_.end()) return;
  groups_->release(it->second);
  group_of_.erase(it);
  counters_.multicast_groups_in_use.set(groups_->in_use());
}

}  // namespace conflux::agg
