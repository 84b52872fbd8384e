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

namespace conflux::client {

struct JoinedAggregator {
  std::unique_ptr<ControlChannel> ctl;
  AggregatorInfo info;
  uint64_t job_token = 0;
  sockaddr_in data_addr{};  // the control peer's IPv4 address; port set per slot
  // The job's data MAC key when the aggregator runs with data_mac (SPEC.md §6), else nullopt.
  std::optional<proto::DataKey> mac_key;
};

// Returns "" and fills *out (one entry per cfg.aggregators, same order), or a message
// naming the aggregator that failed and why. udp_port: where this worker gets results.
std::string join_all(const ClientConfig& cfg, uint16_t udp_port,
                     std::vector<JoinedAggregator>* out);

}  // namespace conflux::client
