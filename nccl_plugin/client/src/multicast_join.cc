// SPDX-License-Identifier: Apache-2.0
// The worker's half of the multicast agreement (protocol/SPEC.md §8), run by Engine::create
// after join_all: join each granted group, answer the aggregator's probe, take its decision.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <variant>

#include "fault.h"
#include "join.h"

namespace conflux::client {
namespace {

constexpr int64_t kPollMs = 20;

// The local address of a control connection: the interface that reaches the aggregator.
in_addr local_address(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a.sin_addr;
}

std::string addr_text(const in_addr& a) {
  char name[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a, name, sizeof name);
  return name;
}

std::string group_text(const sockaddr_in& g) {
  return addr_text(g.sin_addr) + ":" + std::to_string(ntohs(g.sin_port));
}

// One aggregator whose JoinAck granted a group, until its MulticastMode arrives.
struct Pending {
  JoinedAggregator* ja;
  std::string name;
  bool acked = false;  // MulticastAck sent
};

// Reads the group socket; answers the first PROBE of this job from the aggregator.
void take_probes(Pending& p, Counters* ctr) {
  if (!p.ja->group_rx) {
    return;
  }
  for (const InDatagram& d : p.ja->group_rx->receive()) {
    proto::DataHeader h;
    const uint8_t* payload = nullptr;
    const proto::DropReason r =
        proto::parse_data({d.data, d.len}, proto::kMaxPayloadBytes, &h, &payload);
    if (r != proto::DropReason::kOk) {
      ctr->drop(r);
    } else if (!from_aggregator(*p.ja, d.from)) {
      ctr->drop(proto::DropReason::kWrongSource);
    } else if (h.type == proto::PacketType::kProbe && h.job_id == p.ja->info.job_id &&
               h.job_token == p.ja->job_token && !p.acked) {
      std::string err;
      p.acked = p.ja->ctl->send(proto::MulticastAck{}, &err);
    }
  }
}

// Handles the control messages waiting on p's connection. Sets *decided on MulticastMode.
Status take_control(const ClientConfig& cfg, Pending& p, bool* decided) {
  while (!*decided) {
    proto::ControlMsg m;
    std::string err;
    const ControlChannel::Rx rx = p.ja->ctl->poll_message(&m, &err);
    if (rx == ControlChannel::Rx::kNone) {
      return {};
    }
    if (rx != ControlChannel::Rx::kMessage) {
      return unavailable(p.name + " during the multicast probe: " + err);
    }
    if (const auto* mode = std::get_if<proto::MulticastMode>(&m)) {
      *decided = true;
      p.ja->info.multicast = mode->multicast;
      std::string why(proto::multicast_reason_name(mode->reason));
      if (mode->reason == proto::MulticastReason::kNoConfirm) {
        why = "rank " + std::to_string(mode->rank) + " did not receive the probe";
      }
      if (cfg.log) {
        cfg.log(LogLevel::kInfo, p.name + ": results by " +
                                     (mode->multicast ? "multicast" : "unicast") + " (group " +
                                     p.ja->info.group + ": " + why + ")");
      }
      if (!mode->multicast) {
        p.ja->group_rx.reset();  // leaves the group
      }
    } else if (const auto* src = std::get_if<proto::ResultSource>(&m)) {
      // A leaf's parent will send this job's results to the group itself (SPEC.md §7); sent
      // only to a rank that asked (Join flag DIRECT_RESULTS), before MulticastMode.
      p.ja->upstream_addr.sin_family = AF_INET;
      p.ja->upstream_addr.sin_addr.s_addr = htonl(src->addr);
      p.ja->upstream_ports = src->ports;
      if (cfg.log) {
        cfg.log(LogLevel::kInfo, p.name +
                                     ": results may come straight from its parent aggregator " +
                                     addr_text(p.ja->upstream_addr.sin_addr) + " (" +
                                     std::to_string(src->ports.size()) + " port(s))");
      }
    } else if (const auto* hb = std::get_if<proto::Heartbeat>(&m)) {
      p.ja->ctl->send(proto::HeartbeatAck{hb->time_ns}, &err);
    } else if (const auto* e = std::get_if<proto::Error>(&m)) {
      return refused(p.name + " failed the job: " + std::string(proto::status_name(e->status)) +
                     " " + e->text);
    } else if (!std::holds_alternative<proto::HeartbeatAck>(m)) {
      return refused(p.name + ": unexpected " +
                     std::string(proto::msg_type_name(proto::msg_type(m))) +
                     " during the multicast probe");
    }
  }
  return {};
}

}  // namespace

uint8_t multicast_join_flags(const ClientConfig& cfg) {
  switch (cfg.multicast) {
    case MulticastMode::kOff:
      return 0;
    // A rank that takes a group's results also takes them from a leaf's parent (SPEC.md §7).
    case MulticastMode::kAuto:
      return proto::kJoinFlagMulticast | proto::kJoinFlagDirectResults;
    case MulticastMode::kOn:
      return proto::kJoinFlagMulticast | proto::kJoinFlagMulticastNoProbe |
             proto::kJoinFlagDirectResults;
  }
  return 0;
}

namespace {
bool one_of(const sockaddr_in& from, in_addr_t addr, const std::vector<uint16_t>& ports) {
  if (addr == 0 || from.sin_addr.s_addr != addr) {
    return false;
  }
  for (uint16_t p : ports) {
    if (htons(p) == from.sin_port) {
      return true;
    }
  }
  return false;
}
}  // namespace

bool from_aggregator(const JoinedAggregator& ja, const sockaddr_in& from) {
  return one_of(from, ja.data_addr.sin_addr.s_addr, ja.info.data_ports) ||
         one_of(from, ja.upstream_addr.sin_addr.s_addr, ja.upstream_ports);
}

Status agree_multicast(const ClientConfig& cfg, Counters* ctr,
                       std::vector<JoinedAggregator>* aggs) {
  std::vector<Pending> pending;
  for (JoinedAggregator& ja : *aggs) {
    const std::string name = "aggregator " + ja.info.endpoint.to_string();
    if (ja.group.sin_port == 0) {
      if (cfg.multicast != MulticastMode::kOff && cfg.log) {
        cfg.log(LogLevel::kInfo, name + ": results by unicast (no multicast group granted)");
      }
      continue;
    }
    ja.info.group = group_text(ja.group);
    ja.group_rx = std::make_unique<UdpChannel>();
    const Status st =
        ja.group_rx->open_group(ja.group, local_address(ja.ctl->fd()), cfg.socket_buffer_bytes,
                                proto::kDataHeaderSize + ja.info.payload_bytes +
                                    (ja.info.data_mac ? proto::kMacTrailerSize : 0),
                                ctr, cfg.udp_offload);
    if (!st.ok()) {
      // Not answering the probe makes the whole job unicast on this aggregator.
      if (cfg.log) {
        cfg.log(LogLevel::kWarn, name + ": " + st.message());
      }
      ja.group_rx.reset();
    } else {
      arm_group_faults(*ja.group_rx, cfg);
    }
    pending.push_back({&ja, name});
  }
  const int64_t deadline =
      now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.join_timeout).count();
  while (!pending.empty()) {
    for (size_t i = 0; i < pending.size();) {
      take_probes(pending[i], ctr);
      bool decided = false;
      CFX_TRY(take_control(cfg, pending[i], &decided));
      if (decided) {
        pending.erase(pending.begin() + static_cast<ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (pending.empty()) {
      break;
    }
    if (now_ns() > deadline) {
      return timed_out(pending[0].name + ": no MulticastMode within " +
                       std::to_string(cfg.join_timeout.count()) + " ms");
    }
    std::vector<pollfd> fds;
    for (const Pending& p : pending) {
      fds.push_back({p.ja->ctl->fd(), POLLIN, 0});
      if (p.ja->group_rx) {
        fds.push_back({p.ja->group_rx->fd(), POLLIN, 0});
      }
    }
    ::poll(fds.data(), fds.size(), kPollMs);
  }
  return {};
}

}  // namespace conflux::client
