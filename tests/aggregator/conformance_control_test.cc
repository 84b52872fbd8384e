// SPDX-License-Identifier: Apache-2.0
// Conformance: the control plane (rendezvous, errors, authentication, timeouts, life cycle).
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "conflux/protocol/byteorder.h"
#include "conformance.h"
#include "tests/common/thread_names.h"
#include "tests/common/wait_until.h"

namespace conflux::agg::testing {
namespace {

using proto::Status;
using ControlPlane = DaemonTest;

std::vector<uint8_t> frame(proto::ControlMsg m) {
  std::vector<uint8_t> out;
  proto::encode_control(m, out);
  return out;
}

TEST_P(ControlPlane, HelloAdvertisesLimitsAndEverySupportedPair) {
  Config cfg = base_config();
  cfg.max_payload_bytes = 4096;
  cfg.max_slots_per_job = 32;
  start(cfg);
  ControlClient c;
  ASSERT_TRUE(c.connect(daemon().control_port()));
  EXPECT_EQ(c.hello().max_payload_bytes, 4096u);
  EXPECT_EQ(c.hello().max_slots_per_job, 32u);
  EXPECT_EQ(c.hello().support_mask, (uint64_t{1} << 48) - 1);
  EXPECT_EQ(c.hello().auth_required, 0);
  EXPECT_NE(c.hello().nonce, 0u);
  JoinSpec spec;
  spec.requested_slots = 1000;
  spec.payload_bytes = 9000;
  auto w = join_job(spec, 1);
  EXPECT_EQ(w[0]->ack.granted_slots, 32u);
  EXPECT_EQ(w[0]->ack.payload_bytes, 4096u);
  EXPECT_EQ(w[0]->ack.ports, daemon().data_ports());
}

// The next Capacity on `w`'s control connection (heartbeats skipped), or nullopt.
std::optional<proto::Capacity> next_capacity(Worker& w, int timeout_ms = 3000) {
  const auto m = w.ctl.recv_skip_heartbeats(timeout_ms);
  if (!m) return std::nullopt;
  const auto* c = std::get_if<proto::Capacity>(&*m);
  EXPECT_NE(c, nullptr) << proto::to_string(*m);
  if (c == nullptr) return std::nullopt;
  return *c;
}

// Sends a Heartbeat on `w` and expects its answer next: nothing (no Capacity) was pending.
void expect_nothing_pending(Worker& w, uint64_t time) {
  w.ctl.send(proto::Heartbeat{time});
  const auto m = w.ctl.recv_skip_heartbeats(3000);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(std::holds_alternative<proto::HeartbeatAck>(*m)) << proto::to_string(*m);
}

// Every worker of `ws` gets a Capacity next with this grant and reason and the rest of the
// capped daemon's figures (capped_config).
void expect_grants(const std::vector<std::unique_ptr<Worker>>& ws, uint32_t share_mbps,
                   proto::CapacityReason why, size_t threads) {
  for (const auto& x : ws) {
    const auto c = next_capacity(*x);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->share_mbps, share_mbps);
    EXPECT_EQ(c->reason, why);
    EXPECT_EQ(c->max_mbps, 1000u);
    EXPECT_EQ(c->line_mbps, 25000u);
    EXPECT_EQ(c->threads, threads);
  }
}

// A daemon capped at 1000 Mbit/s with a configured line rate of 25000.
Config capped_config(Config cfg) {
  cfg.max_mbps = 1000;
  cfg.line_mbps = 25000;
  return cfg;
}

JoinSpec capacity_job(uint64_t key) {
  JoinSpec spec;
  spec.job_key = key;
  spec.flags = proto::kJoinFlagCapacity;
  return spec;
}

// A worker that sets Join flag capacity gets a Capacity right after its JoinAck: the cap, the
// configured line rate and the dataplane threads; one that does not, gets none.
TEST_P(ControlPlane, TheDaemonsThreadsAreNamedForTopAndPerf) {
  Config cfg = base_config();
  start(cfg);
  const std::string dataplane = GetParam() == "dpdk" ? "cfx-dpdk" : "cfx-udp";
  std::vector<std::string> want = {"cfx-control"};
  for (int64_t q = 0; q < cfg.threads; ++q) want.push_back(dataplane + std::to_string(q));
  // Each thread names itself as it starts.
  std::multiset<std::string> names;
  test::wait_until([&] {
    names = conflux::testing::thread_names();
    return std::all_of(want.begin(), want.end(),
                       [&](const std::string& n) { return names.count(n) == 1; });
  });
  for (const std::string& n : want) EXPECT_EQ(names.count(n), 1u) << n;
}

TEST_P(ControlPlane, CapacityFollowsTheJoinAckWhenAskedFor) {
  start(capped_config(base_config()));
  JoinSpec spec = capacity_job(31);
  auto w = join_job(spec, 2);
  for (auto& x : w) {
    const auto c = next_capacity(*x);  // a Capacity, not any other message
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->line_mbps, 25000u);
    EXPECT_EQ(c->max_mbps, 1000u);
    EXPECT_EQ(c->share_mbps, 1000u);  // the smaller of the two
    EXPECT_EQ(c->threads, daemon().data_ports().size());
  }
  spec.job_key = 32;
  spec.flags = 0;
  auto plain = join_job(spec, 1);
  expect_nothing_pending(*plain[0], 5);
}

// Fair share (SPEC §3): two jobs on one daemon get half of its capacity each. The first job
// hears its update (reason: a job joined) when the second joins, and gets the whole again
// (reason: a job left) when the second leaves; /metrics shows the grants and the pacing.
TEST_P(ControlPlane, TwoJobsShareTheCapacityAndHearEveryGrantUpdate) {
  start(capped_config(base_config()));
  JoinSpec spec = capacity_job(41);
  auto first = join_job(spec, 2);
  const size_t threads = daemon().data_ports().size();
  expect_grants(first, 1000, proto::CapacityReason::kJoined, threads);  // alone: the whole
  const auto job1 =
      std::map<std::string, std::string>{{"conflux_job", std::to_string(first[0]->ack.job_id)}};
  EXPECT_EQ(metric_sum(metrics(), "conflux_job_paced_mbps", job1), 0)
      << "a job alone is not paced beyond max_mbps";

  spec.job_key = 42;
  auto second = join_job(spec, 2);
  expect_grants(second, 500, proto::CapacityReason::kJoined, threads);
  expect_grants(first, 500, proto::CapacityReason::kJobJoined, threads);
  const auto job2 =
      std::map<std::string, std::string>{{"conflux_job", std::to_string(second[0]->ack.job_id)}};
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_job_grant_mbps", job1), 500);
  EXPECT_EQ(metric_sum(m, "conflux_job_grant_mbps", job2), 500);
  EXPECT_EQ(metric_sum(m, "conflux_job_paced_mbps", job1), 500);
  EXPECT_EQ(metric_sum(m, "conflux_job_paced_mbps", job2), 500);
  EXPECT_NE(m.find("conflux_job_result_mbps{conflux_job="), std::string::npos);

  for (auto& x : second) ASSERT_TRUE(x->ctl.send(proto::Leave{}));
  expect_grants(first, 1000, proto::CapacityReason::kJobLeft, threads);  // alone again
  EXPECT_EQ(metric_sum(metrics(), "conflux_job_grant_mbps", job1), 1000);
  EXPECT_EQ(metric_sum(metrics(), "conflux_job_paced_mbps", job1), 0);
  expect_nothing_pending(*first[0], 7);  // no further Capacity
}

// conflux throttle (POST /admin/max-mbps/N, authenticated with the daemon's secret): the cap
// changes while jobs run; every job hears its new grant with reason cap_changed and the new
// max_mbps, /metrics shows the cap; a bad value is a 400 and changes nothing; 0 lifts the cap
// (the capacity is the line rate again, and a lone job's grant is the whole of it).
TEST_P(ControlPlane, ThrottleTellsEveryJobItsNewGrant) {
  const std::string secret = "throttle-test-secret";  // the dpdk fixture's peer is not loopback
  Config cfg = capped_config(base_config());
  cfg.secret = secret;
  start(cfg);
  const size_t threads = daemon().data_ports().size();
  JoinSpec spec = capacity_job(61);
  spec.secret = secret;
  auto a = join_job(spec, 2);
  expect_grants(a, 1000, proto::CapacityReason::kJoined, threads);
  spec.job_key = 62;
  auto b = join_job(spec, 1);
  ASSERT_EQ(next_capacity(*b[0])->share_mbps, 500u);
  expect_grants(a, 500, proto::CapacityReason::kJobJoined, threads);

  const auto port = static_cast<uint16_t>(daemon().metrics_port());
  int status = 0;
  const std::string body = http_post(port, "/admin/max-mbps/250", &status, secret);
  EXPECT_EQ(status, 200) << body;
  EXPECT_NE(body.find("2 job(s) told"), std::string::npos) << body;
  for (const auto* ws : {&a, &b}) {
    for (const auto& x : *ws) {
      const auto c = next_capacity(*x);
      ASSERT_TRUE(c.has_value());
      EXPECT_EQ(c->share_mbps, 125u);
      EXPECT_EQ(c->max_mbps, 250u);
      EXPECT_EQ(c->reason, proto::CapacityReason::kCapChanged);
    }
  }
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_max_mbps"), 250u);
  EXPECT_EQ(
      metric_sum(m, "conflux_job_paced_mbps", {{"conflux_job", std::to_string(a[0]->ack.job_id)}}),
      125u);

  for (const char* bad : {"/admin/max-mbps/", "/admin/max-mbps/fast", "/admin/max-mbps/-5",
                          "/admin/max-mbps/99999999"}) {
    http_post(port, bad, &status, secret);
    EXPECT_EQ(status, 400) << bad;
  }
  EXPECT_EQ(metric_sum(metrics(), "conflux_max_mbps"), 250u);
  expect_nothing_pending(*a[0], 5);

  for (auto& x : b) ASSERT_TRUE(x->ctl.send(proto::Leave{}));
  for (const auto& x : a) EXPECT_EQ(next_capacity(*x)->share_mbps, 250u);  // alone: the cap
  http_post(port, "/admin/max-mbps/0", &status, secret);
  EXPECT_EQ(status, 200);
  http_post(port, "/admin/max-mbps/10", &status);  // no authentication header
  EXPECT_EQ(status, 403);
  for (const auto& x : a) {
    const auto c = next_capacity(*x);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->share_mbps, 25000u);  // no cap: the line rate
    EXPECT_EQ(c->max_mbps, 0u);
  }
  EXPECT_EQ(metric_sum(metrics(), "conflux_max_mbps"), 0u);
}

// Tenants (aggregator/README.md "Tenants"): a job's weight is its tenant's, named by the secret
// its Joins authenticate with; grants follow the weights and every job hears its new one. A
// rank of another tenant cannot enter a job; with tenants every Join must authenticate.
TEST_P(ControlPlane, TenantWeightsDivideTheCapacity) {
  Config cfg = capped_config(base_config());
  cfg.secret = "shared-secret";
  cfg.tenants = {Tenant{"research", "research-secret", "", 3},
                 Tenant{"batch", "batch-secret", "", 1}};
  start(cfg);
  const size_t threads = daemon().data_ports().size();
  JoinSpec spec = capacity_job(71);
  spec.secret = "research-secret";
  auto research = join_job(spec, 2);
  expect_grants(research, 1000, proto::CapacityReason::kJoined, threads);
  EXPECT_EQ(research[0]->ctl.hello().auth_required, 1);

  spec.job_key = 72;
  spec.secret = "shared-secret";  // weight 1
  auto shared = join_job(spec, 1);
  expect_grants(shared, 250, proto::CapacityReason::kJoined, threads);
  expect_grants(research, 750, proto::CapacityReason::kJobJoined, threads);
  spec.job_key = 73;
  spec.secret = "batch-secret";  // weights 3 + 1 + 1
  auto batch = join_job(spec, 1);
  expect_grants(batch, 200, proto::CapacityReason::kJoined, threads);
  expect_grants(research, 600, proto::CapacityReason::kJobJoined, threads);
  expect_grants(shared, 200, proto::CapacityReason::kJobJoined, threads);
  const std::string m = metrics();
  const auto weight = [&](const proto::JoinAck& ack, const std::string& tenant) {
    return metric_sum(m, "conflux_job_share_weight",
                      {{"conflux_job", std::to_string(ack.job_id)}, {"tenant", tenant}});
  };
  EXPECT_EQ(weight(research[0]->ack, "research"), 3u);
  EXPECT_EQ(weight(shared[0]->ack, ""), 1u);
  EXPECT_EQ(weight(batch[0]->ack, "batch"), 1u);
  EXPECT_EQ(metric_sum(m, "conflux_job_grant_mbps",
                       {{"conflux_job", std::to_string(research[0]->ack.job_id)}}),
            600u);

  // Job 74: rank 0 of tenant batch opens it; rank 1 authenticating as research, or with the
  // shared secret, is refused; rank 1 of batch completes it.
  spec = capacity_job(74);
  spec.n_workers = 2;
  spec.secret = "batch-secret";
  Worker first;
  ASSERT_TRUE(first.start_join(daemon().control_port(), spec));
  spec.rank = 1;
  for (const char* other : {"research-secret", "shared-secret"}) {
    spec.secret = other;
    Worker intruder;
    ASSERT_TRUE(intruder.start_join(daemon().control_port(), spec));
    EXPECT_EQ(intruder.finish_join(3000), Status::kAuthFailed) << other;
  }
  spec.secret = "not-a-tenant";
  Worker stranger;
  ASSERT_TRUE(stranger.start_join(daemon().control_port(), spec));
  EXPECT_EQ(stranger.finish_join(3000), Status::kAuthFailed);
  spec.secret.clear();  // tenants configured: a Join without a MAC is refused
  Worker anonymous;
  ASSERT_TRUE(anonymous.start_join(daemon().control_port(), spec));
  EXPECT_EQ(anonymous.finish_join(3000), Status::kAuthFailed);
  spec.secret = "batch-secret";
  Worker second;
  ASSERT_TRUE(second.start_join(daemon().control_port(), spec));
  EXPECT_EQ(first.finish_join(3000), Status::kOk);
  EXPECT_EQ(second.finish_join(3000), Status::kOk);
  EXPECT_EQ(next_capacity(first)->share_mbps, 166u);  // 1000 x 1/6
  expect_grants(research, 500, proto::CapacityReason::kJobJoined, threads);
  expect_grants(shared, 166, proto::CapacityReason::kJobJoined, threads);
  expect_grants(batch, 166, proto::CapacityReason::kJobJoined, threads);

  for (auto& x : research) ASSERT_TRUE(x->ctl.send(proto::Leave{}));
  expect_grants(shared, 333, proto::CapacityReason::kJobLeft, threads);  // 1 of 3
  expect_grants(batch, 333, proto::CapacityReason::kJobLeft, threads);
}

// A job that did not ask for Capacity messages hears no update when another job joins; the
// one that asked gets its half after its JoinAck.
TEST_P(ControlPlane, NoGrantUpdateUnlessAsked) {
  start(capped_config(base_config()));
  JoinSpec spec;
  spec.job_key = 51;
  auto plain = join_job(spec, 1);
  auto asking = join_job(capacity_job(52), 1);
  const auto c = next_capacity(*asking[0]);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->share_mbps, 500u);
  expect_nothing_pending(*plain[0], 5);
}

// DirectDown (SPEC.md §7) only from a child aggregator that the JoinAck offered it: from a
// worker it is a protocol error, and the job's other business is not touched.
TEST_P(ControlPlane, DirectDownFromAMemberNeverOfferedItIsABadMessage) {
  start();
  JoinSpec spec;
  spec.job_key = 61;
  auto ws = join_job(spec, 1);
  ASSERT_EQ(ws.size(), 1u);
  ASSERT_TRUE(ws[0]->ctl.send(proto::DirectDown{0xEF4D0001, 7480, 1, 1}));
  std::optional<proto::ControlMsg> m;
  do {
    m = ws[0]->ctl.recv(2000);
  } while (m && !std::holds_alternative<proto::Error>(*m));  // a Heartbeat may come first
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(std::get<proto::Error>(*m).status, Status::kBadMessage);
  EXPECT_NE(std::get<proto::Error>(*m).text.find("not offered direct results"), std::string::npos)
      << std::get<proto::Error>(*m).text;
  EXPECT_TRUE(ws[0]->ctl.wait_closed(2000));
}

TEST_P(ControlPlane, MalformedFramesGetErrorThenClose) {
  start();
  auto good = frame(proto::Heartbeat{1});
  struct Case {
    std::string what;
    std::vector<uint8_t> bytes;
    Status status;
    std::string reason;
  };
  std::vector<Case> cases;
  const std::string http = "GET / HTTP/1.0\r\n\r\n";
  cases.push_back({"bad magic", {http.begin(), http.end()}, Status::kBadMessage, "bad_magic"});
  auto v = good;
  v[4] = 2;
  cases.push_back({"bad version", v, Status::kVersionMismatch, "bad_version"});
  v = good;
  v[5] = 99;
  cases.push_back({"bad type", v, Status::kBadMessage, "bad_type"});
  v = good;
  proto::store_be<uint32_t>(&v[8], 5000);
  cases.push_back({"too long", v, Status::kBadMessage, "too_long"});
  v = good;
  proto::store_be<uint32_t>(&v[8], 4);
  cases.push_back({"bad length", v, Status::kBadMessage, "bad_length"});
  proto::Join j;
  j.n_workers = 0;
  j.udp_port = 1;
  cases.push_back({"bad field", frame(j), Status::kBadMessage, "bad_field"});
  v = good;
  v[7] = 1;
  cases.push_back({"reserved", v, Status::kBadMessage, "reserved_nonzero"});
  cases.push_back({"Error from a worker", frame(proto::Error{Status::kInternal, "hi"}),
                   Status::kBadMessage, "unexpected_message"});
  for (const Case& c : cases) {
    ControlClient cc;
    ASSERT_TRUE(cc.connect(daemon().control_port())) << c.what;
    ASSERT_TRUE(cc.send_raw(c.bytes));
    auto m = cc.recv(2000);
    ASSERT_TRUE(m.has_value()) << c.what;
    ASSERT_TRUE(std::holds_alternative<proto::Error>(*m)) << c.what << ": " << proto::to_string(*m);
    EXPECT_EQ(std::get<proto::Error>(*m).status, c.status) << c.what;
    EXPECT_TRUE(cc.wait_closed(2000)) << c.what;
  }
  // A second Join on a connection that already joined.
  Worker w;
  JoinSpec spec;
  spec.n_workers = 2;
  ASSERT_TRUE(w.start_join(daemon().control_port(), spec));
  proto::Join again;
  again.job_key = 1;
  again.n_workers = 2;
  again.udp_port = 5;
  again.requested_slots = 1;
  again.payload_bytes = 8;
  w.ctl.send(again);
  auto m = w.ctl.recv(2000);
  ASSERT_TRUE(m && std::holds_alternative<proto::Error>(*m));
  EXPECT_TRUE(w.ctl.wait_closed(2000));

  const std::string text = metrics();
  for (const Case& c : cases) {
    EXPECT_GE(metric_sum(text, "conflux_control_errors_total", {{"reason", c.reason}}), 1u)
        << c.what;
  }
  EXPECT_EQ(metric_sum(text, "conflux_control_errors_total"), cases.size() + 1);
  // Still serving.
  spec.n_workers = 1;
  spec.job_key = 77;
  auto ok = join_job(spec, 1);
  EXPECT_EQ(ok[0]->ack.status, Status::kOk);
}

TEST_P(ControlPlane, Authentication) {
  Config cfg = base_config();
  cfg.secret = "s3cret";
  start(cfg);
  JoinSpec spec;
  spec.secret = "s3cret";
  spec.corrupt_mac = true;
  Worker bad;
  ASSERT_TRUE(bad.start_join(daemon().control_port(), spec));
  EXPECT_EQ(bad.ctl.hello().auth_required, 1);
  EXPECT_EQ(bad.finish_join(2000), Status::kAuthFailed);
  EXPECT_TRUE(bad.ctl.wait_closed(2000));
  Worker none;  // no MAC at all
  spec.secret.clear();
  spec.corrupt_mac = false;
  ASSERT_TRUE(none.start_join(daemon().control_port(), spec));
  EXPECT_EQ(none.finish_join(2000), Status::kAuthFailed);
  spec.secret = "s3cret";
  auto good = join_job(spec, 1);
  EXPECT_EQ(good[0]->ack.status, Status::kOk);
  EXPECT_EQ(metric_sum(metrics(), "conflux_control_join_acks_total", {{"status", "auth_failed"}}),
            2u);
}

TEST_P(ControlPlane, JoinTimeout) {
  Config cfg = base_config();
  cfg.join_timeout_ms = 300;
  start(cfg);
  Worker w;
  JoinSpec spec;
  spec.n_workers = 2;
  ASSERT_TRUE(w.start_join(daemon().control_port(), spec));
  // The daemon's answer (its 300 ms join timeout), well before the worker's own 3 s wait.
  EXPECT_EQ(w.finish_join(3000), Status::kJoinTimeout);
  EXPECT_TRUE(w.ctl.wait_closed(2000));
  // The worker's shorter timeout wins over the daemon's.
  cfg.join_timeout_ms = 30000;
  start(cfg);
  Worker w2;
  spec.join_timeout_ms = 200;
  ASSERT_TRUE(w2.start_join(daemon().control_port(), spec));
  EXPECT_EQ(w2.finish_join(3000), Status::kJoinTimeout);
}

// Version negotiation (SPEC.md §1): a Join offering a range that includes this daemon's
// version gets a JoinAck naming it; a plain Join (an older plugin) one without; a range with
// no version in common is refused with both ranges named, and the connection closed.
TEST_P(ControlPlane, JoinNegotiatesTheProtocolVersion) {
  start();
  JoinSpec spec;
  spec.flags = proto::kJoinFlagVersions;
  spec.min_version = 1;
  spec.max_version = 2;  // a newer plugin
  auto a = join_job(spec, 1);
  EXPECT_NE(a[0]->ack.flags & proto::kJoinAckFlagVersion, 0);
  EXPECT_EQ(a[0]->ack.version, proto::kMaxProtocolVersion);
  JoinSpec old;
  old.job_key = 2;
  auto b = join_job(old, 1);
  EXPECT_EQ(b[0]->ack.flags & proto::kJoinAckFlagVersion, 0);
  Worker c;
  JoinSpec later = spec;
  later.job_key = 3;
  later.min_version = proto::kMaxProtocolVersion + 1;
  later.max_version = proto::kMaxProtocolVersion + 2;
  ASSERT_TRUE(c.start_join(daemon().control_port(), later));
  auto m = c.ctl.recv_skip_heartbeats(3000);
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(std::holds_alternative<proto::Error>(*m)) << proto::to_string(*m);
  const auto& e = std::get<proto::Error>(*m);
  EXPECT_EQ(e.status, Status::kVersionMismatch);
  EXPECT_NE(e.text.find("no common protocol version: the worker speaks 2..3, this confluxd 1..1"),
            std::string::npos)
      << e.text;
  EXPECT_TRUE(c.ctl.wait_closed(3000));
}

TEST_P(ControlPlane, CapacityQuotaAndNoCapacity) {
  Config cfg = base_config();
  cfg.total_slots = 4;
  cfg.max_slots_per_job = 8;
  cfg.max_jobs = 3;
  start(cfg);
  JoinSpec spec;
  spec.job_key = 1;
  spec.requested_slots = 3;
  auto a = join_job(spec, 1);
  EXPECT_EQ(a[0]->ack.granted_slots, 3u);
  spec.job_key = 2;
  spec.requested_slots = 8;
  auto b = join_job(spec, 1);
  EXPECT_EQ(b[0]->ack.granted_slots, 1u);  // what is left
  Worker c;
  spec.job_key = 3;
  ASSERT_TRUE(c.start_join(daemon().control_port(), spec));
  EXPECT_EQ(c.finish_join(2000), Status::kNoCapacity);
  // Slots come back when a job ends.
  a[0]->ctl.send(proto::Leave{});
  EXPECT_EQ(wait_metric("conflux_slots_in_use", 1), 1u);
  spec.job_key = 4;
  auto d = join_job(spec, 1);
  EXPECT_EQ(d[0]->ack.granted_slots, 3u);
}

TEST_P(ControlPlane, TooManyJobs) {
  Config cfg = base_config();
  cfg.max_jobs = 1;
  start(cfg);
  JoinSpec spec;
  auto a = join_job(spec, 1);
  Worker b;
  spec.job_key = 2;
  ASSERT_TRUE(b.start_join(daemon().control_port(), spec));
  EXPECT_EQ(b.finish_join(2000), Status::kNoCapacity);
}

TEST_P(ControlPlane, JobMismatchAndRankInUse) {
  start();
  JoinSpec spec;
  spec.job_key = 5;
  spec.n_workers = 2;
  Worker r0, dup0, wrong1, r1;
  ASSERT_TRUE(r0.start_join(daemon().control_port(), spec));
  ASSERT_TRUE(dup0.start_join(daemon().control_port(), spec));
  EXPECT_EQ(dup0.finish_join(2000), Status::kRankInUse);
  spec.rank = 1;
  spec.payload_bytes = 128;  // disagrees with rank 0's 256
  ASSERT_TRUE(wrong1.start_join(daemon().control_port(), spec));
  EXPECT_EQ(wrong1.finish_join(2000), Status::kJobMismatch);
  spec.payload_bytes = 256;
  ASSERT_TRUE(r1.start_join(daemon().control_port(), spec));
  EXPECT_EQ(r0.finish_join(2000), Status::kOk);
  EXPECT_EQ(r1.finish_join(2000), Status::kOk);
  EXPECT_EQ(r0.ack.job_id, r1.ack.job_id);
  EXPECT_EQ(r0.ack.job_token, r1.ack.job_token);
}

TEST_P(ControlPlane, HeartbeatsLeaveAndJobDeletion) {
  Config cfg = base_config();
  cfg.heartbeat_ms = 100;
  start(cfg);
  JoinSpec spec;
  auto w = join_job(spec, 2);
  ASSERT_TRUE(w[0]->ctl.send(proto::Heartbeat{42}));
  bool got_ack = false, got_hb = false;
  for (int i = 0; i < 10 && !(got_ack && got_hb); ++i) {
    auto m = w[0]->ctl.recv(1000);
    ASSERT_TRUE(m.has_value());
    if (auto* a = std::get_if<proto::HeartbeatAck>(&*m)) got_ack = a->time_ns == 42;
    got_hb = got_hb || std::holds_alternative<proto::Heartbeat>(*m);
  }
  EXPECT_TRUE(got_ack);
  EXPECT_TRUE(got_hb);  // the daemon's own heartbeat
  EXPECT_EQ(wait_metric("conflux_jobs_active", 1), 1u);
  w[0]->ctl.send(proto::Leave{});
  EXPECT_TRUE(w[0]->ctl.wait_closed(2000));
  EXPECT_EQ(metric_sum(metrics(), "conflux_jobs_active"), 1u);  // rank 1 still there
  w[1]->ctl.close();                                            // a disconnect counts as leaving
  EXPECT_EQ(wait_metric("conflux_jobs_active", 0), 0u);
  EXPECT_EQ(metric_sum(metrics(), "conflux_jobs_deleted_total"), 1u);
}

TEST_P(ControlPlane, SilentWorkerTimesOut) {
  Config cfg = base_config();
  cfg.worker_timeout_ms = 300;
  cfg.heartbeat_ms = 0;
  start(cfg);
  JoinSpec spec;
  auto w = join_job(spec, 1);
  EXPECT_TRUE(w[0]->ctl.wait_closed(3000));
  EXPECT_EQ(wait_metric("conflux_jobs_active", 0), 0u);
  EXPECT_EQ(metric_sum(metrics(), "conflux_control_worker_timeouts_total"), 1u);
}

// A connection that never joins is closed at control_join_timeout_ms even though it sends
// Heartbeats all along (they used to reset its timer, so it could be held forever); one that
// joined in time (waiting in a rendezvous, or a member) stays.
TEST_P(ControlPlane, PreJoinConnectionIsClosedAtTheDeadlineDespiteHeartbeats) {
  Config cfg = base_config();
  cfg.control_join_timeout_ms = 400;
  cfg.worker_timeout_ms = 10000;
  start(cfg);
  ControlClient idle;
  ASSERT_TRUE(idle.connect(daemon().control_port()));
  const auto t0 = std::chrono::steady_clock::now();
  Worker waiting;  // rank 0 of 2: joined in time, waits in the rendezvous
  JoinSpec two;
  two.job_key = 71;
  two.n_workers = 2;
  ASSERT_TRUE(waiting.start_join(daemon().control_port(), two));
  JoinSpec one;
  one.job_key = 72;
  auto member = join_job(one, 1);
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3)) {
    ASSERT_TRUE(idle.send(proto::Heartbeat{1}));
    closed = idle.wait_closed(40);
  }
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(closed);
  EXPECT_GE(elapsed, std::chrono::milliseconds(400));  // not before its Join deadline
  EXPECT_EQ(metric_sum(metrics(), "conflux_control_join_deadline_closes_total"), 1u);
  // Both joined connections outlive the deadline.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(waiting.ctl.wait_closed(50));
  EXPECT_FALSE(member[0]->ctl.wait_closed(50));
  EXPECT_EQ(metric_sum(metrics(), "conflux_control_join_deadline_closes_total"), 1u);
  EXPECT_EQ(metric_sum(metrics(), "conflux_jobs_active"), 1u);
}

// True when `w`'s control connection is open and served: a Heartbeat is answered.
bool answers(Worker& w) {
  if (!w.ctl.send(proto::Heartbeat{7})) return false;
  const auto m = w.ctl.recv_skip_heartbeats(2000);
  return m && std::holds_alternative<proto::HeartbeatAck>(*m);
}

// At max_control_connections a new connection takes the place of the oldest one that has not
// joined, which is closed and counted; connections that joined are never evicted, so once
// every place is held by one, a new connection is closed at accept (no ServerHello).
TEST_P(ControlPlane, AtTheLimitTheOldestConnectionWithoutJoinMakesRoom) {
  Config cfg = base_config();
  cfg.max_control_connections = 3;
  start(cfg);
  EXPECT_EQ(daemon().max_control_connections(), 3);
  std::vector<std::unique_ptr<ControlClient>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<ControlClient>());
    ASSERT_TRUE(idle.back()->connect(daemon().control_port())) << i;
  }
  // A worker that joins takes the oldest idle connection's place; the others stay.
  JoinSpec spec;
  spec.job_key = 73;
  auto a = join_job(spec, 1);
  EXPECT_TRUE(idle[0]->wait_closed(2000));
  EXPECT_FALSE(idle[1]->wait_closed(50));
  EXPECT_FALSE(idle[2]->wait_closed(50));
  spec.job_key = 74;
  auto b = join_job(spec, 1);
  spec.job_key = 75;
  auto c = join_job(spec, 1);
  EXPECT_TRUE(idle[1]->wait_closed(2000));
  EXPECT_TRUE(idle[2]->wait_closed(2000));
  // Every place is held by a member now: the next connection is refused, nobody is evicted.
  for (int i = 0; i < 2; ++i) {
    ControlClient extra;
    EXPECT_FALSE(extra.connect(daemon().control_port()));
  }
  for (Worker* w : {a[0].get(), b[0].get(), c[0].get()}) EXPECT_TRUE(answers(*w));
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_control_evicted_total", {{"reason", "total_limit"}}), 3u);
  EXPECT_EQ(metric_sum(m, "conflux_control_evicted_total"), 3u);
  EXPECT_EQ(metric_sum(m, "conflux_control_refused_total", {{"reason", "total_limit"}}), 2u);
  EXPECT_EQ(metric_sum(m, "conflux_control_connections"), 3u);
  EXPECT_EQ(metric_sum(m, "conflux_jobs_active"), 3u);
  // A member that leaves frees a place for a connection that joins.
  a.clear();
  EXPECT_EQ(wait_metric("conflux_control_connections", 2), 2u);
  spec.job_key = 76;
  auto d = join_job(spec, 1);
  EXPECT_EQ(d[0]->ack.status, Status::kOk);
}

// A rank that joined and waits in the rendezvous holds its place however many connections
// without a Join come after it: they evict one another, oldest first, and the job forms.
TEST_P(ControlPlane, AJoinedRankWaitingForTheOthersIsNeverEvicted) {
  Config cfg = base_config();
  cfg.max_control_connections = 2;
  start(cfg);
  JoinSpec two;
  two.job_key = 77;
  two.n_workers = 2;
  Worker first;
  ASSERT_TRUE(first.start_join(daemon().control_port(), two));
  ASSERT_TRUE(answers(first));  // its Join is handled (the answer comes after it)
  std::vector<std::unique_ptr<ControlClient>> idle;
  for (int i = 0; i < 5; ++i) {
    idle.push_back(std::make_unique<ControlClient>());
    ASSERT_TRUE(idle.back()->connect(daemon().control_port())) << i;
  }
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(idle[i]->wait_closed(2000)) << i;
  EXPECT_FALSE(idle[4]->wait_closed(50));
  Worker second;  // evicts idle[4] and completes the job
  two.rank = 1;
  ASSERT_TRUE(second.start_join(daemon().control_port(), two));
  EXPECT_EQ(first.finish_join(3000), Status::kOk);
  EXPECT_EQ(second.finish_join(3000), Status::kOk);
  EXPECT_TRUE(idle[4]->wait_closed(2000));
  EXPECT_EQ(metric_sum(metrics(), "conflux_control_evicted_total", {{"reason", "total_limit"}}),
            5u);
  EXPECT_EQ(metric_sum(metrics(), "conflux_control_refused_total"), 0u);
}

// At max_control_connections_per_addr the new connection evicts the oldest without a Join of
// its own address; with every connection of the address joined, it is refused.
TEST_P(ControlPlane, PerAddressLimitEvictsWithinTheAddress) {
  Config cfg = base_config();
  cfg.max_control_connections = 100;
  cfg.max_control_connections_per_addr = 2;
  start(cfg);
  std::vector<std::unique_ptr<ControlClient>> idle;
  for (int i = 0; i < 2; ++i) {
    idle.push_back(std::make_unique<ControlClient>());
    ASSERT_TRUE(idle.back()->connect(daemon().control_port())) << i;
  }
  JoinSpec spec;
  spec.job_key = 78;
  auto a = join_job(spec, 1);
  EXPECT_TRUE(idle[0]->wait_closed(2000));
  EXPECT_FALSE(idle[1]->wait_closed(50));
  spec.job_key = 79;
  auto b = join_job(spec, 1);
  EXPECT_TRUE(idle[1]->wait_closed(2000));
  ControlClient third;
  EXPECT_FALSE(third.connect(daemon().control_port()));
  EXPECT_TRUE(answers(*a[0]));
  EXPECT_TRUE(answers(*b[0]));
  const std::string m = metrics();
  EXPECT_EQ(metric_sum(m, "conflux_control_evicted_total", {{"reason", "addr_limit"}}), 2u);
  EXPECT_EQ(metric_sum(m, "conflux_control_evicted_total", {{"reason", "total_limit"}}), 0u);
  EXPECT_EQ(metric_sum(m, "conflux_control_refused_total", {{"reason", "addr_limit"}}), 1u);
  EXPECT_EQ(metric_sum(m, "conflux_control_refused_total", {{"reason", "total_limit"}}), 0u);
  EXPECT_EQ(metric_sum(m, "conflux_control_connections"), 2u);
}

TEST_P(ControlPlane, MetricsEndpoints) {
  const std::string secret = "readyz-test-secret";  // the dpdk fixture's peer is not loopback
  Config cfg = base_config();
  cfg.secret = secret;
  start(cfg);
  int status = 0;
  const uint16_t port = static_cast<uint16_t>(daemon().metrics_port());
  EXPECT_EQ(http_get(port, "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  // Readiness follows the drain; liveness does not.
  EXPECT_EQ(http_get(port, "/readyz", &status), "ready\n");
  EXPECT_EQ(status, 200);
  http_post(port, "/admin/drain", &status, secret);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(http_get(port, "/readyz", &status), "draining\n");
  EXPECT_EQ(status, 503);
  EXPECT_EQ(http_get(port, "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  http_post(port, "/admin/undrain", &status, secret);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(http_get(port, "/readyz", &status), "ready\n");
  http_get(port, "/nope", &status);
  EXPECT_EQ(status, 404);
  const std::string m = http_get(port, "/metrics", &status);
  EXPECT_EQ(status, 200);
  EXPECT_NE(m.find("# TYPE conflux_dataplane_drops_total counter"), std::string::npos);
  const std::string last_thread = std::to_string(daemon().dataplane().n_queues() - 1);
  EXPECT_NE(
      m.find("conflux_dataplane_drops_total{thread=\"" + last_thread + "\",reason=\"bad_mac\"} 0"),
      std::string::npos);
  // The process's CPU time: started threads have used some.
  const size_t cpu = m.find("\nprocess_cpu_seconds_total ");
  ASSERT_NE(cpu, std::string::npos);
  EXPECT_GT(std::stod(m.substr(cpu + 27)), 0.0);
  // Every metric family is documented in the README.
  const std::string readme = [] {
    std::ifstream in(std::string(CONFLUX_SOURCE_DIR) + "/aggregator/README.md");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  std::istringstream lines(m);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    EXPECT_NE(readme.find("`" + name + "`"), std::string::npos) << name << " undocumented";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ControlPlane, ::testing::ValuesIn(conformance_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
