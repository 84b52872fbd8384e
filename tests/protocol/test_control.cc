// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <vector>

#include "conflux/protocol/byteorder.h"
#include "conflux/protocol/control.h"
#include "conflux/protocol/data.h"

namespace conflux::proto {
namespace {

std::vector<ControlMsg> all_messages() {
  return {
      ServerHello{0x1122334455667788ULL, 0xffffffffffffULL, 8192, 256, 1},
      Join{0xabcdef0123456789ULL, 8, 7, 0x7f000001, 40000, kJoinFlagDeterministic, 64, 8192, 5000,
           0x99},
      Join{0xabcdef0123456789ULL, 8, 2, 0, 40000, 0, 64, 8192, 0, 0, 3, 0, {7471, 7472}},
      JoinAck{Status::kOk, 12, 0xfeedULL, 64, 8192, kJoinFlagDeterministic, {7471, 7472, 7473}},
      JoinAck{Status::kJoinTimeout, 0, 0, 0, 0, 0, {}},
      Leave{},
      Heartbeat{42},
      HeartbeatAck{43},
      Error{Status::kAuthFailed, "bad mac from rank 3"},
      Shutdown{1},
      Join{0xabcdef0123456789ULL, 8, 6, 0, 40001, kJoinFlagDeterministic | kJoinFlagCapacity, 64,
           8192, 5000, 0},
      Capacity{25000, 1000, 500, 4},
      JoinAck{
          Status::kOk, 13, 0xbeefULL, 64, 8192, kJoinAckFlagMulticast, {7471}, 0xEF4D0001, 7480},
      MulticastAck{},
      MulticastMode{true, MulticastReason::kConfirmed, 0},
      MulticastMode{false, MulticastReason::kNoConfirm, 3},
      Join{0xabcdef0123456789ULL, 8, 5, 0, 40002, kJoinFlagMulticast | kJoinFlagDirectResults, 64,
           8192, 5000, 0},
      JoinAck{Status::kOk, 14, 0xcafeULL, 64, 8192, kJoinAckFlagDirectResults, {7471, 7472}},
      ResultSource{0x0A000001, {7471, 7472, 7473}},
      DirectDown{0xEF4E0002, 7480, 9, 0x0123456789abcdefULL},
      DirectDown{0xEF4E0002, 7480, 9, 0x0123456789abcdefULL, kDirectDownSigned},
  };
}

std::vector<uint8_t> frame(const ControlMsg& m) {
  std::vector<uint8_t> out;
  encode_control(m, out);
  return out;
}

ControlParse parse(const std::vector<uint8_t>& b, ControlMsg* m = nullptr, size_t* used = nullptr) {
  ControlMsg tmp;
  size_t u = 0;
  return parse_control(b, m ? m : &tmp, used ? used : &u);
}

TEST(Control, EveryMessageRoundTripsAndReencodesIdentically) {
  for (const auto& m : all_messages()) {
    const auto b = frame(m);
    ControlMsg got;
    size_t used = 0;
    ASSERT_EQ(parse(b, &got, &used), ControlParse::kOk) << to_string(m);
    EXPECT_EQ(used, b.size());
    EXPECT_EQ(got.index(), m.index());
    EXPECT_EQ(frame(got), b) << to_string(m);
  }
}

TEST(Control, FieldsSurvive) {
  ControlMsg got;
  ASSERT_EQ(parse(frame(all_messages()[1]), &got), ControlParse::kOk);
  const auto& j = std::get<Join>(got);
  EXPECT_EQ(j.job_key, 0xabcdef0123456789ULL);
  EXPECT_EQ(j.n_workers, 8u);
  EXPECT_EQ(j.rank, 7u);
  EXPECT_EQ(j.udp_addr, 0x7f000001u);
  EXPECT_EQ(j.udp_port, 40000);
  EXPECT_EQ(j.flags, kJoinFlagDeterministic);
  EXPECT_EQ(j.requested_slots, 64u);
  EXPECT_EQ(j.payload_bytes, 8192u);
  EXPECT_EQ(j.join_timeout_ms, 5000u);
  EXPECT_EQ(j.auth_mac, 0x99u);
  EXPECT_EQ(j.weight, 1u);
  EXPECT_EQ(j.served, 0u);
  EXPECT_TRUE(j.data_ports.empty());
  ASSERT_EQ(parse(frame(all_messages()[3]), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<JoinAck>(got).ports, (std::vector<uint16_t>{7471, 7472, 7473}));
}

TEST(Control, JoinTreeExtensionSurvivesAndIsAbsentByDefault) {
  Join plain{1, 4, 1, 0, 40000, 0, 16, 8192, 0, 0};
  EXPECT_EQ(frame(plain).size(), kControlHeaderSize + 44);
  Join child = plain;
  child.weight = 2;
  child.served = 0;
  child.data_ports = {9001, 9002, 9003};
  EXPECT_EQ(frame(child).size(), kControlHeaderSize + 44 + 6 + 6);
  ControlMsg got;
  ASSERT_EQ(parse(frame(child), &got), ControlParse::kOk);
  const auto& j = std::get<Join>(got);
  EXPECT_EQ(j.weight, 2u);
  EXPECT_EQ(j.served, 0u);
  EXPECT_EQ(j.data_ports, (std::vector<uint16_t>{9001, 9002, 9003}));
  Join leaf_member = plain;
  leaf_member.served = 2;
  ASSERT_EQ(parse(frame(leaf_member), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<Join>(got).served, 2u);
}

TEST(Control, JoinTreeExtensionRanges) {
  auto bad = [](auto mutate) {
    Join j{1, 4, 1, 0, 40000, 0, 16, 8192, 0, 0, 2, 0, {9001}};
    mutate(j);
    return parse(frame(j));
  };
  EXPECT_EQ(bad([](Join&) {}), ControlParse::kOk);
  EXPECT_EQ(bad([](Join& j) { j.weight = 0; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.weight = 5; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.served = 5; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.served = 1; }), ControlParse::kBadField);  // weight > served
  EXPECT_EQ(bad([](Join& j) { j.data_ports = {9001, 0}; }), ControlParse::kBadField);
  // An extension that only repeats the defaults is not the canonical encoding.
  Join d{1, 4, 1, 0, 40000, 0, 16, 8192, 0, 0, 2, 0, {}};
  auto b = frame(d);
  b[kControlHeaderSize + 45] = 1;  // weight 2 -> 1: every field at its default
  EXPECT_EQ(parse(b), ControlParse::kBadField);
  // A truncated extension.
  b = frame(d);
  b.pop_back();
  store_be<uint32_t>(b.data() + 8, static_cast<uint32_t>(b.size() - kControlHeaderSize));
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
}

// Deeper trees (SPEC.md §7): served_up after the ports, absent when empty, every level above
// at least the one below and at most the job, only below a counted level.
TEST(Control, JoinServedUpSurvivesAndIsChecked) {
  Join member{1, 8, 1, 0, 40000, 0, 16, 8192, 0, 0, 1, 2, {}};
  const size_t depth2 = frame(member).size();
  member.served_up = {4, 6};
  EXPECT_EQ(frame(member).size(), depth2 + 2 + 4);
  ControlMsg got;
  ASSERT_EQ(parse(frame(member), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<Join>(got).served_up, (std::vector<uint16_t>{4, 6}));
  EXPECT_EQ(std::get<Join>(got).served, 2u);
  auto with_up = [&](std::vector<uint16_t> up, uint16_t served = 2) {
    Join j = member;
    j.served = served;
    j.served_up = std::move(up);
    return parse(frame(j));
  };
  EXPECT_EQ(with_up({2}), ControlParse::kOk);        // a level that adds no rank is still a level
  EXPECT_EQ(with_up({1}), ControlParse::kBadField);  // fewer ranks than below
  EXPECT_EQ(with_up({6, 4}), ControlParse::kBadField);  // not widening upwards
  EXPECT_EQ(with_up({9}), ControlParse::kBadField);     // more than the job
  EXPECT_EQ(with_up({4}, 0), ControlParse::kBadField);  // levels above "everyone"
  EXPECT_EQ(with_up(std::vector<uint16_t>(kMaxTreeLevelsUp + 1, 8)), ControlParse::kBadField);
  // n_up = 0 written out is not the canonical encoding (absent instead).
  auto b = frame(member);
  member.served_up.clear();
  b = frame(member);
  b.push_back(0);
  b.push_back(0);
  store_be<uint32_t>(b.data() + 8, static_cast<uint32_t>(b.size() - kControlHeaderSize));
  EXPECT_EQ(parse(b), ControlParse::kBadField);
  // Authenticated: another list is another MAC; no list is the depth-2 MAC.
  const uint64_t plain = join_mac("s3cret", 77, member);
  member.served_up = {4};
  const uint64_t up4 = join_mac("s3cret", 77, member);
  member.served_up = {5};
  EXPECT_NE(up4, plain);
  EXPECT_NE(join_mac("s3cret", 77, member), up4);
}

TEST(Control, EveryPrefixNeedsMore) {
  for (const auto& m : all_messages()) {
    const auto b = frame(m);
    for (size_t n = 0; n < b.size(); ++n) {
      size_t used = 7;
      EXPECT_EQ(parse({b.begin(), b.begin() + n}, nullptr, &used), ControlParse::kNeedMore)
          << to_string(m) << " prefix " << n;
      EXPECT_EQ(used, 0u);
    }
  }
}

TEST(Control, StreamOfFramesParsesInOrder) {
  std::vector<uint8_t> stream;
  const auto msgs = all_messages();
  for (const auto& m : msgs) encode_control(m, stream);
  std::span<const uint8_t> rest(stream);
  for (const auto& m : msgs) {
    ControlMsg got;
    size_t used = 0;
    ASSERT_EQ(parse_control(rest, &got, &used), ControlParse::kOk);
    EXPECT_EQ(got.index(), m.index());
    rest = rest.subspan(used);
  }
  EXPECT_TRUE(rest.empty());
}

TEST(Control, HeaderErrors) {
  const auto good = frame(Heartbeat{1});
  auto b = good;
  b[1] ^= 0xff;
  EXPECT_EQ(parse({b.begin(), b.begin() + 2}), ControlParse::kBadMagic);  // early rejection
  EXPECT_EQ(parse(b), ControlParse::kBadMagic);
  b = good;
  b[4] = 9;
  EXPECT_EQ(parse(b), ControlParse::kBadVersion);
  b = good;
  b[5] = 0;
  EXPECT_EQ(parse(b), ControlParse::kBadType);
  for (uint8_t t : {14, 15}) {  // one past the last type (DirectDown, 13), and beyond
    b[5] = t;
    EXPECT_EQ(parse(b), ControlParse::kBadType) << int(t);
  }
  b = good;
  b[7] = 1;
  EXPECT_EQ(parse(b), ControlParse::kReservedNonZero);
  b = good;
  store_be<uint32_t>(b.data() + 8, kMaxControlBody + 1);
  EXPECT_EQ(parse(b), ControlParse::kTooLong);
  b = good;
  store_be<uint32_t>(b.data() + 8, 4);  // heartbeat body must be 8 bytes
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
  b = frame(Leave{});
  b.push_back(0);
  store_be<uint32_t>(b.data() + 8, 1);
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
}

TEST(Control, JoinFieldRanges) {
  auto bad = [](auto mutate) {
    Join j{1, 4, 1, 0, 40000, 0, 16, 8192, 0, 0};
    mutate(j);
    return parse(frame(j));
  };
  EXPECT_EQ(bad([](Join&) {}), ControlParse::kOk);
  EXPECT_EQ(bad([](Join& j) { j.n_workers = 0; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.n_workers = kMaxWorkersPerJob + 1; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.rank = 4; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.udp_port = 0; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.flags = 0x80; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.requested_slots = 0; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.payload_bytes = 0; }), ControlParse::kBadField);
  EXPECT_EQ(bad([](Join& j) { j.payload_bytes = kMaxPayloadBytes + 1; }), ControlParse::kBadField);
}

// A grant update (SPEC §3): the same message again while the job runs, with its reason in the
// byte before the reserved one; the first Capacity of a job keeps reason 0 (its old encoding).
TEST(Control, CapacityUpdateCarriesItsReason) {
  for (auto why :
       {CapacityReason::kJobJoined, CapacityReason::kJobLeft, CapacityReason::kCapChanged}) {
    ControlMsg got;
    ASSERT_EQ(parse(frame(Capacity{25000, 1000, 500, 4, why}), &got), ControlParse::kOk);
    const auto& c = std::get<Capacity>(got);
    EXPECT_EQ(c.share_mbps, 500u);
    EXPECT_EQ(c.reason, why);
    EXPECT_EQ(frame(got)[kControlHeaderSize + 14], static_cast<uint8_t>(why));
  }
  ControlMsg got;
  ASSERT_EQ(parse(frame(Capacity{25000, 1000, 500, 4, CapacityReason::kJobLeft}), &got),
            ControlParse::kOk);
  EXPECT_EQ(to_string(got), "Capacity{line=25000 max=1000 share=500 Mbit/s threads=4 (job left)}");
  EXPECT_EQ(frame(Capacity{25000, 1000, 500, 4})[kControlHeaderSize + 14], 0);
  EXPECT_EQ(capacity_reason_name(CapacityReason::kJobJoined), "job joined");
  EXPECT_EQ(capacity_reason_name(CapacityReason::kCapChanged), "cap changed");
  auto b = frame(Capacity{1000, 0, 0, 2});
  b[kControlHeaderSize + 14] = 4;  // no such reason
  EXPECT_EQ(parse(b), ControlParse::kBadField);
  EXPECT_EQ(b.size(), kControlHeaderSize + 16);
}

TEST(Control, JoinAckOkNeedsUsableGrant) {
  EXPECT_EQ(parse(frame(JoinAck{Status::kOk, 1, 1, 0, 8192, 0, {7471}})), ControlParse::kBadField);
  EXPECT_EQ(parse(frame(JoinAck{Status::kOk, 1, 1, 4, 8192, 0, {}})), ControlParse::kBadField);
  EXPECT_EQ(parse(frame(JoinAck{Status::kOk, 1, 1, 4, 8192, 0, {0}})), ControlParse::kBadField);
  auto b = frame(JoinAck{Status::kOk, 1, 1, 4, 8192, 0, {7471}});
  store_be<uint32_t>(b.data() + kControlHeaderSize, 99);  // unknown status
  EXPECT_EQ(parse(b), ControlParse::kBadField);
}

// Version negotiation (SPEC.md §1): the versions extension closes a Join's body (after the tree
// extension), the version one closes a JoinAck's; both only with their flag, both checked.
TEST(Control, VersionsExtensionsCloseJoinAndJoinAck) {
  Join plain{1, 4, 1, 0, 40000, 0, 16, 8192, 0, 0};
  Join v = plain;
  v.flags = kJoinFlagVersions;
  v.min_version = 1;
  v.max_version = 3;
  EXPECT_EQ(frame(v).size(), kControlHeaderSize + 44 + 4);
  ControlMsg got;
  ASSERT_EQ(parse(frame(v), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<Join>(got).min_version, 1u);
  EXPECT_EQ(std::get<Join>(got).max_version, 3u);
  v.weight = 2;  // with the tree extension before it
  v.data_ports = {9001, 9002};
  v.served_up = {};
  ASSERT_EQ(parse(frame(v), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<Join>(got).data_ports, (std::vector<uint16_t>{9001, 9002}));
  EXPECT_EQ(std::get<Join>(got).max_version, 3u);
  v.min_version = 0;
  EXPECT_EQ(parse(frame(v)), ControlParse::kBadField);
  v.min_version = 4;  // above max
  EXPECT_EQ(parse(frame(v)), ControlParse::kBadField);
  v.min_version = 1;
  auto b = frame(v);
  b.back() = 1;  // its reserved u16
  EXPECT_EQ(parse(b), ControlParse::kReservedNonZero);
  // A Join without the flag has no extension: a plain one parses as version 1 only.
  ASSERT_EQ(parse(frame(plain), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<Join>(got).flags & kJoinFlagVersions, 0);

  JoinAck a{Status::kOk, 1, 1, 4, 8192, kJoinAckFlagVersion, {7471}};
  a.version = 2;
  EXPECT_EQ(frame(a).size(), kControlHeaderSize + 28 + 2 + 4);
  ASSERT_EQ(parse(frame(a), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<JoinAck>(got).version, 2u);
  a.version = 0;
  EXPECT_EQ(parse(frame(a)), ControlParse::kBadField);
}

TEST(Control, CapacityFields) {
  ControlMsg got;
  ASSERT_EQ(parse(frame(Capacity{25000, 1000, 500, 4}), &got), ControlParse::kOk);
  const auto& c = std::get<Capacity>(got);
  EXPECT_EQ(c.line_mbps, 25000u);
  EXPECT_EQ(c.max_mbps, 1000u);
  EXPECT_EQ(c.share_mbps, 500u);
  EXPECT_EQ(c.threads, 4u);
  EXPECT_EQ(to_string(got), "Capacity{line=25000 max=1000 share=500 Mbit/s threads=4}");
  EXPECT_EQ(msg_type(got), MsgType::kCapacity);
  EXPECT_EQ(frame(got)[5], 11);  // its type on the wire
  // Unknown rates are 0; no dataplane thread is not a capacity.
  EXPECT_EQ(parse(frame(Capacity{0, 0, 0, 1})), ControlParse::kOk);
  EXPECT_EQ(parse(frame(Capacity{1000, 0, 0, 0})), ControlParse::kBadField);
  auto b = frame(Capacity{1000, 0, 0, 2});
  b.back() = 1;  // the reserved u8
  EXPECT_EQ(parse(b), ControlParse::kReservedNonZero);
  b = frame(Capacity{1000, 0, 0, 2});
  b.push_back(0);
  store_be<uint32_t>(b.data() + 8, 17);
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
}

TEST(Control, DirectResultsFlags) {
  // A Join may ask for results straight down; a JoinAck may offer DirectDown (SPEC.md §7).
  ControlMsg got;
  ASSERT_EQ(parse(frame(Join{1, 4, 1, 0, 40000, kJoinFlagDirectResults, 16, 8192, 0, 0}), &got),
            ControlParse::kOk);
  EXPECT_EQ(std::get<Join>(got).flags, kJoinFlagDirectResults);
  ASSERT_EQ(
      parse(frame(JoinAck{Status::kOk, 1, 1, 4, 8192, kJoinAckFlagDirectResults, {7471}}), &got),
      ControlParse::kOk);
  EXPECT_EQ(std::get<JoinAck>(got).flags, kJoinAckFlagDirectResults);
  EXPECT_EQ(parse(frame(JoinAck{Status::kOk, 1, 1, 4, 8192, 1u << 6, {7471}})),
            ControlParse::kBadField);  // the first unassigned bit (5 is the version)
}

TEST(Control, CapacityFlagIsForJoinOnly) {
  // JoinAck flags stay deterministic-only: the capacity bit is a request of the worker.
  EXPECT_EQ(parse(frame(JoinAck{Status::kOk, 1, 1, 4, 8192, kJoinFlagCapacity, {7471}})),
            ControlParse::kBadField);
  EXPECT_EQ(parse(frame(Join{1, 4, 1, 0, 40000, kJoinFlagCapacity, 16, 8192, 0, 0})),
            ControlParse::kOk);
}

TEST(Control, MulticastGrantIsAppendedOnlyWithItsFlag) {
  const JoinAck plain{Status::kOk, 1, 1, 4, 8192, 0, {7471}, 0xEF4D0001, 7480};
  const JoinAck mc{Status::kOk, 1, 1, 4, 8192, kJoinAckFlagMulticast, {7471}, 0xEF4D0001, 7480};
  const auto bp = frame(plain), bm = frame(mc);
  EXPECT_EQ(bm.size(), bp.size() + 8);  // group u32, port u16, reserved u16 after the ports
  ControlMsg got;
  ASSERT_EQ(parse(bp, &got), ControlParse::kOk);
  EXPECT_EQ(std::get<JoinAck>(got).group, 0u);  // not on the wire without the flag
  ASSERT_EQ(parse(bm, &got), ControlParse::kOk);
  EXPECT_EQ(std::get<JoinAck>(got).group, 0xEF4D0001u);
  EXPECT_EQ(std::get<JoinAck>(got).group_port, 7480);
  auto b = bm;
  b[b.size() - 1] = 1;  // reserved
  EXPECT_EQ(parse(b), ControlParse::kReservedNonZero);
  b = bm;
  b.resize(b.size() - 8);  // flag without the group
  store_be<uint32_t>(b.data() + 8, static_cast<uint32_t>(b.size() - kControlHeaderSize));
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
  JoinAck unicast_group = mc;
  unicast_group.group = 0x0A000001;  // 10.0.0.1 is no multicast group
  EXPECT_EQ(parse(frame(unicast_group)), ControlParse::kBadField);
  JoinAck no_port = mc;
  no_port.group_port = 0;
  EXPECT_EQ(parse(frame(no_port)), ControlParse::kBadField);
}

TEST(Control, JoinMulticastFlags) {
  Join j{1, 2, 0, 0, 40000, kJoinFlagMulticast | kJoinFlagMulticastNoProbe, 4, 8192, 0, 0};
  ControlMsg got;
  ASSERT_EQ(parse(frame(j), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<Join>(got).flags, kJoinFlagMulticast | kJoinFlagMulticastNoProbe);
  j.flags = kJoinFlagMulticastNoProbe;  // no probe needs multicast
  EXPECT_EQ(parse(frame(j)), ControlParse::kBadField);
  j.flags = 1u << 6;  // the first unassigned bit (3 capacity, 4 direct results, 5 versions)
  EXPECT_EQ(parse(frame(j)), ControlParse::kBadField);
}

TEST(Control, MulticastModeFieldRanges) {
  const auto with = [](uint8_t mode, uint8_t reason, uint32_t rank) {
    auto b = frame(MulticastMode{});
    b[kControlHeaderSize] = mode;
    b[kControlHeaderSize + 1] = reason;
    store_be<uint32_t>(b.data() + kControlHeaderSize + 4, rank);
    return parse(b);
  };
  EXPECT_EQ(with(1, 0, 0), ControlParse::kOk);
  EXPECT_EQ(with(1, 1, 0), ControlParse::kOk);
  EXPECT_EQ(with(0, 2, 5), ControlParse::kOk);
  EXPECT_EQ(with(0, 3, 0), ControlParse::kOk);
  EXPECT_EQ(with(1, 2, 0), ControlParse::kBadField);  // a unicast reason with mode multicast
  EXPECT_EQ(with(0, 0, 0), ControlParse::kBadField);
  EXPECT_EQ(with(2, 0, 0), ControlParse::kBadField);
  EXPECT_EQ(with(0, 4, 0), ControlParse::kBadField);
  EXPECT_EQ(with(0, 3, 1), ControlParse::kBadField);  // rank only with kNoConfirm
  EXPECT_EQ(with(0, 2, kMaxWorkersPerJob), ControlParse::kBadField);
  auto b = frame(MulticastAck{});
  b.push_back(0);
  store_be<uint32_t>(b.data() + 8, 1);
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
}

TEST(Control, ResultSourceFieldRanges) {
  ControlMsg got;
  ASSERT_EQ(parse(frame(ResultSource{0x0A000001, {7471, 7472}}), &got), ControlParse::kOk);
  const auto& rs = std::get<ResultSource>(got);
  EXPECT_EQ(rs.addr, 0x0A000001u);
  EXPECT_EQ(rs.ports, (std::vector<uint16_t>{7471, 7472}));
  EXPECT_EQ(parse(frame(ResultSource{0, {7471}})), ControlParse::kBadField);           // no address
  EXPECT_EQ(parse(frame(ResultSource{0xEF000001, {7471}})), ControlParse::kBadField);  // a group
  EXPECT_EQ(parse(frame(ResultSource{0x0A000001, {}})), ControlParse::kBadField);
  EXPECT_EQ(parse(frame(ResultSource{0x0A000001, {7471, 0}})), ControlParse::kBadField);
  auto b = frame(ResultSource{0x0A000001, {7471}});
  b.push_back(0);  // one byte past the ports the count names
  store_be<uint32_t>(b.data() + 8, load_be<uint32_t>(b.data() + 8) + 1);
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
}

TEST(Control, DirectDownFieldRanges) {
  ControlMsg got;
  ASSERT_EQ(parse(frame(DirectDown{0xEF4E0002, 7480, 9, 77}), &got), ControlParse::kOk);
  const auto& d = std::get<DirectDown>(got);
  EXPECT_EQ(d.group, 0xEF4E0002u);
  EXPECT_EQ(d.group_port, 7480);
  EXPECT_EQ(d.job_id, 9u);
  EXPECT_EQ(d.job_token, 77u);
  EXPECT_EQ(parse(frame(DirectDown{0x0A000001, 7480, 9, 77})), ControlParse::kBadField);  // unicast
  EXPECT_EQ(parse(frame(DirectDown{0xEF4E0002, 0, 9, 77})), ControlParse::kBadField);
  EXPECT_EQ(d.flags, 0);
  ASSERT_EQ(parse(frame(DirectDown{0xEF4E0002, 7480, 9, 77, kDirectDownSigned}), &got),
            ControlParse::kOk);
  EXPECT_EQ(std::get<DirectDown>(got).flags, kDirectDownSigned);
  EXPECT_EQ(parse(frame(DirectDown{0xEF4E0002, 7480, 9, 77, 2})), ControlParse::kBadField);
  auto b = frame(DirectDown{0xEF4E0002, 7480, 9, 77});
  b.pop_back();
  store_be<uint32_t>(b.data() + 8, load_be<uint32_t>(b.data() + 8) - 1);
  EXPECT_EQ(parse(b), ControlParse::kBadLength);
}

TEST(Control, ErrorTextIsBounded) {
  Error e{Status::kInternal, std::string(5000, 'x')};
  ControlMsg got;
  ASSERT_EQ(parse(frame(e), &got), ControlParse::kOk);
  EXPECT_EQ(std::get<Error>(got).text.size(), kMaxErrorText);
}

TEST(SipHash, ReferenceVectors) {
  // Reference vectors of SipHash-2-4 with key 00 01 .. 0f and message 00 01 .. (len-1).
  const uint64_t k0 = 0x0706050403020100ULL, k1 = 0x0f0e0d0c0b0a0908ULL;
  std::vector<uint8_t> msg;
  EXPECT_EQ(siphash24(k0, k1, msg), 0x726fdb47dd0e0e31ULL);
  for (uint8_t i = 0; i < 15; ++i) msg.push_back(i);
  EXPECT_EQ(siphash24(k0, k1, msg), 0xa129ca6149be45e5ULL);
}

TEST(SipHash, JoinMacBindsEveryField) {
  const Join j{5, 4, 2, 0, 40000, 0, 16, 8192, 0, 0};
  const uint64_t mac = join_mac("s3cret", 77, j);
  EXPECT_NE(mac, 0u);
  EXPECT_EQ(join_mac("s3cret", 77, j), mac);
  EXPECT_EQ(join_mac("", 77, j), 0u);
  EXPECT_NE(join_mac("s3cres", 77, j), mac);
  EXPECT_NE(join_mac("s3cret", 78, j), mac);
  Join k = j;
  k.rank = 3;
  EXPECT_NE(join_mac("s3cret", 77, k), mac);
  k = j;
  k.job_key = 6;
  EXPECT_NE(join_mac("s3cret", 77, k), mac);
  k = j;
  k.flags = kJoinFlagDeterministic;
  EXPECT_NE(join_mac("s3cret", 77, k), mac);
  k = j;
  k.weight = 2;
  EXPECT_NE(join_mac("s3cret", 77, k), mac);
  const uint64_t child = join_mac("s3cret", 77, k);
  k.served = 4;
  EXPECT_NE(join_mac("s3cret", 77, k), child);
  k.served = 0;
  k.data_ports = {9001};
  EXPECT_NE(join_mac("s3cret", 77, k), child);
}

}  // namespace
}  // namespace conflux::proto
