// SPDX-License-Identifier: Apache-2.0
// Reloading the configuration while the daemon runs (control_plane.h, config_reload.h): on the
// control thread, at a SIGHUP (Daemon::request_reload) or a POST /admin/reload.
#include "aggregator/config_reload.h"
#include "aggregator/control/control_plane.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

void ControlPlane::set_reload_source(ReloadSource source, Config* live) {
  reload_source_ = std::move(source);
  live_cfg_ = live;
}

std::pair<int, std::string> ControlPlane::reload() {
  const auto outcome = [&](ReloadResult r, int http, std::string text) {
    counters_.config_reloads[static_cast<int>(r)].inc();
    if (r == ReloadResult::kApplied) {
      spdlog::info("reload: {}", text);
    } else {
      spdlog::warn("reload: {}", text);
    }
    return std::pair<int, std::string>{http, text};
  };
  if (!reload_source_ || live_cfg_ == nullptr) {
    return outcome(ReloadResult::kError, 400, "this daemon has no configuration to read again");
  }
  Config fresh;
  if (Status st = reload_source_(&fresh); !st.ok()) {
    return outcome(
        ReloadResult::kError, 400,
        fmt::format("the configuration is not valid, nothing changed: {}", st.message()));
  }
  const ReloadPlan plan = plan_reload(*live_cfg_, fresh);
  if (!plan.refused.empty()) {
    return outcome(ReloadResult::kRefused, 409,
                   fmt::format("refused, the running configuration stays: {}", plan.refused));
  }
  Config& live = *live_cfg_;
  if (plan.secrets && fresh.secret_overlap_s > 0) {
    // The secrets before this reload stay valid a while: running jobs rejoin with them.
    std::vector<std::string> tenants;
    for (const Tenant& t : live.tenants) tenants.push_back(t.secret);
    manager_.set_previous_secrets(live.secret, std::move(tenants));
    previous_until_ = Clock::now() + std::chrono::seconds(fresh.secret_overlap_s);
  }
  live.secret = fresh.secret;
  live.secret_file = fresh.secret_file;
  live.secret_overlap_s = fresh.secret_overlap_s;
  for (size_t i = 0; i < live.tenants.size(); ++i) {
    live.tenants[i].secret = fresh.tenants[i].secret;
    live.tenants[i].secret_file = fresh.tenants[i].secret_file;
    live.tenants[i].weight = fresh.tenants[i].weight;
  }
  if (live.log_level != fresh.log_level) {
    live.log_level = fresh.log_level;
    spdlog::set_level(spdlog::level::from_str(live.log_level));
  }
  if (live.max_mbps != fresh.max_mbps) {
    live.max_mbps = fresh.max_mbps;
    set_max_mbps(static_cast<uint32_t>(fresh.max_mbps));
  } else if (plan.weights) {
    manager_.regrant_all(proto::CapacityReason::kCapChanged, *this);  // the weights moved
  }
  counters_.config_generation.inc();
  return outcome(
      ReloadResult::kApplied, 200,
      plan.changed.empty()
          ? fmt::format("generation {}: nothing changed", counters_.config_generation.get())
          : fmt::format("generation {}: applied {}{}", counters_.config_generation.get(),
                        fmt::join(plan.changed, ", "),
                        plan.secrets ? fmt::format(" (the previous secrets still "
                                                   "authenticate for {} s)",
                                                   fresh.secret_overlap_s)
                                     : std::string()));
}

}  // namespace conflux::agg
