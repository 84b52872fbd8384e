// SPDX-License-Identifier: Apache-2.0
// Logging facade of the Conflux plugin (transport, core, and later CollNet).
//
// Every message goes to one sink as a finished string; the plugin core installs a sink that
// forwards to the logger NCCL passes to init() with the fixed prefix "NET/Conflux". Without a
// sink (standalone use of the transport, unit tests) warnings go to stderr and the rest is
// dropped. Thread-safe: any thread may log; the sink may be swapped at any time.
#pragma once

namespace conflux::net {

enum class LogLevel : int { kWarn = 2, kInfo = 3, kTrace = 5 };

// Subsystem flags (same bits as NCCL's debug subsystems, so the NCCL sink passes them through).
inline constexpr unsigned long kLogInit = 0x1;
inline constexpr unsigned long kLogColl = 0x2;
inline constexpr unsigned long kLogNet = 0x10;
inline constexpr unsigned long kLogEnv = 0x80;

// Receives one formatted message (without prefix). Must be callable from any thread.
using LogSink = void (*)(LogLevel level, unsigned long flags, const char* file, int line,
                         const char* message);

// Installs the sink; nullptr restores the stderr default.
void setLogSink(LogSink sink);

void logf(LogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

}  // namespace conflux::net

#define CFX_WARN(flags, ...) \
  ::conflux::net::logf(::conflux::net::LogLevel::kWarn, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define CFX_INFO(flags, ...) \
  ::conflux::net::logf(::conflux::net::LogLevel::kInfo, (flags), __FILE__, __LINE__, __VA_ARGS__)
#define CFX_TRACE(flags, ...) \
  ::conflux::net::logf(::conflux::net::LogLevel::kTrace, (flags), __FILE__, __LINE__, __VA_ARGS__)
