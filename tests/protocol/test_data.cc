// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "conflux/protocol/byteorder.h"
#include "conflux/protocol/data.h"

namespace conflux::proto {
namespace {

DataHeader sample() {
  DataHeader h;
  h.type = PacketType::kContrib;
  h.flags = kFlagRetransmit;
  h.job_id = 0x01020304;
  h.contributor = 0x0506;
  h.job_token = 0x0708090a0b0c0d0eULL;
  h.slot = 0x10111213;
  h.generation = 0x14151617;
  h.offset = 0x18191a1b1c1d1e1fULL;
  h.count = 3;
  h.dtype = DType::kFloat32;
  h.op = Op::kMax;
  return h;
}

std::vector<uint8_t> datagram(const DataHeader& h) {
  std::vector<uint8_t> d(kDataHeaderSize + h.payload_bytes(), 0xee);
  encode_data_header(h, d.data());
  return d;
}

DropReason parse(const std::vector<uint8_t>& d, DataHeader* h = nullptr) {
  DataHeader tmp;
  const uint8_t* payload = nullptr;
  return parse_data(d, kDefaultPayloadBytes, h ? h : &tmp, &payload);
}

TEST(DataHeader, GoldenBytesAreBigEndian) {
  const auto d = datagram(sample());
  const std::vector<uint8_t> golden = {
      0x43, 0x46, 0x4c, 0x58, 0x01, 0x01, 0x00, 0x01,  // magic, version, type, flags
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x00, 0x00,  // job, contributor, reserved
      0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,  // token
      0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,  // slot, generation
      0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,  // offset
      0x00, 0x00, 0x00, 0x03, 0x07, 0x02, 0x00, 0x00,  // count, dtype, op, reserved
  };
  ASSERT_EQ(d.size(), kDataHeaderSize + 12);
  EXPECT_EQ(std::vector<uint8_t>(d.begin(), d.begin() + kDataHeaderSize), golden);
}

TEST(DataHeader, RoundTripEveryDtypeAndOp) {
  for (int t = 0; t < kNumDTypes; ++t) {
    for (int o = 0; o < kNumOps; ++o) {
      DataHeader h = sample();
      h.dtype = static_cast<DType>(t);
      h.op = static_cast<Op>(o);
      h.type = (t + o) % 2 ? PacketType::kResult : PacketType::kContrib;
      h.count = static_cast<uint32_t>(kDefaultPayloadBytes / dtype_size(h.dtype));
      const auto d = datagram(h);
      DataHeader got;
      const uint8_t* payload = nullptr;
      ASSERT_EQ(parse_data(d, kDefaultPayloadBytes, &got, &payload), DropReason::kOk);
      EXPECT_EQ(payload, d.data() + kDataHeaderSize);
      EXPECT_EQ(got.type, h.type);
      EXPECT_EQ(got.flags, h.flags);
      EXPECT_EQ(got.job_id, h.job_id);
      EXPECT_EQ(got.contributor, h.contributor);
      EXPECT_EQ(got.owner, 0);
      EXPECT_EQ(got.job_token, h.job_token);
      EXPECT_EQ(got.slot, h.slot);
      EXPECT_EQ(got.generation, h.generation);
      EXPECT_EQ(got.offset, h.offset);
      EXPECT_EQ(got.count, h.count);
      EXPECT_EQ(got.dtype, h.dtype);
      EXPECT_EQ(got.op, h.op);
    }
  }
}

TEST(DataHeader, EveryStatelessReasonIsDetected) {
  const auto good = datagram(sample());
  ASSERT_EQ(parse(good), DropReason::kOk);

  EXPECT_EQ(parse({}), DropReason::kTruncated);
  EXPECT_EQ(parse(std::vector<uint8_t>(good.begin(), good.begin() + 47)), DropReason::kTruncated);

  auto d = good;
  d[0] ^= 1;
  EXPECT_EQ(parse(d), DropReason::kBadMagic);
  d = good;
  d[4] = 2;
  EXPECT_EQ(parse(d), DropReason::kBadVersion);
  for (uint8_t bad_type : {0, 4, 255}) {
    d = good;
    d[5] = bad_type;
    EXPECT_EQ(parse(d), DropReason::kBadType) << int(bad_type);
  }
  d = good;
  d[6] = 0x80;
  EXPECT_EQ(parse(d), DropReason::kBadFlags);
  d = good;
  d[7] = 0x10;  // the first bit after RETRANSMIT, OWNED, ACK and MAC
  EXPECT_EQ(parse(d), DropReason::kBadFlags);
  d = good;
  d[7] = 0x08;  // MAC without its trailer
  EXPECT_EQ(parse(d), DropReason::kLengthMismatch);
  d = good;
  d[14] = 1;  // an owner without the OWNED flag
  EXPECT_EQ(parse(d), DropReason::kReservedNonZero);
  d = good;
  d[47] = 1;
  EXPECT_EQ(parse(d), DropReason::kReservedNonZero);
  d = good;
  d[44] = 12;
  EXPECT_EQ(parse(d), DropReason::kBadDtype);
  d = good;
  d[45] = 4;
  EXPECT_EQ(parse(d), DropReason::kBadOp);
  d = good;
  store_be<uint32_t>(d.data() + 40, 0);
  EXPECT_EQ(parse(d), DropReason::kZeroCount);
  d = good;
  store_be<uint32_t>(d.data() + 40, kDefaultPayloadBytes / 4 + 1);
  EXPECT_EQ(parse(d), DropReason::kOversized);
  d = good;
  store_be<uint32_t>(d.data() + 40, 0xffffffffu);  // count * size would overflow 32 bits
  EXPECT_EQ(parse(d), DropReason::kOversized);
  d = good;
  d.push_back(0);
  EXPECT_EQ(parse(d), DropReason::kLengthMismatch);
  d = good;
  d.pop_back();
  EXPECT_EQ(parse(d), DropReason::kLengthMismatch);
}

TEST(DataHeader, OwnedContributionCarriesItsOwner) {
  DataHeader h = sample();
  h.flags = kFlagOwned | kFlagRetransmit;
  h.owner = 0x0a0b;
  const auto d = datagram(h);
  EXPECT_EQ(d[14], 0x0a);  // the owner sits in the field that is reserved otherwise
  EXPECT_EQ(d[15], 0x0b);
  DataHeader got;
  ASSERT_EQ(parse(d, &got), DropReason::kOk);
  EXPECT_TRUE(got.owned());
  EXPECT_FALSE(got.ack());
  EXPECT_EQ(got.owner, 0x0a0b);
  EXPECT_NE(got.to_string().find("owner=2571"), std::string::npos);

  h.owner = 0;  // rank 0 may own a result too: the flag, not the value, says so
  ASSERT_EQ(parse(datagram(h), &got), DropReason::kOk);
  EXPECT_TRUE(got.owned());
  EXPECT_EQ(got.owner, 0);

  h.flags = kFlagAck;  // an acknowledgement never goes up
  EXPECT_EQ(parse(datagram(h)), DropReason::kBadFlags);
}

TEST(DataHeader, AcknowledgementIsAHeaderWithoutPayload) {
  DataHeader h = sample();
  h.type = PacketType::kResult;
  h.flags = kFlagAck;
  h.count = 1000;  // echoed: the acknowledged slot's elements
  std::vector<uint8_t> d(kDataHeaderSize);
  encode_data_header(h, d.data());
  DataHeader got;
  ASSERT_EQ(parse(d, &got), DropReason::kOk);
  EXPECT_TRUE(got.ack());
  EXPECT_EQ(got.count, 1000u);
  EXPECT_EQ(got.payload_bytes(), 4000u);
  EXPECT_EQ(got.wire_payload_bytes(), 0u);

  h.flags = kFlagAck | kFlagRetransmit;  // a re-served acknowledgement
  encode_data_header(h, d.data());
  EXPECT_EQ(parse(d), DropReason::kOk);

  auto longer = d;  // an acknowledgement with a payload is malformed
  longer.resize(kDataHeaderSize + 4000);
  EXPECT_EQ(parse(longer), DropReason::kLengthMismatch);
  h.flags = 0;  // a full result without its payload is malformed too
  encode_data_header(h, d.data());
  EXPECT_EQ(parse(d), DropReason::kLengthMismatch);
  h.flags = kFlagAck;
  h.count = kDefaultPayloadBytes / 4 + 1;  // the echoed count is still bounded
  encode_data_header(h, d.data());
  EXPECT_EQ(parse(d), DropReason::kOversized);

  h = sample();
  h.type = PacketType::kResult;
  h.flags = kFlagOwned;  // results name no owner
  h.owner = 1;
  EXPECT_EQ(parse(datagram(h)), DropReason::kBadFlags);
}

TEST(DataHeader, ProbeCarriesOnlyJobTokenAndNumber) {
  std::vector<uint8_t> d(kDataHeaderSize);
  encode_data_header(probe_header(7, 0x1122334455667788ULL, 42), d.data());
  DataHeader got;
  ASSERT_EQ(parse(d, &got), DropReason::kOk);
  EXPECT_EQ(got.type, PacketType::kProbe);
  EXPECT_EQ(got.job_id, 7u);
  EXPECT_EQ(got.job_token, 0x1122334455667788ULL);
  EXPECT_EQ(got.offset, 42u);
  EXPECT_NE(got.to_string().find("PROBE"), std::string::npos);

  auto longer = d;
  longer.push_back(0);
  EXPECT_EQ(parse(longer), DropReason::kLengthMismatch);
  for (size_t at : {12, 14, 24, 28, 40, 44, 45, 46}) {  // contributor .. reserved: all zero
    auto b = d;
    b[at] = 1;
    EXPECT_EQ(parse(b), DropReason::kReservedNonZero) << at;
  }
  auto flagged = d;
  flagged[7] = 1;
  EXPECT_EQ(parse(flagged), DropReason::kBadFlags);
}

TEST(DataHeader, PayloadLimitIsTheCallersLimit) {
  DataHeader h = sample();
  h.count = 2048;  // 8 KiB of float32
  const auto d = datagram(h);
  DataHeader got;
  const uint8_t* payload = nullptr;
  EXPECT_EQ(parse_data(d, 8192, &got, &payload), DropReason::kOk);
  EXPECT_EQ(parse_data(d, 8188, &got, &payload), DropReason::kOversized);
}

TEST(DataHeader, ReasonNamesAreDistinct) {
  std::set<std::string_view> names;
  for (int r = 0; r < kNumDropReasons; ++r) {
    const auto name = drop_reason_name(static_cast<DropReason>(r));
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
}

TEST(DataHeader, ToStringNamesTheFields) {
  const std::string s = sample().to_string();
  EXPECT_NE(s.find("CONTRIB"), std::string::npos);
  EXPECT_NE(s.find("slot=269554195"), std::string::npos);
  EXPECT_NE(s.find("float"), std::string::npos);
}

}  // namespace
}  // namespace conflux::proto
