// SPDX-License-Identifier: Apache-2.0
#include "aggregator/cli/http_get.h"

#include "fmt/format.h"

namespace conflux::cli {
Status parse_target(const std::string& address, std::string* host, int* port) {
  *host = address;
  *port = kDefaultMetricsPort;
  if (const size_t colon = address.rfind(':'); colon != std::string::npos) {
    *host = address.substr(0, colon);
    try {
      *port = std::stoi(address.substr(colon + 1));
    } catch (const std::exception&) {
      *port = -1;
    }
    if (*port <= 0 || *port > 65535) {
      return invalid_argument(fmt::format("bad port in '{}'", address));
    }
  }
  return {};
}

}  // namespace conflux::cli
