// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the data-plane parser. Any accepted datagram must re-encode to the
// same header bytes (the parser accepts exactly the canonical encoding).
#include <cstdlib>
#include <cstring>

#include "conflux/protocol/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conflux::proto;
  DataHeader h;
  const uint8_t* payload = nullptr;
  const DropReason r = parse_data({data, size}, kMaxPayloadBytes, &h, &payload);
  if (r != DropReason::kOk) {
    if (drop_reason_name(r) == "unknown") std::abort();
    return 0;
  }
  if (payload != data + kDataHeaderSize || h.wire_body_bytes() + kDataHeaderSize != size) {
    std::abort();
  }
  uint8_t again[kDataHeaderSize];
  encode_data_header(h, again);
  if (std::memcmp(again, data, kDataHeaderSize) != 0) std::abort();
  (void)h.to_string();
  return 0;
}
