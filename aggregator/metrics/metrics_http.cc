// The metrics endpoint: a minimal HTTP/1.0 responder on the control thread's event loop.
// GET /metrics -> Prometheus text; GET /healthz -> "ok"; anything else -> 404.
#include <string_view>

#include "aggregator/control/control_plane.h"
#include "aggregator/metrics/prometheus.h"
#include "fmt/format.h"

namespace conflux::agg {
namespace {

constexpr size_t kMaxRequest = 8192;

std::string response(int code, std::string_view reason, std::string_view type,
                     std::string_view body) {
  return fmt::format(
      "HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      code, reason, type, body.size(), body);
}

}  // namespace

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
