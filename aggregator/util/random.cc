// SPDX-License-Identifier: Apache-2.0
#include "aggregator/util/random.h"

#include <sys/random.h>

#include <cerrno>
#include <chrono>

namespace conflux::agg {

uint64_t random_u64() {
  uint64_t v = 0;
  auto* p = reinterpret_cast<char*>(&v);
  size_t got = 0;
  while (got < sizeof(v)) {
    const ssize_t n = getrandom(p + got, sizeof(v) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      // getrandom cannot fail on Linux >= 3.17 with these arguments; keep going anyway.
      return v ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
  }
  return v;
}

}  // namespace conflux::agg
