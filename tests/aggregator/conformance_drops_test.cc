// SPDX-License-Identifier: Apache-2.0
// Conformance: every datagram that is not used is dropped and counted under its reason,
// including >= 10,000 hostile datagrams sent while a correct run completes exactly.
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "conflux/protocol/byteorder.h"
#include "conflux/protocol/data_mac.h"
#include "conformance.h"
#include "tests/common/wait_until.h"

namespace conflux::agg::testing {
namespace {

using proto::DropReason;
class DataplaneDrops : public DaemonTest {
 protected:
  // Runs a data MAC job whose workers authenticate with `worker_secret` on a daemon started
  // with `cfg` (see DataMacBothWays); `foreign_secret`, when set, keys one more contribution
  // that must be refused as bad_mac (another tenant's key).
  void data_mac_both_ways(const Config& cfg, const std::string& worker_secret,
                          const std::string& foreign_secret = "");
};

constexpr int kReasons = proto::kNumDropReasons;

proto::DataHeader contrib_header(const Worker& w, uint32_t slot, uint32_t gen, uint32_t count,
                                 DType dt = DType::kInt32) {
  proto::DataHeader h;
  h.job_id = w.ack.job_id;
  h.job_token = w.ack.job_token;
  h.contributor = w.contributor;
  h.slot = slot;
  h.generation = gen;
  h.count = count;
  h.dtype = dt;
  return h;
}

std::vector<uint8_t> payload_for(const proto::DataHeader& h) {
  return std::vector<uint8_t>(h.payload_bytes(), 1);
}

TEST_P(DataplaneDrops, StateReasonsAreCountedExactly) {
  start();
  JoinSpec spec;
  spec.job_key = 21;
  spec.requested_slots = 4;
  spec.payload_bytes = 64;
  auto w = join_job(spec, 2);
  UdpClient evil;
  // A datagram for a valid contributor goes out of that worker's own socket (source binding);
  // anything else from a foreign socket.
  auto send = [&](proto::DataHeader h, uint16_t port) {
    UdpClient& from = h.contributor < w.size() ? w[h.contributor]->udp : evil;
    from.send_to(port, make_datagram(h, payload_for(h)));
  };
  const uint16_t p0 = w[0]->port_for(0), p1 = w[0]->port_for(1);
  proto::DataHeader h = contrib_header(*w[0], 0, 0, 4);
  h.job_id ^= 0x800;  // no such job
  send(h, p0);
  h = contrib_header(*w[0], 0, 0, 4);
  h.job_token ^= 1;
  send(h, p0);
  send(contrib_header(*w[0], 4, 0, 4), p0);  // slot_out_of_range (4 slots)
  // wrong_queue: slot 1 belongs to port 1. With one queue (dpdk on af_packet) every slot
  // belongs to the one port, so there is no wrong queue to send to.
  const uint64_t wrong_queue = multi_queue() ? 1 : 0;
  if (multi_queue()) send(contrib_header(*w[0], 1, 0, 4), p0);
  h = contrib_header(*w[0], 0, 0, 4);
  h.contributor = 2;
  send(h, p0);                                // bad_contributor
  send(contrib_header(*w[0], 0, 0, 32), p0);  // oversized: 128 bytes > the job's 64
  h = contrib_header(*w[0], 0, 0, 4);
  h.type = proto::PacketType::kResult;
  send(h, p0);                               // wrong_direction
  send(contrib_header(*w[0], 0, 2, 4), p0);  // slot_mismatch: fresh slot, generation 2
  // Wrong dtype mid-slot, then a duplicate, then a stale generation on slot 1.
  send(contrib_header(*w[0], 1, 1, 4), p1);
  send(contrib_header(*w[1], 1, 1, 4, DType::kFloat32), p1);  // slot_mismatch
  send(contrib_header(*w[0], 1, 1, 4), p1);                   // duplicate
  send(contrib_header(*w[1], 1, 1, 4), p1);                   // completes generation 1
  for (auto& x : w) ASSERT_TRUE(x->udp.recv(2000).has_value());
  send(contrib_header(*w[0], 1, 3, 4), p1);  // generation 3 reuses bank 1
  send(contrib_header(*w[1], 1, 1, 4), p1);  // stale_generation
  h = contrib_header(*w[1], 1, 3, 4);
  evil.send_to(p1, make_datagram(h, payload_for(h)));  // wrong_source: rank 1 from elsewhere

  const std::map<std::string, uint64_t> expect = {
      {"unknown_job", 1},           {"bad_token", 1},       {"slot_out_of_range", 1},
      {"wrong_queue", wrong_queue}, {"bad_contributor", 1}, {"oversized", 1},
      {"wrong_direction", 1},       {"slot_mismatch", 2},   {"duplicate", 1},
      {"stale_generation", 1},      {"wrong_source", 1}};
  const uint64_t total = 11 + wrong_queue;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::string m;
  do {
    m = metrics();
  } while (metric_sum(m, "conflux_dataplane_drops_total") < total &&
           std::chrono::steady_clock::now() < deadline);
  for (int r = 1; r < kReasons; ++r) {
    const std::string name(proto::drop_reason_name(static_cast<DropReason>(r)));
    const auto it = expect.find(name);
    EXPECT_EQ(metric_sum(m, "conflux_dataplane_drops_total", {{"reason", name}}),
              it == expect.end() ? 0u : it->second)
        << name;
  }
}

// The forger attack: a forger who sniffed the job's id and token sends CONTRIBs for every
// rank, for the slots and generations the job is using, with garbage payloads, from its own
// port while AllReduces run back to back. Source binding (SPEC.md §4) drops every one of them
// as wrong_source; every AllReduce is exact.
TEST_P(DataplaneDrops, ForgerWithTheTokenCannotPoisonARun) {
  start();
  JoinSpec spec;
  spec.job_key = 41;
  spec.requested_slots = 8;
  spec.payload_bytes = 256;
  auto workers = join_job(spec, 2);
  std::mt19937_64 rng(5);
  constexpr uint64_t kCount = 20000;  // 313 packets per rank per AllReduce: ~40 generations
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < 2; ++r) in.push_back(exact_values(DType::kFloat32, kCount, rng));
  const auto expect_out = reference(DType::kFloat32, Op::kSum, in, kCount);
  std::atomic<uint64_t> seq{0};
  uint64_t retransmits = 0, runs = 0, exact_runs = 0;
  bool run_ok = true;
  std::atomic<bool> forging_done{false};
  std::thread runner([&] {
    auto w = ptrs(workers);
    uint64_t s = 0;
    while (run_ok && (runs == 0 || !forging_done.load())) {
      std::vector<std::vector<uint8_t>> out;
      run_ok = run_allreduce(w, DType::kFloat32, Op::kSum, kCount, in, &s, &out, &retransmits);
      seq.store(s);
      ++runs;
      exact_runs += run_ok && out[0] == expect_out && out[1] == expect_out;
    }
  });
  UdpClient forger;
  std::vector<uint8_t> poison(256);
  const float big = 1e30f;
  for (size_t i = 0; i < poison.size(); i += 4) std::memcpy(&poison[i], &big, 4);
  // Waits (2 s at most) until `n` forgeries were counted: pacing, so that the socket buffers
  // never overflow and the count can be exact.
  auto wait_counted = [&](uint64_t n) {
    test::wait_until([&] { return drops("wrong_source") >= n; }, std::chrono::seconds(2));
    return drops("wrong_source");
  };
  constexpr uint64_t kForged = 4000;
  for (uint64_t i = 0; i < kForged; ++i) {
    // Near the packets in flight: the current sequence number plus a window's worth ahead.
    const uint64_t n = seq.load() + i % 16;
    proto::DataHeader h = contrib_header(*workers[i % 2], static_cast<uint32_t>(n % 8),
                                         static_cast<uint32_t>(n / 8), 64, DType::kFloat32);
    if (i % 3 == 0) h.flags = proto::kFlagRetransmit;  // and ask for results to be served
    forger.send_to(workers[0]->port_for(h.slot), make_datagram(h, poison));
    if (i % 200 == 199) wait_counted(i + 1);
  }
  forging_done = true;
  runner.join();
  ASSERT_TRUE(run_ok);
  EXPECT_GE(runs, 1u);
  EXPECT_EQ(exact_runs, runs);
  EXPECT_EQ(wait_counted(kForged), kForged);
  std::printf("forged CONTRIBs %llu during %llu exact AllReduces\n",
              static_cast<unsigned long long>(kForged), static_cast<unsigned long long>(runs));
  EXPECT_EQ(drops("bad_token"), 0u);
  EXPECT_FALSE(forger.recv(50).has_value());  // nothing was ever served to the forger
}

// Makes datagrams that the daemon must drop for one stateless reason (1..11).
class Hostile {
 public:
  Hostile(const Worker& run, uint64_t seed) : run_(run), rng_(seed) {}

  std::vector<uint8_t> make(DropReason r) {
    if (r == DropReason::kTruncated) {
      std::vector<uint8_t> d(rng_() % 48);
      for (auto& b : d) b = static_cast<uint8_t>(rng_());
      return d;
    }
    proto::DataHeader h = contrib_header(run_, static_cast<uint32_t>(rng_() % 8), 0, 4);
    std::vector<uint8_t> d = make_datagram(h, payload_for(h));
    switch (r) {
      case DropReason::kBadMagic:
        d[rng_() % 4] ^= static_cast<uint8_t>(1 + rng_() % 255);
        break;
      case DropReason::kBadVersion:
        d[4] = static_cast<uint8_t>(2 + rng_() % 254);
        break;
      case DropReason::kBadType:
        d[5] = static_cast<uint8_t>(4 + rng_() % 252);  // 1-3: CONTRIB, RESULT, PROBE
        break;
      case DropReason::kBadFlags:
        proto::store_be<uint16_t>(&d[6], static_cast<uint16_t>(2 | rng_()));
        break;
      case DropReason::kReservedNonZero:
        d[rng_() % 2 ? 14 + rng_() % 2 : 46 + rng_() % 2] = static_cast<uint8_t>(1 + rng_() % 255);
        break;
      case DropReason::kBadDtype:
        d[44] = static_cast<uint8_t>(12 + rng_() % 244);
        break;
      case DropReason::kBadOp:
        d[45] = static_cast<uint8_t>(4 + rng_() % 252);
        break;
      case DropReason::kZeroCount:
        proto::store_be<uint32_t>(&d[40], 0);
        d.resize(48);
        break;
      case DropReason::kOversized:
        if (rng_() % 2) {  // beyond the daemon's 8192-byte limit (length is not looked at)
          proto::store_be<uint32_t>(&d[40], static_cast<uint32_t>(2049 + rng_() % 100000));
        } else {  // a well-formed datagram beyond the job's 256-byte payload
          const auto count = static_cast<uint32_t>(65 + rng_() % 60);
          proto::store_be<uint32_t>(&d[40], count);
          d.resize(48 + 4 * count);
        }
        break;
      case DropReason::kLengthMismatch:
        d.resize(48 + rng_() % 16);
        break;
      default:
        break;
    }
    return d;
  }

  // Random bytes, or a valid datagram with random bytes changed. *reason is what the
  // stateless parser says; false when it would pass (then it is not sent).
  bool random(std::vector<uint8_t>* d, DropReason* reason) {
    if (rng_() % 2) {
      d->resize(rng_() % 200);
      for (auto& b : *d) b = static_cast<uint8_t>(rng_());
      if (d->size() >= 8 && rng_() % 2) {
        proto::store_be<uint32_t>(d->data(), proto::kDataMagic);
        (*d)[4] = 1;
      }
    } else {
      proto::DataHeader h = contrib_header(run_, 0, 0, 1 + rng_() % 60);
      *d = make_datagram(h, payload_for(h));
      for (int i = 0, n = 1 + rng_() % 3; i < n; ++i)
        (*d)[rng_() % 48] = static_cast<uint8_t>(rng_());
    }
    proto::DataHeader h;
    const uint8_t* p = nullptr;
    *reason = proto::parse_data(*d, 8192, &h, &p);
    return *reason != DropReason::kOk;
  }

 private:
  const Worker& run_;
  std::mt19937_64 rng_;
};

TEST_P(DataplaneDrops, HostileTrafficDuringAnExactRun) {
  Daemon& d = start();
  JoinSpec spec;
  spec.job_key = 31;
  spec.requested_slots = 8;
  spec.payload_bytes = 256;
  auto run_workers = join_job(spec, 2);
  spec.job_key = 32;
  spec.requested_slots = 4;
  spec.payload_bytes = 64;
  auto victim = join_job(spec, 2);
  const Worker& run = *run_workers[0];

  // Victim slot 0: generation 0 complete, generation 2 collecting with rank 0 only.
  UdpClient evil;
  auto send_v = [&](const Worker& w, uint32_t gen, uint32_t count, DType dt = DType::kInt32) {
    proto::DataHeader h = contrib_header(w, 0, gen, count, dt);
    return make_datagram(h, payload_for(h));
  };
  victim[0]->udp.send_to(victim[0]->port_for(0), send_v(*victim[0], 0, 4));
  victim[1]->udp.send_to(victim[0]->port_for(0), send_v(*victim[1], 0, 4));
  for (auto& v : victim) ASSERT_TRUE(v->udp.recv(2000).has_value());
  victim[0]->udp.send_to(victim[0]->port_for(0), send_v(*victim[0], 2, 4));

  // The correct run, concurrently.
  std::mt19937_64 rng(3);
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < 2; ++r) in.push_back(exact_values(DType::kFloat32, 40000, rng));
  const auto expect_out = reference(DType::kFloat32, Op::kSum, in, 40000);
  uint64_t seq = 0, retransmits = 0, runs = 0, exact_runs = 0;
  bool run_ok = true;
  std::atomic<bool> hostile_done{false};
  std::thread runner([&] {  // AllReduces back to back for as long as the attack lasts
    auto w = ptrs(run_workers);
    while (run_ok && (runs == 0 || !hostile_done.load())) {
      std::vector<std::vector<uint8_t>> out;
      run_ok = run_allreduce(w, DType::kFloat32, Op::kSum, 40000, in, &seq, &out, &retransmits);
      ++runs;
      exact_runs += run_ok && out[0] == expect_out && out[1] == expect_out;
    }
  });

  Hostile gen(run, 11);
  std::array<uint64_t, kReasons> expect{};
  uint64_t sent = 0;
  bool pacing = true;
  auto dropped_now = [&d] {
    uint64_t s = 0;
    for (unsigned q = 0; q < d.dataplane().n_queues(); ++q) {
      for (int r = 1; r < kReasons; ++r) s += d.dataplane().counters(q).drops[r].get();
    }
    return s;
  };
  // Datagrams that name a valid contributor of a job go out of that worker's own socket
  // (`from`), so that they reach the check they are meant for (source binding comes first).
  auto emit = [&](const std::vector<uint8_t>& dg, uint16_t port, DropReason r,
                  UdpClient* from = nullptr) {
    (from != nullptr ? *from : evil).send_to(port, dg);
    ++expect[static_cast<int>(r)];
    if (++sent % 200 == 0 && pacing) {  // pace: never outrun the socket buffers
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (dropped_now() < sent) {
        if (std::chrono::steady_clock::now() > deadline) {
          pacing = false;  // counting is already off: the final check reports it
          break;
        }
        std::this_thread::yield();
      }
    }
  };
  const uint16_t p0 = run.port_for(0), p1 = run.port_for(1);
  for (int i = 0; i < 380; ++i) {    // >= 10,000 datagrams in all, with or without wrong_queue
    for (int r = 1; r <= 11; ++r) {  // a well-formed oversized one reaches the job's checks
      const auto reason = static_cast<DropReason>(r);
      emit(gen.make(reason), i % 2 ? p0 : p1, reason,
           reason == DropReason::kOversized ? &run_workers[0]->udp : nullptr);
    }
    proto::DataHeader h = contrib_header(run, 2 * (i % 4), 0, 4);
    h.job_id = 0x7ff000u + i;  // an incarnation number this daemon never reaches
    emit(make_datagram(h, payload_for(h)), p0, DropReason::kUnknownJob);
    h = contrib_header(run, 2 * (i % 4), 0, 4);
    h.job_token = ~h.job_token;
    emit(make_datagram(h, payload_for(h)), p0, DropReason::kBadToken);
    h = contrib_header(run, 8 + i, 0, 4);
    emit(make_datagram(h, payload_for(h)), p0, DropReason::kSlotOutOfRange, &run_workers[0]->udp);
    h = contrib_header(run, 2 * (i % 4), 0, 4);
    h.contributor = static_cast<uint16_t>(2 + i);
    emit(make_datagram(h, payload_for(h)), p0, DropReason::kBadContributor);
    if (multi_queue()) {  // an odd slot on queue 0's port (one queue: every port is right)
      h = contrib_header(run, 2 * (i % 4) + 1, 0, 4);
      emit(make_datagram(h, payload_for(h)), p0, DropReason::kWrongQueue, &run_workers[0]->udp);
    }
    h = contrib_header(run, 2 * (i % 4), 0, 4);
    h.type = proto::PacketType::kResult;
    emit(make_datagram(h, payload_for(h)), p0, DropReason::kWrongDirection);
    const uint16_t v0 = victim[0]->port_for(0);
    emit(send_v(*victim[0], 2, 4), v0, DropReason::kDuplicate, &victim[0]->udp);
    emit(send_v(*victim[1], 2, 5), v0, DropReason::kSlotMismatch, &victim[1]->udp);
    emit(send_v(*victim[1], 2, 4, DType::kUint32), v0, DropReason::kSlotMismatch, &victim[1]->udp);
    emit(send_v(*victim[1], 0, 4), v0, DropReason::kStaleGeneration, &victim[1]->udp);
    // A forger with the sniffed token, for the running job's slots and generations in use:
    // its source gives it away.
    h = contrib_header(*run_workers[i % 2], static_cast<uint32_t>(i % 8),
                       static_cast<uint32_t>(i / 8), 64, DType::kFloat32);
    emit(make_datagram(h, payload_for(h)), run.port_for(h.slot), DropReason::kWrongSource);
  }
  for (int i = 0; i < 3200; ++i) {
    std::vector<uint8_t> dg;
    DropReason r;
    if (gen.random(&dg, &r)) emit(dg, i % 2 ? p0 : p1, r);
  }
  hostile_done = true;
  runner.join();
  EXPECT_GE(sent, 10000u);
  ASSERT_TRUE(run_ok);
  EXPECT_EQ(exact_runs, runs);
  std::printf("hostile datagrams %llu during %llu exact AllReduces (%llu retransmits)\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(runs),
              static_cast<unsigned long long>(retransmits));

  test::wait_until([&] { return dropped_now() >= sent; }, std::chrono::seconds(3));
  const std::string m = metrics();
  for (int r = 1; r < kReasons; ++r) {
    const std::string name(proto::drop_reason_name(static_cast<DropReason>(r)));
    const uint64_t got = metric_sum(m, "conflux_dataplane_drops_total", {{"reason", name}});
    if (r == static_cast<int>(DropReason::kDuplicate) ||
        r == static_cast<int>(DropReason::kStaleGeneration)) {
      // The run's own retransmissions (if the machine was slow) may add a few.
      EXPECT_GE(got, expect[r]) << name;
      EXPECT_LE(got, expect[r] + retransmits) << name;
    } else {
      EXPECT_EQ(got, expect[r]) << name;
    }
  }
  int status = 0;
  EXPECT_EQ(http_get(static_cast<uint16_t>(d.metrics_port()), "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
}

// The data MAC (SPEC.md §6) through this backend: the JoinAck grants it (payload less the
// trailer), an unsigned or tampered contribution is bad_mac and changes nothing, signed ones
// complete the slot, and each rank's RESULT carries the aggregator's tag over the exact sum.
TEST_P(DataplaneDrops, DataMacBothWays) {
  Config cfg = base_config();
  cfg.secret = "conformance-secret";
  cfg.data_mac = true;
  data_mac_both_ways(cfg, cfg.secret);
}

// A tenant's job (aggregator/README.md "Tenants") is keyed from the tenant's secret: its
// workers' signed packets complete the slot, and a packet signed with the key the shared
// secret would give the same job is bad_mac.
TEST_P(DataplaneDrops, TenantDataMacIsKeyedByTheTenantSecret) {
  Config cfg = base_config();
  cfg.secret = "conformance-secret";
  cfg.data_mac = true;
  cfg.tenants.push_back(Tenant{"team-a", "team-a-secret", "", 2});
  data_mac_both_ways(cfg, "team-a-secret", cfg.secret);
}

void DataplaneDrops::data_mac_both_ways(const Config& cfg, const std::string& worker_secret,
                                        const std::string& foreign_secret) {
  start(cfg);
  JoinSpec spec;
  spec.job_key = 43;
  spec.payload_bytes = 256;
  spec.secret = worker_secret;
  auto workers = join_job(spec, 2);
  const proto::JoinAck& ack = workers[0]->ack;
  ASSERT_NE(ack.flags & proto::kJoinFlagDataMac, 0);
  EXPECT_EQ(ack.payload_bytes, (256u - proto::kMacTrailerSize) & ~7u);
  proto::DataMac mac;
  ASSERT_TRUE(mac.set_key(proto::derive_data_key(worker_secret, ack.job_id, ack.job_token)));
  proto::DataMac foreign;
  if (!foreign_secret.empty()) {
    ASSERT_TRUE(foreign.set_key(proto::derive_data_key(foreign_secret, ack.job_id, ack.job_token)));
  }
  uint64_t seq = 0;
  // Rank r's contribution to slot 0 (16 int32), signed (with `key`) unless `sign` is false.
  auto contrib = [&](Worker& w, int32_t v, bool sign, bool tamper = false,
                     proto::DataMac* key = nullptr) {
    proto::DataHeader h;
    h.flags = sign ? proto::kFlagMac : 0;
    h.job_id = ack.job_id;
    h.job_token = ack.job_token;
    h.contributor = w.contributor;
    h.count = 16;
    h.dtype = DType::kInt32;
    h.op = Op::kSum;
    std::vector<int32_t> vals(16, v);
    auto d = make_datagram(h, {reinterpret_cast<uint8_t*>(vals.data()), 64});
    if (sign) {
      d.resize(d.size() + proto::kMacTrailerSize);
      EXPECT_TRUE((key != nullptr ? *key : mac)
                      .sign(d.data(), d.data() + proto::kDataHeaderSize, 64, w.contributor, ++seq,
                            d.data() + proto::kDataHeaderSize + 64));
    }
    if (tamper) d[proto::kDataHeaderSize] ^= 0x40;
    ASSERT_TRUE(w.udp.send_to(w.port_for(0), d));
  };
  contrib(*workers[0], 1000, false);
  contrib(*workers[0], 1000, true, true);
  uint64_t forged = 2;
  if (!foreign_secret.empty()) {
    contrib(*workers[0], 1000, true, false, &foreign);
    ++forged;
  }
  EXPECT_EQ(wait_metric("conflux_dataplane_drops_total", forged), forged);
  EXPECT_EQ(drops("bad_mac"), forged);
  contrib(*workers[0], 1, true);
  contrib(*workers[1], 2, true);
  for (auto& w : workers) {
    auto r = w->udp.recv(3000);
    ASSERT_TRUE(r.has_value());
    proto::DataHeader h;
    const uint8_t* payload = nullptr;
    ASSERT_EQ(proto::parse_data(*r, 61440, &h, &payload), DropReason::kOk);
    ASSERT_TRUE(h.mac());
    const uint8_t* trailer = payload + 64;
    EXPECT_NE(proto::DataMac::sender_of(trailer) & proto::kAggSender, 0u);
    EXPECT_TRUE(mac.verify(r->data(), payload, 64, trailer));
    std::vector<int32_t> sum(16);
    std::memcpy(sum.data(), payload, 64);
    EXPECT_EQ(sum, std::vector<int32_t>(16, 3));  // the forgeries changed nothing
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DataplaneDrops, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
