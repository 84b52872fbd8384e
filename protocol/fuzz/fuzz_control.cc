// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the control-frame parser, fed a byte stream of several frames.
// Every accepted frame must re-encode to exactly the bytes it was parsed from.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "conflux/protocol/control.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conflux::proto;
  std::span<const uint8_t> rest(data, size);
  while (!rest.empty()) {
    ControlMsg m;
    size_t used = 0;
    const ControlParse p = parse_control(rest, &m, &used);
    if (p != ControlParse::kOk) {
      if (used != 0) std::abort();
      return 0;
    }
    std::vector<uint8_t> again;
    encode_control(m, again);
    if (again.size() != used || std::memcmp(again.data(), rest.data(), used) != 0) std::abort();
    (void)to_string(m);
    rest = rest.subspan(used);
  }
  return 0;
}
