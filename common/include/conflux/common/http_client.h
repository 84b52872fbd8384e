// SPDX-License-Identifier: Apache-2.0
// The one HTTP client of the tree: the operator CLI (status, drain, throttle), the tools and
// benchmarks (tools/util: a daemon's /metrics) and the tests all call confluxd's HTTP port
// through it. Blocking HTTP/1.0 requests (confluxd answers HTTP/1.0 and closes the
// connection); any thread; each step (connect, send, every read) bounded by `timeout_ms`.
//
// Why not Debian's cpp-httplib: its package is a compiled library that brings OpenSSL, zlib
// and Brotli into the shipped `conflux` CLI (and their arm64 builds into the AArch64 cross
// build) for a few plain-text requests to one loopback or LAN port; this file is that client
// and nothing more.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace conflux::http {

struct Answer {
  int status = 0;  // e.g. 200, 403
  std::string body;
};

// `method` `path` on host:port with extra header lines ("Name: value"); nullopt with *err
// saying what failed (resolve, connect, timeout, a malformed answer).
std::optional<Answer> request(const std::string& method, const std::string& host, int port,
                              const std::string& path, const std::vector<std::string>& headers,
                              int timeout_ms, std::string* err);

// The body of a 200 answer to GET, or nullopt with *err saying what failed (the status too).
std::optional<std::string> get(const std::string& host, int port, const std::string& path,
                               int timeout_ms, std::string* err);

}  // namespace conflux::http
