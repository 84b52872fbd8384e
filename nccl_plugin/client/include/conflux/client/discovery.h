// SPDX-License-Identifier: Apache-2.0
// Aggregator discovery by DNS: an entry "dns:NAME:PORT" of CONFLUX_AGGREGATORS stands for every
// IPv4 address NAME resolves to (A records: a Kubernetes headless Service over the aggregator
// DaemonSet, a round-robin name at a Slurm site), each at PORT, sorted; other entries stay as
// written. The plugin resolves the list on rank 0 once per CollNet connect and sends the result
// to every rank (so all ranks use one list while DNS changes); `conflux check` resolves the
// same way.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace conflux::client {

inline constexpr std::string_view kDnsPrefix = "dns:";

// Whether `list` has a dns: entry.
bool has_dns_entries(std::string_view list);

// The IPv4 addresses of `name`, sorted, as dotted quads; false and *error ("resolving NAME:
// ...", naming the cause or the timeout) when it fails, has no IPv4 address, or takes longer
// than `timeout` (the lookup is left to finish on its own thread).
bool resolve_ipv4(const std::string& name, std::chrono::milliseconds timeout,
                  std::vector<std::string>* addresses, std::string* error);

// `list` with every "dns:NAME:PORT" entry replaced by "A1:PORT,A2:PORT,..."; a plain list comes
// back unchanged. False and *error naming the entry when an entry is malformed or does not
// resolve.
bool expand_dns(std::string_view list, std::chrono::milliseconds timeout, std::string* out,
                std::string* error);

}  // namespace conflux::client
