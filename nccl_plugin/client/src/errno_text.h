// SPDX-License-Identifier: Apache-2.0
// Thread-safe text of an errno value (std::strerror is not thread-safe; this library runs
// inside multi-threaded training processes). glibc's GNU strerror_r (g++ defines
// _GNU_SOURCE) returns the message, which may or may not be in buf.
#pragma once

#include <string.h>

#include <string>

namespace conflux::client {

inline std::string errno_text(int err) {
  char buf[256];
  const char* msg = ::strerror_r(err, buf, sizeof buf);
  return msg != nullptr ? std::string(msg) : "errno " + std::to_string(err);
}

}  // namespace conflux::client
