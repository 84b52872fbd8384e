// SPDX-License-Identifier: Apache-2.0
#include "aggregator/config_reload.h"

#include <algorithm>
#include <array>

#include "fmt/format.h"

namespace conflux::agg {
namespace {

// secret and secret_file: finalize_config() resolves the file into `secret`, which is
// compared (a rotated file with the same path is a change).
constexpr std::array<std::string_view, 5> kLive = {"max_mbps", "log_level", "secret", "secret_file",
                                                   "secret_overlap_s"};

bool is_secret(std::string_view key) { return key == "secret" || key == "secret_file"; }

// Ok when the tenants' names and order stay, else invalid_argument naming both lists (an
// entry of the refusal).
Status check_tenant_names(const Config& running, const Config& fresh) {
  std::vector<std::string> was, now;
  for (const Tenant& t : running.tenants) was.push_back(t.name);
  for (const Tenant& t : fresh.tenants) now.push_back(t.name);
  if (was == now) return {};
  return invalid_argument(
      fmt::format("tenants ([{}] -> [{}]: names and order must stay; weights and secrets may "
                  "change)",
                  fmt::join(was, ", "), fmt::join(now, ", ")));
}

}  // namespace

bool reloadable_key(std::string_view key) {
  return std::find(kLive.begin(), kLive.end(), key) != kLive.end();
}

ReloadPlan plan_reload(const Config& running, const Config& fresh) {
  ReloadPlan plan;
  std::vector<std::string> refused;
  for (const ParamInfo& p : config_params()) {
    if (is_secret(p.key)) continue;  // compared below, as the resolved secret
    const std::string a = param_value_toml(running, p), b = param_value_toml(fresh, p);
    if (a == b) continue;
    if (reloadable_key(p.key)) {
      plan.changed.emplace_back(p.key);
    } else {
      refused.push_back(fmt::format("{} ({} -> {})", p.key, a, b));
    }
  }
  if (running.secret != fresh.secret) {
    plan.changed.emplace_back("secret");
    plan.secrets = true;
  }
  if (Status st = check_tenant_names(running, fresh); !st.ok()) {
    refused.push_back(st.message());
  } else {
    bool tenants = false;
    for (size_t i = 0; i < running.tenants.size(); ++i) {
      const Tenant &a = running.tenants[i], &b = fresh.tenants[i];
      plan.weights = plan.weights || a.weight != b.weight;
      tenants = tenants || a.weight != b.weight || a.secret != b.secret;
      plan.secrets = plan.secrets || a.secret != b.secret;
    }
    if (tenants) plan.changed.emplace_back("tenants");
  }
  if (!refused.empty()) {
    plan.refused = fmt::format("{} cannot change while the daemon runs (restart it for {}): {}",
                               refused.size() == 1 ? "this key" : "these keys",
                               refused.size() == 1 ? "it" : "them", fmt::join(refused, "; "));
  }
  return plan;
}

}  // namespace conflux::agg
