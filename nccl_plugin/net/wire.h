// SPDX-License-Identifier: Apache-2.0
// Byte layouts the TCP transport puts on the wire or into NCCL's connection handle.
//
// All integers little-endian, fixed offsets, no bitfields. Three formats:
//  - Handle (64 B, inside NCCL's 128 B handle): where the listener waits and a nonce that
//    every incoming socket must echo.
//  - Hello (32 B): first bytes on every socket of a new connection, connector -> listener.
//  - MsgHeader (24 B): one per isend, on the control socket, followed by the payload when the
//    message is at most the inline size.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "net/socket.h"

namespace conflux::net::wire {

inline constexpr uint32_t kHandleMagic = 0x48584643;  // "CFXH"
inline constexpr uint32_t kHelloMagic = 0x43584643;   // "CFXC"
inline constexpr uint32_t kMsgMagic = 0x4d584643;     // "CFXM"
inline constexpr uint16_t kVersion = 1;

inline constexpr size_t kHandleBytes = 64;
inline constexpr int kMaxDataSockets = 64;
inline constexpr size_t kHelloBytes = 32;
inline constexpr size_t kMsgHeaderBytes = 24;

inline void putU16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
inline void putU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline void putU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline uint16_t getU16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t getU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Connection handle produced by listen() and consumed by connect().
struct Handle {
  SockAddr addr;
  uint64_t nonce = 0;
};
void encodeHandle(const Handle& h, uint8_t out[kHandleBytes]);
// Returns false when the bytes are not a Conflux handle of this version.
bool decodeHandle(const uint8_t in[kHandleBytes], Handle* h);

enum class SocketRole : uint8_t { kControl = 0, kData = 1 };

struct Hello {
  SocketRole role = SocketRole::kControl;
  uint8_t index = 0;      // data socket index (0 for control)
  uint16_t numData = 0;   // data sockets in this connection
  uint64_t nonce = 0;     // copied from the handle
  uint64_t connId = 0;    // random, identical on all sockets of one connection
  uint32_t minChunk = 0;  // sender's chunk granularity (both sides split messages alike)
};
void encodeHello(const Hello& h, uint8_t out[kHelloBytes]);
bool decodeHello(const uint8_t in[kHelloBytes], Hello* h);

inline constexpr uint32_t kMsgInline = 0x1;  // payload follows the header on the control socket

struct MsgHeader {
  int32_t tag = 0;
  uint64_t size = 0;
  uint32_t seq = 0;    // message sequence number on this connection, from 0, wrapping
  uint32_t flags = 0;  // kMsgInline
};
void encodeMsgHeader(const MsgHeader& h, uint8_t out[kMsgHeaderBytes]);
bool decodeMsgHeader(const uint8_t in[kMsgHeaderBytes], MsgHeader* h);

}  // namespace conflux::net::wire
