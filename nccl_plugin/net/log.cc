// SPDX-License-Identifier: Apache-2.0
#include "net/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace conflux::net {
namespace {

void stderrSink(LogLevel level, unsigned long, const char*, int, const char* message) {
  if (level == LogLevel::kWarn) std::fprintf(stderr, "NET/Conflux : %s\n", message);
}

std::atomic<LogSink> g_sink{&stderrSink};

}  // namespace

void setLogSink(LogSink sink) {
  g_sink.store(sink ? sink : &stderrSink, std::memory_order_release);
}

void logf(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_sink.load(std::memory_order_acquire)(level, flags, file, line, buf);
}

}  // namespace conflux::net
