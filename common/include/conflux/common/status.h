// SPDX-License-Identifier: Apache-2.0
// Status: what an operation that can fail returns in the daemon, the client engine, the tools
// and the NCCL plugin's CollNet layer: ok, or a code and a message that says what failed and
// why, as specifically as the failing layer can say it ("multicast_range 239.1.0.0/33: prefix
// length over 32").
//
// Why this and not std::string (empty = success) or std::expected: an empty string reads as
// "no message", not as "it worked", and nothing stops a caller from dropping it; Status is
// [[nodiscard]], says ok() at the call site, and carries a code that callers branch on
// (retry what is unavailable, report what is invalid) without parsing text. std::expected is
// C++23 (this tree is C++20), and the functions here return their values through their
// arguments already. The codes are few on purpose: the message carries the detail.
//
// Not this type: net::Status (nccl_plugin/net/status.h) is the NCCL transport's result code,
// numerically equal to ncclResult_t for the ABI adapters, with the detail in the log line the
// failing call writes; proto::Status (protocol/control.h) is a code on the wire.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace conflux {

class [[nodiscard]] Status {
 public:
  enum class Code : uint8_t {
    kOk = 0,
    kInvalidArgument,  // bad input: a config key, a flag, an address, a size
    kUnavailable,      // the other end cannot be reached or does not take it now (retry later)
    kRefused,          // the other end answered and said no (protocol refusal, HTTP error)
    kTimeout,          // nothing came back in time
    kSystem,           // a system call failed locally (socket, bind, thread, memory)
    kInternal,         // a bug, or a state the code does not expect
  };

  Status() = default;  // ok
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // The same error with `prefix` in front of its message ("aggregator 10.0.0.1:7470: ").
  Status prefixed(std::string_view prefix) const {
    if (ok()) return *this;
    return Status(code_, std::string(prefix) + message_);
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) {
  return Status(Status::Code::kInvalidArgument, std::move(message));
}
inline Status unavailable(std::string message) {
  return Status(Status::Code::kUnavailable, std::move(message));
}
inline Status refused(std::string message) {
  return Status(Status::Code::kRefused, std::move(message));
}
inline Status timed_out(std::string message) {
  return Status(Status::Code::kTimeout, std::move(message));
}
inline Status system_error(std::string message) {
  return Status(Status::Code::kSystem, std::move(message));
}
inline Status internal_error(std::string message) {
  return Status(Status::Code::kInternal, std::move(message));
}

inline const char* to_string(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "ok";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kUnavailable:
      return "unavailable";
    case Status::Code::kRefused:
      return "refused";
    case Status::Code::kTimeout:
      return "timed out";
    case Status::Code::kSystem:
      return "system error";
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

}  // namespace conflux

// Returns a failed Status from the enclosing function (which returns Status).
#define CFX_TRY(expr)                                  \
  do {                                                 \
    ::conflux::Status cfx_try_status_ = (expr);        \
    if (!cfx_try_status_.ok()) return cfx_try_status_; \
  } while (0)
