// SPDX-License-Identifier: Apache-2.0
// One TCP control connection to an aggregator (protocol/SPEC.md §3): framed messages,
// non-blocking socket. The blocking helpers (connect, recv_blocking) are used by
// Engine::create; afterwards the progress thread owns the channel and uses the
// non-blocking ones. Not thread-safe.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conflux/client/config.h"
#include "conflux/protocol/control.h"

namespace conflux::client {

int64_t now_ns();  // steady clock

class ControlChannel {
 public:
  enum class Rx : uint8_t { kMessage, kNone, kClosed, kError };

  ControlChannel() = default;
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Resolves ep (IPv4) and connects, waiting at most until deadline_ns (now_ns() clock).
  // Returns ok or the reason ("Connection refused", "connect timed out", ...); *error gets the
  // errno of a failed connect (ETIMEDOUT for the deadline; 0 for a name that did not resolve).
  Status connect(const Endpoint& ep, int64_t deadline_ns, int* error = nullptr);

  // Waits for one whole message until deadline_ns. Returns ok or the reason; *how gets kClosed
  // when the peer closed or reset the connection (unavailable), kError for a malformed frame
  // (refused), kNone for the deadline (timed_out).
  Status recv_blocking(proto::ControlMsg* msg, int64_t deadline_ns, Rx* how = nullptr);

  // Takes one buffered or readable message without blocking. kError/kClosed set *err.
  Rx poll_message(proto::ControlMsg* msg, std::string* err);

  // Queues a frame and writes what the socket takes now; never blocks.
  bool send(const proto::ControlMsg& m, std::string* err);
  // Writes queued bytes; never blocks. False (and *err) when the connection broke.
  bool flush(std::string* err);
  bool want_write() const { return tx_off_ < tx_.size(); }

  void close();
  int fd() const { return fd_; }
  const sockaddr_in& peer() const { return peer_; }
  const std::string& peer_address() const { return peer_str_; }

 private:
  bool parse_buffered(proto::ControlMsg* msg, Rx* rx, std::string* err);

  int fd_ = -1;
  sockaddr_in peer_{};
  std::string peer_str_;
  std::vector<uint8_t> rx_;
  size_t rx_off_ = 0;
  std::vector<uint8_t> tx_;
  size_t tx_off_ = 0;
};

}  // namespace conflux::client
