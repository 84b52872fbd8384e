// IPv4 text: endpoints, multicast ranges and addresses, parsed and printed without any socket.
// Shared by the configuration checks (config.cc) and the folders that use the values
// (control/, tree/).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace conflux::agg {

// Parses "a.b.c.d:port" (port 1..65535). False when malformed.
bool parse_ipv4_endpoint(std::string_view text, sockaddr_in* out);

// A range of IPv4 multicast groups, host order: [base, base + size).
struct MulticastRange {
  uint32_t base = 0;
  uint32_t size = 0;
};

// Parses "a.b.c.d/n" inside 224.0.0.0/4 and outside 224.0.0.0/24 (link-local control groups).
// Returns "" or what is wrong with it.
std::string parse_multicast_range(std::string_view text, MulticastRange* out);

// "a.b.c.d" of a host-order IPv4 address.
std::string ipv4_text(uint32_t addr);

}  // namespace conflux::agg
