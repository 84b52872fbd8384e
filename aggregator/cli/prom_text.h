// SPDX-License-Identifier: Apache-2.0
// A reader of the Prometheus text exposition that confluxd writes (format 0.0.4): samples with
// their labels; comments skipped. Not a general parser: no escapes inside label values beyond
// \" and \\, no timestamps (confluxd writes none).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conflux::cli {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Every sample of `text`; nullopt with *err naming the first malformed line.
std::optional<std::vector<Sample>> parse_prom_text(std::string_view text, std::string* err);

// Sum of the samples named `name` (0 when none).
double sum(const std::vector<Sample>& s, std::string_view name);

}  // namespace conflux::cli
