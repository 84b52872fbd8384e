// SPDX-License-Identifier: Apache-2.0
#include "json_number.h"

#include "conflux/common/json_text.h"

namespace conflux::client::e2e {

namespace {

// The first number named `key` in `j` and below, in document order; nullptr if none.
const json::Json* find_number(const json::Json& j, const std::string& key) {
  if (j.is_object()) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_number()) return &*it;
  }
  if (!j.is_structured()) return nullptr;
  for (const json::Json& item : j) {
    if (const json::Json* n = find_number(item, key)) return n;
  }
  return nullptr;
}

}  // namespace

double json_number(const std::string& text, const std::string& key) {
  const json::Json j = json::Json::parse(text, nullptr, false);
  const json::Json* n = j.is_discarded() ? nullptr : find_number(j, key);
  return n == nullptr ? -1 : n->get<double>();
}

}  // namespace conflux::client::e2e
