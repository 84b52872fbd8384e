// SPDX-License-Identifier: Apache-2.0
// Names the calling thread, so `top -H`, `ps -L`, perf and gdb tell Conflux's threads apart
// (Linux keeps 15 characters; a longer name is cut).
#pragma once

#include <pthread.h>

#include <cstring>
#include <string>

namespace conflux {

inline void name_this_thread(const std::string& name) {
  char buf[16];
  std::strncpy(buf, name.c_str(), sizeof buf - 1);
  buf[sizeof buf - 1] = '\0';
  pthread_setname_np(pthread_self(), buf);
}

}  // namespace conflux
