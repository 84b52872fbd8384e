// SPDX-License-Identifier: Apache-2.0
#include "aggregator/cli/admin.h"

#include <chrono>
#include <thread>

#include "aggregator/cli/http_get.h"
#include "aggregator/cli/prom_text.h"
#include "conflux/common/json_text.h"
#include "conflux/protocol/admin_auth.h"
#include "fmt/format.h"

namespace conflux::cli {

AdminResult run_admin(const std::string& address, const std::string& command,
                      const std::string& secret, int timeout_ms) {
  AdminResult r;
  std::string host;
  int port = 0;
  if (Status st = parse_target(address, &host, &port); !st.ok()) {
    r.message = st.message();
    return r;
  }
  const std::string path = "/admin/" + command;
  std::vector<std::string> headers;
  if (!secret.empty()) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    headers.push_back(
        fmt::format("{}: {}", proto::kAdminAuthHeader, proto::admin_auth_value(secret, path, now)));
  }
  auto a = http::request("POST", host, port, path, headers, timeout_ms, &r.message);
  if (!a) return r;
  std::string body = a->body;
  while (!body.empty() && body.back() == '\n') body.pop_back();
  if (a->status == 200) {
    r.ok = true;
    r.message = body;
  } else if (a->status == 403) {
    r.message = "refused: " + body;
  } else if (a->status == 404) {
    r.message = "this daemon has no " + path + " (an older confluxd?)";
  } else {
    r.message = fmt::format("HTTP {}: {}", a->status, body);
  }
  return r;
}

AdminResult wait_drained(const std::string& address, double wait_s, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  AdminResult r;
  std::string host;
  int port = 0;
  if (Status st = parse_target(address, &host, &port); !st.ok()) {
    r.message = st.message();
    return r;
  }
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(wait_s);
  for (;;) {
    std::string err;
    auto body = http::get(host, port, "/metrics", timeout_ms, &err);
    auto samples = body ? parse_prom_text(*body, &err) : std::nullopt;
    if (!samples) {
      r.message = "waiting for the drain: " + err;
      return r;
    }
    const double jobs = sum(*samples, "conflux_jobs_active");
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    if (jobs == 0) {
      r.ok = true;
      r.message = fmt::format("drained: no job left after {:.1f} s", took);
      return r;
    }
    if (Clock::now() >= deadline) {
      r.message =
          fmt::format("{:.0f} job(s) still on it after {:.1f} s (--wait-timeout)", jobs, took);
      return r;
    }
    // Jobs leave at their next collective: a scrape every 200 ms sees it soon enough.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::string admin_json(const std::vector<std::string>& daemons,
                       const std::vector<AdminResult>& results) {
  json::Json list = json::Json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    list.push_back(
        {{"address", daemons[i]}, {"ok", results[i].ok}, {"message", results[i].message}});
  }
  return json::one_line(json::Json{{"daemons", std::move(list)}}) + "\n";
}

}  // namespace conflux::cli
