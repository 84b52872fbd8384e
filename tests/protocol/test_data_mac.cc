// SPDX-License-Identifier: Apache-2.0
// The data MAC (SPEC.md §6): key derivation, sign/verify, and the parser's trailer accounting.
#include <gtest/gtest.h>

#include <vector>

#include "conflux/protocol/admin_auth.h"
#include "conflux/protocol/control.h"
#include "conflux/protocol/data.h"
#include "conflux/protocol/data_mac.h"

namespace conflux::proto {
namespace {

// A signed CONTRIB of `count` int32 elements: header, payload, trailer.
std::vector<uint8_t> signed_datagram(DataMac& mac, uint32_t count, uint32_t sender, uint64_t seq) {
  DataHeader h;
  h.flags = kFlagMac;
  h.job_id = 4097;
  h.contributor = static_cast<uint16_t>(sender);
  h.job_token = 0x0123456789abcdefULL;
  h.slot = 3;
  h.generation = 9;
  h.count = count;
  h.dtype = DType::kInt32;
  std::vector<uint8_t> d(kDataHeaderSize + h.payload_bytes() + kMacTrailerSize);
  encode_data_header(h, d.data());
  for (size_t i = kDataHeaderSize; i < kDataHeaderSize + h.payload_bytes(); ++i) {
    d[i] = static_cast<uint8_t>(i * 7);
  }
  EXPECT_TRUE(mac.sign(d.data(), d.data() + kDataHeaderSize, h.payload_bytes(), sender, seq,
                       d.data() + d.size() - kMacTrailerSize));
  return d;
}

bool verify(DataMac& mac, const std::vector<uint8_t>& d) {
  return mac.verify(d.data(), d.data() + kDataHeaderSize,
                    d.size() - kDataHeaderSize - kMacTrailerSize,
                    d.data() + d.size() - kMacTrailerSize);
}

TEST(DataMac, KeyIsFreshPerJobTokenAndSecret) {
  const DataKey k = derive_data_key("secret", 1, 2);
  EXPECT_EQ(k, derive_data_key("secret", 1, 2));
  EXPECT_NE(k, derive_data_key("secret", 2, 2));
  EXPECT_NE(k, derive_data_key("secret", 1, 3));
  EXPECT_NE(k, derive_data_key("secreT", 1, 2));
  EXPECT_NE(k, DataKey{});
}

TEST(DataMac, EveryByteOfHeaderPayloadAndTrailerIsCovered) {
  DataMac mac;
  ASSERT_TRUE(mac.set_key(derive_data_key("secret", 4097, 0x0123456789abcdefULL)));
  const std::vector<uint8_t> d = signed_datagram(mac, 5, 2, 77);
  ASSERT_TRUE(verify(mac, d));
  EXPECT_EQ(DataMac::sender_of(d.data() + d.size() - kMacTrailerSize), 2u);
  for (size_t i = 0; i < d.size(); ++i) {
    for (uint8_t bit : {0x01, 0x80}) {
      std::vector<uint8_t> t = d;
      t[i] ^= bit;
      EXPECT_FALSE(verify(mac, t)) << "byte " << i << " bit " << int(bit);
    }
  }
  // Same content, another sequence number: another tag, both valid.
  const std::vector<uint8_t> again = signed_datagram(mac, 5, 2, 78);
  EXPECT_TRUE(verify(mac, again));
  EXPECT_NE(std::vector<uint8_t>(d.end() - 16, d.end()),
            std::vector<uint8_t>(again.end() - 16, again.end()));
}

TEST(DataMac, AnotherJobsKeyDoesNotVerify) {
  DataMac mine, theirs;
  ASSERT_TRUE(mine.set_key(derive_data_key("secret", 4097, 1)));
  ASSERT_TRUE(theirs.set_key(derive_data_key("secret", 4097, 2)));
  const std::vector<uint8_t> d = signed_datagram(mine, 16, 0, 1);
  EXPECT_TRUE(verify(mine, d));
  EXPECT_FALSE(verify(theirs, d));
}

TEST(DataMac, UnkeyedContextSignsAndVerifiesNothing) {
  DataMac mac;
  EXPECT_FALSE(mac.set_key(DataKey{}));  // the all-zero key: a failed derivation
  EXPECT_FALSE(mac.keyed());
  uint8_t header[kDataHeaderSize] = {}, trailer[kMacTrailerSize] = {};
  EXPECT_FALSE(mac.sign(header, nullptr, 0, 0, 1, trailer));
  EXPECT_FALSE(mac.verify(header, nullptr, 0, trailer));
}

TEST(DataMac, ParserCountsTheTrailerInTheLength) {
  DataMac mac;
  ASSERT_TRUE(mac.set_key(derive_data_key("s", 1, 1)));
  std::vector<uint8_t> d = signed_datagram(mac, 4, 1, 1);
  DataHeader h;
  const uint8_t* payload = nullptr;
  ASSERT_EQ(parse_data(d, kMaxPayloadBytes, &h, &payload), DropReason::kOk);
  EXPECT_TRUE(h.mac());
  EXPECT_EQ(h.wire_body_bytes(), 16u + kMacTrailerSize);
  EXPECT_EQ(payload, d.data() + kDataHeaderSize);
  d.resize(d.size() - kMacTrailerSize);  // the flag without the trailer
  EXPECT_EQ(parse_data(d, kMaxPayloadBytes, &h, &payload), DropReason::kLengthMismatch);
  // An acknowledgement with a MAC is header + trailer.
  DataHeader ack;
  ack.type = PacketType::kResult;
  ack.flags = kFlagAck | kFlagMac;
  ack.count = 8;
  std::vector<uint8_t> a(kDataHeaderSize + kMacTrailerSize);
  encode_data_header(ack, a.data());
  EXPECT_EQ(parse_data(a, kMaxPayloadBytes, &h, &payload), DropReason::kOk);
  EXPECT_EQ(h.wire_body_bytes(), kMacTrailerSize);
  EXPECT_EQ(drop_reason_name(DropReason::kBadMac), "bad_mac");
}

TEST(DataMac, JoinAckCarriesTheDataMacFlag) {
  JoinAck a;
  a.job_id = 1;
  a.job_token = 2;
  a.granted_slots = 4;
  a.payload_bytes = 8160;
  a.flags = kJoinFlagDataMac | kJoinFlagDeterministic;
  a.ports = {9000};
  std::vector<uint8_t> b;
  encode_control(a, b);
  ControlMsg m;
  size_t used = 0;
  ASSERT_EQ(parse_control(b, &m, &used), ControlParse::kOk);
  EXPECT_EQ(std::get<JoinAck>(m).flags, a.flags);
}

}  // namespace
}  // namespace conflux::proto

namespace conflux::proto {
namespace {

TEST(AdminAuth, SignedForOnePathWithinTheSkew) {
  const std::string v = admin_auth_value("s", "/admin/drain", 1000);
  EXPECT_TRUE(admin_auth_check("s", "/admin/drain", v, 1000).ok());
  EXPECT_TRUE(admin_auth_check("s", "/admin/drain", v, 1000 + kAdminMaxSkewS).ok());
  EXPECT_FALSE(admin_auth_check("s", "/admin/drain", v, 1001 + kAdminMaxSkewS).ok());
  EXPECT_FALSE(admin_auth_check("s", "/admin/drain", v, 999 - kAdminMaxSkewS).ok());
  // another path
  EXPECT_EQ(admin_auth_check("s", "/admin/undrain", v, 1000).message(), "wrong secret");
  EXPECT_EQ(admin_auth_check("t", "/admin/drain", v, 1000).message(), "wrong secret");
  std::string tampered = v;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  const conflux::Status st = admin_auth_check("s", "/admin/drain", tampered, 1000);
  EXPECT_EQ(st.code(), conflux::Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "wrong secret");
  for (const char* bad : {"", "1000", "x 00", "1000abc"}) {
    EXPECT_FALSE(admin_auth_check("s", "/admin/drain", bad, 1000).ok()) << bad;
  }
}

}  // namespace
}  // namespace conflux::proto
