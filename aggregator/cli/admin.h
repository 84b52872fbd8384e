// SPDX-License-Identifier: Apache-2.0
// `conflux drain` and `conflux undrain`: POST /admin/drain or /admin/undrain to a daemon's
// HTTP port, signed with the shared secret when one is given (protocol/admin_auth.h).
#pragma once

#include <string>
#include <vector>

namespace conflux::cli {

struct AdminResult {
  bool ok = false;
  std::string message;  // the daemon's answer, or why the request failed
};

// `command` is "drain" or "undrain"; `secret` "" sends no signature (a daemon without a secret
// takes admin commands from loopback only).
AdminResult run_admin(const std::string& address, const std::string& command,
                      const std::string& secret, int timeout_ms);
// drain --wait: after the drain, polls the daemon's /metrics until it serves no job
// (conflux_jobs_active 0: every job has moved off), at most `wait_s` seconds. ok with "drained:
// ..." or, when jobs are left at the deadline or the daemon cannot be read, why not.
AdminResult wait_drained(const std::string& address, double wait_s, int timeout_ms);
// --json: {"daemons": [{"address": ..., "ok": ..., "message": ...}, ...]}, results[i] being
// daemons[i]'s.
std::string admin_json(const std::vector<std::string>& daemons,
                       const std::vector<AdminResult>& results);

}  // namespace conflux::cli
