// SPDX-License-Identifier: Apache-2.0
// Network interface discovery and selection for the TCP transport (control path only).
//
// Selection follows the NCCL_SOCKET_IFNAME syntax: a comma-separated list of name prefixes;
// a leading '^' excludes the listed names instead; a leading '=' (after '^' if both) makes the
// match exact instead of by prefix. The empty spec means: every interface except docker*, lo*
// and virbr*; if none is left, docker*; if none, lo*.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "net/socket.h"

namespace conflux::net {

class IfnameFilter {
 public:
  static IfnameFilter parse(std::string_view spec);
  bool matches(std::string_view ifname) const;

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

// One usable interface: its name and the address used to listen on it.
struct NetInterface {
  std::string name;
  SockAddr addr;
};

// Every interface that is up and has an IPv4 address or a non-link-local IPv6 address
// (IPv4 preferred), in kernel order.
std::vector<NetInterface> listInterfaces();

// Applies `spec` (see above) to `all`, preserving order.
std::vector<NetInterface> selectInterfaces(const std::vector<NetInterface>& all,
                                           std::string_view spec);

// A transport device: a selected interface plus the properties reported to NCCL.
struct NetDevice {
  std::string name;
  std::string pciPath;  // sysfs path of the PCI function; empty for virtual interfaces
  SockAddr addr;
  int speedMbps = 0;
  bool loopback = false;
};

// Reads speed (fallback 10000 Mbps) and the PCI path from /sys/class/net/<name>/.
NetDevice describeInterface(const NetInterface& itf);

}  // namespace conflux::net
