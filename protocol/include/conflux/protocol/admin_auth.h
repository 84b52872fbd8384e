// SPDX-License-Identifier: Apache-2.0
// Authentication of operator commands sent to confluxd's HTTP port (`conflux drain` and
// `conflux undrain`, aggregator/README.md "Administration"): the request carries the header
//   X-Conflux-Auth: <unix seconds> <hex HMAC-SHA256(secret, "conflux admin v1 " path " " seconds)>
// and the daemon accepts it within kAdminMaxSkewS of its own clock. A captured header can be
// replayed for that long, for that one path only (the commands are idempotent).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "conflux/common/status.h"

namespace conflux::proto {

inline constexpr std::string_view kAdminAuthHeader = "X-Conflux-Auth";
inline constexpr int64_t kAdminMaxSkewS = 60;

// The header's value for `path` at `unix_s`.
std::string admin_auth_value(std::string_view secret, std::string_view path, int64_t unix_s);

// Ok when `value` authenticates `path` at `now_s`, else invalid_argument saying why not (for
// the 403 answer).
conflux::Status admin_auth_check(std::string_view secret, std::string_view path,
                                 std::string_view value, int64_t now_s);

}  // namespace conflux::proto
