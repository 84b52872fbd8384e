// SPDX-License-Identifier: Apache-2.0
// The operator CLI's daemon addresses; the requests themselves go through the tree's one HTTP
// client (conflux/common/http_client.h).
#pragma once

#include <string>

#include "conflux/common/http_client.h"
#include "conflux/common/status.h"

namespace conflux::cli {

inline constexpr int kDefaultMetricsPort = 9470;

// HOST[:PORT] of a daemon's HTTP (metrics) port; port kDefaultMetricsPort when absent. Ok, or
// invalid_argument saying what is wrong with `address`.
Status parse_target(const std::string& address, std::string* host, int* port);

}  // namespace conflux::cli
