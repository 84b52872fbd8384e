// SPDX-License-Identifier: Apache-2.0
// A minimal raw protocol client for the aggregator tests: blocking sockets with timeouts,
// written from protocol/SPEC.md (independent of the worker client engine).
// Every socket talks to the daemon at daemon_ip() and binds local_ip() (both 127.0.0.1 unless
// a conformance fixture puts the daemon behind a veth: see conformance_netns.h).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "conflux/protocol/control.h"
#include "conflux/protocol/data.h"

namespace conflux::agg::testing {

// Where the clients send (daemon) and bind (local), host order. Data (UDP) may use other
// addresses (e.g. on a VLAN): then Join announces data_local as the worker's udp_addr. 0 =
// the same as control. Set by the test's main thread between daemons; read by every client.
void set_endpoints(uint32_t daemon_ip, uint32_t local_ip, uint32_t data_daemon_ip = 0,
                   uint32_t data_local_ip = 0);
uint32_t daemon_ip();
uint32_t local_ip();

// One control channel (TCP) to the daemon.
class ControlClient {
 public:
  ControlClient() = default;
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Connects to daemon_ip():port and reads the ServerHello.
  bool connect(uint16_t port);
  bool send(const proto::ControlMsg& m);
  bool send_raw(std::span<const uint8_t> bytes);
  // Next message, or nullopt on timeout, close or a malformed frame.
  std::optional<proto::ControlMsg> recv(int timeout_ms);
  // Next message that is not a Heartbeat (those are answered).
  std::optional<proto::ControlMsg> recv_skip_heartbeats(int timeout_ms);
  // True when the peer closes the connection within timeout_ms (data before EOF is ignored).
  bool wait_closed(int timeout_ms);
  void close();

  const proto::ServerHello& hello() const { return hello_; }

 private:
  int fd_ = -1;
  proto::ServerHello hello_;
  std::vector<uint8_t> buf_;
};

// The UDP socket of a worker (bound to local_ip(), ephemeral port).
class UdpClient {
 public:
  UdpClient();
  ~UdpClient();
  UdpClient(const UdpClient&) = delete;
  UdpClient& operator=(const UdpClient&) = delete;
  uint16_t port() const { return port_; }
  int fd() const { return fd_; }
  bool send_to(uint16_t port, std::span<const uint8_t> bytes);
  std::optional<std::vector<uint8_t>> recv(int timeout_ms);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

struct JoinSpec {
  uint64_t job_key = 1;
  uint32_t n_workers = 1;
  uint32_t rank = 0;
  uint32_t requested_slots = 8;
  uint32_t payload_bytes = 256;
  uint8_t flags = 0;
  // With kJoinFlagVersions in flags: the versions offered (SPEC.md §1).
  uint8_t min_version = 1;
  uint8_t max_version = 1;
  uint32_t join_timeout_ms = 0;
  std::string secret;        // computes the MAC when non-empty
  bool corrupt_mac = false;  // sends a wrong MAC
};

// A test worker: control channel + UDP socket, plus the job it joined.
struct Worker {
  ControlClient ctl;
  UdpClient udp;
  proto::JoinAck ack;
  uint32_t rank = 0;
  uint16_t contributor = 0;

  // Connects and sends Join (does not wait for the JoinAck).
  bool start_join(uint16_t control_port, const JoinSpec& spec);
  // Waits for the JoinAck; returns its status (kInternal on timeout).
  proto::Status finish_join(int timeout_ms);
  // Sends one CONTRIB for (slot, generation) to the port serving the slot; owner >= 0 sets
  // flag OWNED with that owner.
  bool send_contrib(uint32_t slot, uint32_t generation, uint64_t offset, DType dt, Op op,
                    std::span<const uint8_t> payload, bool retransmit = false, int owner = -1);
  uint16_t port_for(uint32_t slot) const { return ack.ports[slot % ack.ports.size()]; }
};

// Encodes a whole datagram.
std::vector<uint8_t> make_datagram(const proto::DataHeader& h, std::span<const uint8_t> payload);

// Runs one AllReduce over `workers` (already joined to one job) in windows of granted_slots
// packets, retransmitting after `rto_ms`. inputs[r] is rank r's buffer (count elements of dt).
// `seq` is the job's packet counter (shared by all ranks), advanced by the packets used.
// `order(r, k)` may permute the order ranks send in (deterministic tests); results[r] is what
// rank r received. Returns false on timeout. *retransmits counts resent contributions.
struct RunOptions {
  int rto_ms = 500;
  int give_up_ms = 10000;
  bool reverse_rank_order = false;
};
bool run_allreduce(std::vector<Worker*>& workers, DType dt, Op op, uint64_t count,
                   const std::vector<std::vector<uint8_t>>& inputs, uint64_t* seq,
                   std::vector<std::vector<uint8_t>>* results, uint64_t* retransmits,
                   const RunOptions& opt = {});

// HTTP/1.0 GET on daemon_ip():port; returns "" on failure. *status gets the HTTP code.
std::string http_get(uint16_t port, const std::string& path, int* status = nullptr);
// POST `path` (no body), e.g. the admin endpoints; the same answer as http_get. With a
// secret, the admin authentication header for it (protocol/admin_auth.h).
std::string http_post(uint16_t port, const std::string& path, int* status = nullptr,
                      const std::string& secret = "");

// Sum of every sample of metric `name` whose labels include all of `labels`.
uint64_t metric_sum(const std::string& text, const std::string& name,
                    const std::map<std::string, std::string>& labels = {});

}  // namespace conflux::agg::testing
