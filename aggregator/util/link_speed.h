// SPDX-License-Identifier: Apache-2.0
// The line rate confluxd advertises to workers (Capacity, protocol/SPEC.md §3).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace conflux::agg {

// Every IPv4 address of this network namespace's interfaces, with the interface's name
// (getifaddrs; empty if it fails).
std::vector<std::pair<std::string, in_addr_t>> ipv4_interfaces();

// Speed in Mbit/s that /sys/class/net/<if>/speed reports for the interface holding IPv4
// address `ipv4`; 0 when unknown (0.0.0.0, no such address, loopback and other interfaces
// without a speed).
int64_t interface_speed_mbps(const std::string& ipv4);

// cfg line_mbps when set, else the interface's speed (0: unknown).
int64_t advertised_line_mbps(int64_t configured, const std::string& listen);

}  // namespace conflux::agg
