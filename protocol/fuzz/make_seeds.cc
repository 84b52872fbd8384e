// SPDX-License-Identifier: Apache-2.0
// Writes seed corpora for the fuzz targets: make_seeds <data_dir> <control_dir>.
#include <cstdio>
#include <string>
#include <vector>

#include "conflux/protocol/control.h"
#include "conflux/protocol/data.h"

namespace {

bool write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace conflux;
  using namespace conflux::proto;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <data_corpus_dir> <control_corpus_dir>\n", argv[0]);
    return 2;
  }
  const std::string data_dir = argv[1], ctl_dir = argv[2];
  int n = 0;
  bool ok = true;
  for (int t = 0; t < kNumDTypes; ++t) {
    DataHeader h;
    h.type = t % 2 ? PacketType::kResult : PacketType::kContrib;
    h.flags = t % 3 == 0 ? kFlagRetransmit : 0;
    h.job_id = 7;
    h.contributor = static_cast<uint16_t>(t);
    h.job_token = 0x1122334455667788ULL;
    h.slot = static_cast<uint32_t>(t * 5);
    h.generation = static_cast<uint32_t>(t);
    h.offset = uint64_t(t) * 4096;
    h.count = static_cast<uint32_t>(1 + t * 3);
    h.dtype = static_cast<DType>(t);
    h.op = static_cast<Op>(t % kNumOps);
    std::vector<uint8_t> d(kDataHeaderSize + h.payload_bytes(), 0x5a);
    encode_data_header(h, d.data());
    ok &= write_file(data_dir + "/seed_" + std::to_string(n++), d);
  }
  {  // An owned contribution and the acknowledgement a non-owner gets for it.
    DataHeader h;
    h.flags = kFlagOwned;
    h.owner = 3;
    h.job_id = 7;
    h.contributor = 1;
    h.job_token = 0x1122334455667788ULL;
    h.count = 16;
    std::vector<uint8_t> d(kDataHeaderSize + h.payload_bytes(), 0x5a);
    encode_data_header(h, d.data());
    ok &= write_file(data_dir + "/seed_" + std::to_string(n++), d);
    h.type = PacketType::kResult;
    h.flags = kFlagAck;
    h.owner = 0;
    h.contributor = 0;
    std::vector<uint8_t> ack(kDataHeaderSize);
    encode_data_header(h, ack.data());
    ok &= write_file(data_dir + "/seed_" + std::to_string(n++), ack);
    // The same acknowledgement and a contribution with the data MAC trailer (the parser
    // checks its length; the tag is DataMac's business).
    h.flags = kFlagAck | kFlagMac;
    std::vector<uint8_t> signed_ack(kDataHeaderSize + kMacTrailerSize, 0xa5);
    encode_data_header(h, signed_ack.data());
    ok &= write_file(data_dir + "/seed_" + std::to_string(n++), signed_ack);
    h.type = PacketType::kContrib;
    h.flags = kFlagMac | kFlagRetransmit;
    h.contributor = 2;
    std::vector<uint8_t> signed_contrib(kDataHeaderSize + h.payload_bytes() + kMacTrailerSize,
                                        0x3c);
    encode_data_header(h, signed_contrib.data());
    ok &= write_file(data_dir + "/seed_" + std::to_string(n++), signed_contrib);
  }
  const std::vector<ControlMsg> msgs = {
      ServerHello{42, (1ULL << 48) - 1, 8192, 512, 1},
      Join{0xabcdef, 4, 1, 0x7f000001, 40000, kJoinFlagDeterministic, 64, 8192, 10000, 99},
      JoinAck{Status::kOk, 3, 0x55, 64, 8192, 0, {9000, 9001}},
      JoinAck{Status::kOk, 4, 0x66, 32, 8160, kJoinFlagDataMac | kJoinFlagDeterministic, {9000}},
      JoinAck{Status::kNoCapacity, 0, 0, 0, 0, 0, {}},
      Leave{},
      Heartbeat{123456789},
      HeartbeatAck{123456789},
      Error{Status::kAuthFailed, "bad mac"},
      Shutdown{0},
      Join{0xabcdef, 4, 2, 0, 40001, kJoinFlagCapacity, 64, 8192, 10000, 0},
      Capacity{25000, 1000, 1000, 4},
      Capacity{25000, 1000, 500, 4, CapacityReason::kJobJoined},  // a grant update
      Capacity{25000, 250, 250, 4, CapacityReason::kCapChanged},  // conflux throttle
  };
  std::vector<uint8_t> stream;
  for (const auto& m : msgs) {
    std::vector<uint8_t> one;
    encode_control(m, one);
    ok &= write_file(ctl_dir + "/seed_" + std::to_string(n++), one);
    stream.insert(stream.end(), one.begin(), one.end());
  }
  ok &= write_file(ctl_dir + "/seed_stream", stream);
  // Multicast (SPEC §8), after the older seeds so that their names stay.
  for (const ControlMsg& m : std::vector<ControlMsg>{
           Join{0xabcdef, 4, 2, 0, 40000, kJoinFlagMulticast, 64, 8192, 10000, 0},
           JoinAck{Status::kOk, 3, 0x55, 64, 8192, kJoinAckFlagMulticast, {9000}, 0xEF4D0001, 9000},
           MulticastAck{}, MulticastMode{false, MulticastReason::kNoConfirm, 2}}) {
    std::vector<uint8_t> one;
    encode_control(m, one);
    ok &= write_file(ctl_dir + "/seed_" + std::to_string(n++), one);
  }
  {
    std::vector<uint8_t> probe(kDataHeaderSize);
    encode_data_header(probe_header(7, 0x1122334455667788ULL, 3), probe.data());
    ok &= write_file(data_dir + "/seed_" + std::to_string(n++), probe);
  }
  // Reduction trees (SPEC §7): a child aggregator's Join (weight, ports) and a member of a
  // depth-3 tree's leaf (served, served_up).
  for (const ControlMsg& m : std::vector<ControlMsg>{
           Join{0xabcdef, 8, 2, 0, 40000, 0, 64, 8192, 10000, 0, 2, 4, {9001, 9002}},
           Join{0xabcdef, 8, 3, 0, 40000, 0, 64, 8192, 10000, 0, 1, 2, {}, {4, 6}},
           // Results straight down (SPEC §7): the leaf names the parent to its workers and
           // asks the parent to send to its members' group.
           ResultSource{0x0A000001, {9001, 9002}}, DirectDown{0xEF4D0001, 9000, 3, 0x55}}) {
    std::vector<uint8_t> one;
    encode_control(m, one);
    ok &= write_file(ctl_dir + "/seed_" + std::to_string(n++), one);
  }
  if (!ok) {
    std::fprintf(stderr, "make_seeds: could not write the corpus\n");
    return 1;
  }
  return 0;
}
