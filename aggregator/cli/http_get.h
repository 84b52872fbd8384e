// A blocking HTTP/1.0 GET for the operator CLI (confluxd's /metrics and /healthz answer
// HTTP/1.0 and close the connection). Any thread; blocks up to `timeout_ms` per step.
#pragma once

#include <optional>
#include <string>

namespace conflux::cli {

// The body of a 200 answer, or nullopt with *err saying what failed (resolve, connect,
// timeout, status line).
std::optional<std::string> http_get(const std::string& host, int port, const std::string& path,
                                    int timeout_ms, std::string* err);

}  // namespace conflux::cli
