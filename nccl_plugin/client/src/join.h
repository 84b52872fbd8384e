// SPDX-License-Identifier: Apache-2.0
// The blocking join handshake of Engine::create: connect to every aggregator, read its
// ServerHello, send Join (with the MAC when a secret is set), wait for every JoinAck.
// Runs on the caller's thread before the progress thread exists.
#pragma once

#include <netinet/in.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conflux/client/engine.h"
#include "conflux/protocol/data_mac.h"
#include "control_channel.h"
#include "udp_channel.h"

namespace conflux::client {

struct JoinedAggregator {
  std::unique_ptr<ControlChannel> ctl;
  AggregatorInfo info;
  uint64_t job_token = 0;
  sockaddr_in data_addr{};  // the control peer's IPv4 address; port set per slot
  // The job's data MAC key when the aggregator runs with data_mac (SPEC.md §6), else nullopt.
  std::optional<proto::DataKey> mac_key;
  sockaddr_in group{};  // JoinAck's multicast group (sin_port 0: none)
  // The group's socket while results may come by multicast (SPEC §8); null when unicast.
  std::unique_ptr<UdpChannel> group_rx;
  // Results straight down (SPEC.md §7): the aggregator's parent, which may send this job's
  // results to the group too (ResultSource). IPv4 address 0: none.
  sockaddr_in upstream_addr{};
  std::vector<uint16_t> upstream_ports;  // host order
};

// Returns ok and fills *out (one entry per cfg.aggregators, same order), or an error whose
// message names the aggregator that failed and why. udp_port: where this worker gets results.
// With cfg.join_agree an aggregator that fails (or that cfg.join_peers says another rank could
// not join) is given up instead: its entry's ctl is null and *refused says why ("; "-joined).
Status join_all(const ClientConfig& cfg, uint16_t udp_port, std::vector<JoinedAggregator>* out,
                std::string* refused);

// multicast_join.cc: for every aggregator whose JoinAck granted a group, joins it, answers
// the probe and waits for the aggregator's MulticastMode (SPEC §8); keeps the group's socket
// only where the job is multicast and logs each aggregator's choice once. Blocking, like
// join_all. Returns ok or what failed.
Status agree_multicast(const ClientConfig& cfg, Counters* counters,
                       std::vector<JoinedAggregator>* aggs);

// Join flags for cfg.multicast (SPEC §8).
uint8_t multicast_join_flags(const ClientConfig& cfg);

// Whether `from` is the aggregator's data address and one of its data ports, or its parent's
// named by ResultSource: the only sources a worker takes datagrams on the job's group from
// (SPEC §8, §7).
bool from_aggregator(const JoinedAggregator& ja, const sockaddr_in& from);

}  // namespace conflux::client
