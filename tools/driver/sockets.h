// SPDX-License-Identifier: Apache-2.0
// Small blocking-with-deadline TCP helpers for the driver's bootstrap (not for plugin data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "driver/status.h"

namespace conflux::driver {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

// "host:port" (IPv4 literal or name). False on junk.
bool parse_endpoint(const std::string& s, Endpoint* out);

// A listening TCP socket on `ep` (port 0: any free port; *bound_port gets the actual one).
Status tcp_listen(const Endpoint& ep, int* fd, uint16_t* bound_port);
// Connects to `ep`, retrying refused connections until the deadline (the root may start later).
Status tcp_connect(const Endpoint& ep, const Deadline& dl, int* fd);
// Accepts one connection before the deadline.
Status tcp_accept(int listen_fd, const Deadline& dl, int* fd);

// Send/receive exactly `n` bytes before the deadline. A closed peer is an error naming `what`.
Status send_all(int fd, const void* buf, size_t n, const Deadline& dl, const std::string& what);
Status recv_all(int fd, void* buf, size_t n, const Deadline& dl, const std::string& what);

void close_fd(int* fd);

}  // namespace conflux::driver
