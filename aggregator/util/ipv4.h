// SPDX-License-Identifier: Apache-2.0
// IPv4 text: endpoints, multicast ranges and addresses, parsed and printed without any socket;
// and the slice of a multicast range a daemon grants from, by its own address (getifaddrs).
// Shared by the configuration checks (config.cc) and the folders that use the values
// (control/, tree/).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "conflux/common/status.h"

namespace conflux::agg {

// Parses "a.b.c.d:port" (port 1..65535). False when malformed.
bool parse_ipv4_endpoint(std::string_view text, sockaddr_in* out);

// A range of IPv4 multicast groups, host order: [base, base + size).
struct MulticastRange {
  uint32_t base = 0;
  uint32_t size = 0;
};

// Parses "a.b.c.d/n" inside 224.0.0.0/4 and outside 224.0.0.0/24 (link-local control groups).
// Ok, or invalid_argument saying what is wrong with it.
Status parse_multicast_range(std::string_view text, MulticastRange* out);

// The groups a daemon grants from: `range` cut into slices of `slice` groups, the one at
// index (address mod the number of slices), `address` being the daemon's own (host order).
// Daemons whose addresses differ in their low log2(slices) bits (every host of a subnet up to
// that size) get disjoint slices. The whole range when slice is 0 or not smaller than it.
// *index and *slices (when not null): which slice, of how many.
MulticastRange multicast_slice(MulticastRange range, uint32_t slice, uint32_t address,
                               uint32_t* index = nullptr, uint32_t* slices = nullptr);

// This daemon's address for multicast_slice: multicast_interface, else listen, unless it is
// 0.0.0.0 or empty; else the first non-loopback IPv4 address of the host's interfaces; else
// 127.0.0.1. Host order.
uint32_t daemon_address(const std::string& listen, const std::string& multicast_interface);

// "a.b.c.d" of a host-order IPv4 address.
std::string ipv4_text(uint32_t addr);

}  // namespace conflux::agg
