// SPDX-License-Identifier: Apache-2.0
// Reading a number out of a worker's --json report (the end-to-end tests' checks).
#pragma once

#include <string>

namespace conflux::client::e2e {

// The first number named `key` in a JSON text (a worker's --json report), searching objects
// before their members' members, in document order; -1 if there is none or the text is not JSON.
double json_number(const std::string& text, const std::string& key);

}  // namespace conflux::client::e2e
