// SPDX-License-Identifier: Apache-2.0
// The metrics endpoint: a minimal HTTP/1.0 responder on the control thread's event loop.
// GET /metrics -> Prometheus text; GET /healthz -> "ok" (alive); GET /readyz -> "ready", or
// 503 "draining" while Joins are refused; POST /admin/drain, POST
// /admin/undrain and POST /admin/max-mbps/N (authenticated, see serve_admin) -> drain control
// and the egress cap; anything else -> 404.
#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <string_view>

#include "aggregator/control/control_plane.h"
#include "aggregator/metrics/prometheus.h"
#include "conflux/common/status.h"
#include "conflux/protocol/admin_auth.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {
namespace {

constexpr size_t kMaxRequest = 8192;
constexpr uint32_t kMaxMbpsLimit = 10000000;  // the max_mbps config key's own limit

std::string response(int code, std::string_view reason, std::string_view type,
                     std::string_view body) {
  return fmt::format(
      "HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      code, reason, type, body.size(), body);
}

// The value of header `name` (case-insensitive) in `request`, or "".
std::string_view header(std::string_view request, std::string_view name) {
  size_t at = request.find('\n');
  while (at != std::string_view::npos && at + 1 < request.size()) {
    const size_t end = request.find('\n', at + 1);
    std::string_view line =
        request.substr(at + 1, end == std::string_view::npos ? end : end - at - 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // end of the headers
    const size_t colon = line.find(':');
    if (colon == name.size()) {
      bool same = true;
      for (size_t i = 0; i < colon && same; ++i) {
        same = std::tolower(static_cast<unsigned char>(line[i])) ==
               std::tolower(static_cast<unsigned char>(name[i]));
      }
      if (same) {
        std::string_view v = line.substr(colon + 1);
        while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        return v;
      }
    }
    at = end;
  }
  return {};
}

}  // namespace

std::string ControlPlane::serve_admin(const Connection& c, std::string_view request,
                                      std::string_view path) {
  char peer[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &c.peer.sin_addr, peer, sizeof peer);
  // With a secret: the header must be valid. Without one: loopback peers only.
  Status allowed;
  if (cfg_.secret.empty()) {
    if ((ntohl(c.peer.sin_addr.s_addr) >> 24) != 127) {
      allowed = refused("the daemon has no secret: admin commands are taken from loopback only");
    }
  } else {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    const std::string_view auth = header(request, proto::kAdminAuthHeader);
    allowed = auth.empty()
                  ? invalid_argument(fmt::format("missing {} header", proto::kAdminAuthHeader))
                  : proto::admin_auth_check(cfg_.secret, path, auth, now);
    // The secret before a reload still works for secret_overlap_s (an operator's CLI that
    // still has it).
    const std::string& previous = manager_.tenant_secret(kSharedTenant | kPreviousSecret);
    if (!allowed.ok() && !auth.empty() && previous_secrets_valid() && !previous.empty() &&
        proto::admin_auth_check(previous, path, auth, now).ok()) {
      allowed = {};
    }
  }
  if (!allowed.ok()) {
    spdlog::warn("admin {} from {} refused: {}", path, peer, allowed.message());
    return response(403, "Forbidden", "text/plain; charset=utf-8", allowed.message() + "\n");
  }
  spdlog::info("admin {} from {}", path, peer);
  constexpr std::string_view kMaxMbps = "/admin/max-mbps/";
  if (path.starts_with(kMaxMbps)) {
    // The value is part of the path, so the authentication header covers it.
    const std::string_view digits = path.substr(kMaxMbps.size());
    uint32_t mbps = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mbps);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
        mbps > kMaxMbpsLimit) {
      return response(400, "Bad Request", "text/plain; charset=utf-8",
                      fmt::format("max-mbps: '{}' is not a rate in Mbit/s (0..{}; 0 = no cap)\n",
                                  digits, kMaxMbpsLimit));
    }
    const size_t told = set_max_mbps(mbps);
    return response(200, "OK", "text/plain; charset=utf-8",
                    fmt::format("max_mbps {}{}; {} job(s) told their new grant\n", mbps,
                                mbps == 0 ? " (no cap)" : " Mbit/s", told));
  }
  if (path == "/admin/reload") {
    const auto [status, text] = reload();
    return response(status,
                    status == 200   ? "OK"
                    : status == 409 ? "Conflict"
                                    : "Bad Request",
                    "text/plain; charset=utf-8", text + "\n");
  }
  const bool drain = path == "/admin/drain";
  const size_t told = set_draining(drain);
  return response(200, "OK", "text/plain; charset=utf-8",
                  drain ? fmt::format("draining: Joins refused, {} member(s) told to leave\n", told)
                        : std::string("undrained: Joins taken\n"));
}

void ControlPlane::serve_http(Connection& c) {
  const std::string_view req(reinterpret_cast<const char*>(c.rbuf.data()), c.rbuf.size());
  const bool complete =
      req.find("\r\n\r\n") != std::string_view::npos || req.find("\n\n") != std::string_view::npos;
  if (!complete && c.rbuf.size() < kMaxRequest) return;
  counters_.metrics_requests.inc();
  const std::string_view line = req.substr(0, req.find_first_of("\r\n"));
  std::string out;
  if (line.starts_with("GET /metrics ") || line == "GET /metrics") {
    out = response(200, "OK", "text/plain; version=0.0.4; charset=utf-8",
                   render_metrics(dataplane_, jobs_, counters_));
  } else if (line.starts_with("GET /healthz ") || line == "GET /healthz") {
    out = response(200, "OK", "text/plain; charset=utf-8", "ok\n");
  } else if (line.starts_with("GET /readyz ") || line == "GET /readyz") {
    // Takes jobs: a Kubernetes readiness probe (a drained daemon stays alive for /healthz).
    out = draining_
              ? response(503, "Service Unavailable", "text/plain; charset=utf-8", "draining\n")
              : response(200, "OK", "text/plain; charset=utf-8", "ready\n");
  } else if (line.starts_with("POST /admin/drain ") || line.starts_with("POST /admin/undrain ") ||
             line.starts_with("POST /admin/max-mbps/") || line.starts_with("POST /admin/reload ")) {
    out = serve_admin(c, req, line.substr(5, line.find(' ', 5) - 5));
  } else {
    out = response(404, "Not Found", "text/plain; charset=utf-8", "not found\n");
  }
  c.rbuf.clear();
  c.state = Connection::State::kClosing;
  c.close_deadline = Clock::now() + std::chrono::seconds(1);
  c.wbuf.insert(c.wbuf.end(), out.begin(), out.end());
  flush(c);
}

}  // namespace conflux::agg
