// SPDX-License-Identifier: Apache-2.0
// The progress thread's side of the control channels: heartbeats, liveness (silence for
// aggregator_timeout), grant updates (Capacity while running), and the messages that end an
// aggregator (Shutdown, Error, a closed or malformed connection). See protocol/SPEC.md §3 and §4
// (job life cycle).
#include <variant>

#include "progress.h"

namespace conflux::client {

bool Progress::poll_control(int64_t now) {
  bool work = false;
  const ClientConfig& cfg = sh_->cfg;
  for (size_t gi = 0; gi < aggs_.size(); ++gi) {
    Agg& g = aggs_[gi];
    const int idx = static_cast<int>(gi);
    if (failed_) {
      return work;
    }
    // Named only when it fails: this runs every progress round.
    const auto who = [&g] { return "aggregator " + g.j.info.endpoint.to_string(); };
    for (;;) {
      proto::ControlMsg m;
      std::string err;
      const ControlChannel::Rx rx = g.j.ctl->poll_message(&m, &err);
      if (rx == ControlChannel::Rx::kNone) {
        break;
      }
      if (rx != ControlChannel::Rx::kMessage) {
        g.alive = false;
        fail_engine(who() + " " + err, idx);
        return true;
      }
      work = true;
      g.last_heard_ns = now;
      if (const auto* hb = std::get_if<proto::Heartbeat>(&m)) {
        g.j.ctl->send(proto::HeartbeatAck{hb->time_ns}, &err);
      } else if (std::holds_alternative<proto::HeartbeatAck>(m)) {
        // liveness only
      } else if (const auto* c = std::get_if<proto::Capacity>(&m); c != nullptr && cfg.capacity) {
        on_grant(gi, *c);
      } else if (const auto* s = std::get_if<proto::Shutdown>(&m)) {
        g.alive = false;
        fail_engine(who() + " shut down" +
                        (s->reason == 1   ? " (draining)"
                         : s->reason == 0 ? ""
                                          : " (reason " + std::to_string(s->reason) + ")"),
                    idx);
        return true;
      } else if (const auto* e = std::get_if<proto::Error>(&m)) {
        g.alive = false;
        fail_engine(who() + " reported an error: " + std::string(proto::status_name(e->status)) +
                        (e->text.empty() ? "" : " (" + e->text + ")"),
                    idx);
        return true;
      } else {
        g.alive = false;
        fail_engine(
            who() + " sent an unexpected " + std::string(proto::msg_type_name(proto::msg_type(m))),
            idx);
        return true;
      }
    }
    std::string err;
    if (now >= g.next_heartbeat_ns) {
      g.next_heartbeat_ns = now + ns(cfg.heartbeat_interval);
      if (!g.j.ctl->send(proto::Heartbeat{static_cast<uint64_t>(now)}, &err)) {
        g.alive = false;
        fail_engine(who() + ": " + err, idx);
        return true;
      }
    } else if (g.j.ctl->want_write() && !g.j.ctl->flush(&err)) {
      g.alive = false;
      fail_engine(who() + ": " + err, idx);
      return true;
    }
    const int64_t silent = now - g.last_heard_ns;
    if (silent > ns(cfg.aggregator_timeout)) {
      fail_engine(who() + " stopped answering for " + std::to_string(silent / kMs) + " ms", idx);
      return true;
    }
  }
  return work;
}

void Progress::on_grant(size_t gi, const proto::Capacity& c) {
  // A grant update (SPEC.md §3): another job joined or left this aggregator.
  uint64_t sum = 0;
  uint32_t before = 0;
  {
    std::lock_guard<std::mutex> lk(sh_->mu);
    before = sh_->grants[gi];
    sh_->grants[gi] = c.share_mbps;
    for (uint32_t g : sh_->grants) sum += g;
  }
  sh_->ctr.grant_mbps.store(sum, std::memory_order_relaxed);
  aggs_[gi].pacing.set_grant(c.share_mbps);  // new packets' first timers and the window follow
  apply_grant_ceiling(aggs_[gi]);
  Counters::add(sh_->ctr.grant_updates);
  if (c.share_mbps != before) {
    sh_->log(LogLevel::kInfo, "aggregator " + aggs_[gi].j.info.endpoint.to_string() +
                                  " grant now " + std::to_string(c.share_mbps) + " Mbit/s (was " +
                                  std::to_string(before) +
                                  "): " + std::string(proto::capacity_reason_name(c.reason)));
  }
}

}  // namespace conflux::client
