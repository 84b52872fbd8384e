// SPDX-License-Identifier: Apache-2.0
// Reloading confluxd's configuration while it runs (SIGHUP, `conflux reload`): which keys may
// change live and which may not. The control plane applies the outcome (control/reload.cc).
#pragma once

#include <string>
#include <vector>

#include "aggregator/config.h"

namespace conflux::agg {

// What a reload from `running` to `fresh` would change.
struct ReloadPlan {
  // Empty when the reload may go ahead; else why not, naming every key that cannot change
  // while the daemon runs ("threads (2 -> 4)"). Nothing is applied then.
  std::string refused;
  // The live keys that change: max_mbps, log_level, secret (from `secret` or `secret_file`),
  // secret_overlap_s, tenants (weights and secrets; the tenants' names and order must stay).
  std::vector<std::string> changed;
  bool secrets = false;  // the shared secret or a tenant's changes
  bool weights = false;  // a tenant's weight changes
};

// The keys a reload applies at once; every other key needs a restart.
bool reloadable_key(std::string_view key);

ReloadPlan plan_reload(const Config& running, const Config& fresh);

}  // namespace conflux::agg
