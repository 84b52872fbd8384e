// SPDX-License-Identifier: Apache-2.0
#include "net/wire.h"

namespace conflux::net::wire {

// Handle: magic u32 | version u16 | family u16 | port u16 | pad u16 | addr[16] | scope u32 |
//         nonce u64 | zero padding to 64.
void encodeHandle(const Handle& h, uint8_t out[kHandleBytes]) {
  std::memset(out, 0, kHandleBytes);
  putU32(out, kHandleMagic);
  putU16(out + 4, kVersion);
  putU16(out + 6, uint16_t(h.addr.family() == AF_INET6 ? 6 : 4));
  putU16(out + 8, h.addr.port());
  if (h.addr.family() == AF_INET6) {
    std::memcpy(out + 12, &h.addr.u.in6.sin6_addr, 16);
    putU32(out + 28, h.addr.u.in6.sin6_scope_id);
  } else {
    std::memcpy(out + 12, &h.addr.u.in4.sin_addr, 4);
  }
  putU64(out + 32, h.nonce);
}

bool decodeHandle(const uint8_t in[kHandleBytes], Handle* h) {
  if (getU32(in) != kHandleMagic || getU16(in + 4) != kVersion) return false;
  uint16_t fam = getU16(in + 6);
  h->addr = SockAddr{};
  if (fam == 6) {
    h->addr.u.in6.sin6_family = AF_INET6;
    std::memcpy(&h->addr.u.in6.sin6_addr, in + 12, 16);
    h->addr.u.in6.sin6_scope_id = getU32(in + 28);
  } else if (fam == 4) {
    h->addr.u.in4.sin_family = AF_INET;
    std::memcpy(&h->addr.u.in4.sin_addr, in + 12, 4);
  } else {
    return false;
  }
  h->addr.setPort(getU16(in + 8));
  h->nonce = getU64(in + 32);
  return h->addr.port() != 0;
}

// Hello: magic u32 | version u16 | role u8 | index u8 | numData u16 | pad u16 | nonce u64 |
//        connId u64 | minChunk u32.
void encodeHello(const Hello& h, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  putU32(out, kHelloMagic);
  putU16(out + 4, kVersion);
  out[6] = uint8_t(h.role);
  out[7] = h.index;
  putU16(out + 8, h.numData);
  putU64(out + 12, h.nonce);
  putU64(out + 20, h.connId);
  putU32(out + 28, h.minChunk);
}

bool decodeHello(const uint8_t in[kHelloBytes], Hello* h) {
  if (getU32(in) != kHelloMagic || getU16(in + 4) != kVersion) return false;
  if (in[6] > uint8_t(SocketRole::kData)) return false;
  h->role = SocketRole(in[6]);
  h->index = in[7];
  h->numData = getU16(in + 8);
  h->nonce = getU64(in + 12);
  h->connId = getU64(in + 20);
  h->minChunk = getU32(in + 28);
  if (h->numData == 0 || h->numData > kMaxDataSockets || h->minChunk == 0) return false;
  return h->role == SocketRole::kControl ? h->index == 0 : h->index < h->numData;
}

// MsgHeader: magic u32 | tag i32 | size u64 | seq u32 | flags u32.
void encodeMsgHeader(const MsgHeader& h, uint8_t out[kMsgHeaderBytes]) {
  putU32(out, kMsgMagic);
  putU32(out + 4, uint32_t(h.tag));
  putU64(out + 8, h.size);
  putU32(out + 16, h.seq);
  putU32(out + 20, h.flags);
}

bool decodeMsgHeader(const uint8_t in[kMsgHeaderBytes], MsgHeader* h) {
  if (getU32(in) != kMsgMagic) return false;
  h->tag = int32_t(getU32(in + 4));
  h->size = getU64(in + 8);
  h->seq = getU32(in + 16);
  h->flags = getU32(in + 20);
  return (h->flags & ~kMsgInline) == 0;
}

}  // namespace conflux::net::wire
