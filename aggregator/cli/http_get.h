// Blocking HTTP/1.0 requests for the operator CLI (confluxd's HTTP port answers HTTP/1.0 and
// closes the connection). Any thread; blocks up to `timeout_ms` per step.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace conflux::cli {

inline constexpr int kDefaultMetricsPort = 9470;

// HOST[:PORT] of a daemon's HTTP (metrics) port; port kDefaultMetricsPort when absent. "" or
// what is wrong with `address`.
std::string parse_target(const std::string& address, std::string* host, int* port);

struct HttpAnswer {
  int status = 0;  // e.g. 200, 403
  std::string body;
};

// `method` `path` with extra header lines ("Name: value"); nullopt with *err saying what
// failed (resolve, connect, timeout, a malformed answer).
std::optional<HttpAnswer> http_request(const std::string& method, const std::string& host, int port,
                                       const std::string& path,
                                       const std::vector<std::string>& headers, int timeout_ms,
                                       std::string* err);

// The body of a 200 answer, or nullopt with *err saying what failed (resolve, connect,
// timeout, status line).
std::optional<std::string> http_get(const std::string& host, int port, const std::string& path,
                                    int timeout_ms, std::string* err);

}  // namespace conflux::cli
