// SPDX-License-Identifier: Apache-2.0
// Waiting in a test for something another thread or process makes true (a counter that moves,
// a line in a log, a file that appears): wait_until(done, limit) polls `done` until it holds and
// returns true, or returns false once `limit` has passed. The limit only bounds a hang: it is
// not a speed check, so give it room (a loaded 2-core CI machine) and assert on the result.
#pragma once

#include <chrono>
#include <thread>

namespace conflux::test {

template <class Done>
bool wait_until(Done done, std::chrono::milliseconds limit = std::chrono::seconds(10),
                std::chrono::microseconds poll = std::chrono::milliseconds(1)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return done();
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace conflux::test
