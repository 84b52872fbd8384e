// SPDX-License-Identifier: Apache-2.0
// The names of this process's threads (/proc/self/task/*/comm), for tests that check which
// threads a component runs.
#pragma once

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace conflux::testing {

inline std::multiset<std::string> thread_names() {
  std::multiset<std::string> names;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(t.path() / "comm");
    std::string name;
    if (std::getline(in, name)) names.insert(name);
  }
  return names;
}

}  // namespace conflux::testing
