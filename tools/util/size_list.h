// SPDX-License-Identifier: Apache-2.0
// Parsing of size lists for the tools: "4,16,1K,64M" (K/M/G = 2^10/2^20/2^30) and
// ranges "MIN:MAX:FACTOR" ("4:256M:4" = 4, 16, 64, ... up to 256 MiB).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conflux::tools {

std::optional<uint64_t> parse_size(std::string_view s);

// Returns false and sets *error on a malformed list.
bool parse_size_list(std::string_view s, std::vector<uint64_t>* out, std::string* error);

}  // namespace conflux::tools
