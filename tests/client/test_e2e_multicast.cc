// SPDX-License-Identifier: Apache-2.0
// End to end, multicast result delivery (protocol/SPEC.md §8): a real confluxd with a
// multicast range and real worker processes on 127.0.0.1 (loopback carries multicast with
// IP_MULTICAST_IF = 127.0.0.1 and loopback on). Every worker verifies every element itself.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "conflux/common/json_text.h"
#include "conflux/protocol/data.h"
#include "e2e_fixture.h"
#include "e2e_harness.h"
#include "util/proc.h"

namespace conflux::client::e2e {
namespace {

using namespace std::chrono_literals;

// A range of one slice (multicast_slice 64): the groups start at 239.77.0.0 on any address.
const std::vector<std::string> kMulticastDaemon = {"--multicast-range", "239.77.0.0/26",
                                                   "--log-level", "info"};

std::vector<std::string> worker_args(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--spin-us", "0", "--warmup", "0", "--log-level", "info"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// One labelled sample of the daemon's /metrics, e.g. name{mode="multicast"}; -1 if absent.
double sample(const DaemonProcess& d, const std::string& name_and_labels) {
  std::string err;
  const std::string m = tools::http_get(d.metrics_port, "/metrics", &err);
  const size_t p = m.find("\n" + name_and_labels + " ");
  return p == std::string::npos ? -1
                                : std::strtod(m.c_str() + p + name_and_labels.size() + 2, nullptr);
}

// The JSON drop counter `reason` of a worker (0 when the worker dropped none).
double drops(const WorkerResult& w, const std::string& reason) {
  const json::Json report = json::Json::parse(w.json, nullptr, false);
  if (!report.is_object()) return 0;
  return report.value(json::Json::json_pointer("/stats/drops/" + reason), 0.0);
}

class E2EMulticast : public DaemonFixture {
 protected:
  void start_daemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> a = kMulticastDaemon;
    a.insert(a.end(), extra.begin(), extra.end());
    DaemonFixture::start_daemon(a);
  }
  std::string daemon_log() const { return tools::read_file(d_.log); }
};

TEST_F(E2EMulticast, EveryDtypeAndOpExactThroughTheGroup) {
  start_daemon();
  const double out_before = d_.metric("conflux_dataplane_bytes_out_total");
  auto rs = run_workers(
      dir_, d_.endpoint(), 3,
      worker_args({"--dtype", "all", "--op", "all", "--count", "1,7,1023,40000", "--iters", "1"}));
  double received = 0;
  for (const WorkerResult& w : rs) {
    ASSERT_TRUE(w.exited_ok) << explain(rs);
    EXPECT_EQ(count_of(w.err + w.out, "results by multicast (group 239.77.0.0:"), 1u) << w.err;
    EXPECT_GT(json_number(w.json, "multicast_results"), 0) << w.json;
    received += json_number(w.json, "bytes_received");
  }
  EXPECT_NE(rs[0].out.find("verified: all 192 results correct"), std::string::npos) << rs[0].out;
  // One send per result: the daemon sent about a third of what the three ranks received.
  const double out = d_.metric("conflux_dataplane_bytes_out_total") - out_before;
  EXPECT_GT(out, 0);
  EXPECT_LT(out, 0.5 * received) << "daemon out " << out << ", ranks received " << received;
  EXPECT_EQ(sample(d_, "conflux_multicast_decisions_total{mode=\"multicast\"}"), 1);
  EXPECT_EQ(count_of(daemon_log(), "results by multicast to group 239.77.0.0"), 1u);
  EXPECT_EQ(d_.stop(), "exit 0");
}

TEST_F(E2EMulticast, LossOnTheGroupIsRecoveredByUnicastResends) {
  start_daemon();
  auto rs = run_workers(dir_, d_.endpoint(), 3,
                        worker_args({"--dtype", "float,int32,bf16", "--op", "sum,max", "--count",
                                     "100000", "--iters", "3", "--fault-rank", "1",
                                     "--fault-multicast-drop", "0.05", "--fault-seed", "7"}));
  for (const WorkerResult& w : rs) ASSERT_TRUE(w.exited_ok) << explain(rs);
  EXPECT_NE(rs[0].out.find("verified: all 6 results correct"), std::string::npos) << rs[0].out;
  // Rank 1 lost results on the group and asked again; the daemon answered by unicast.
  EXPECT_GT(json_number(rs[1].json, "fault_dropped"), 0) << rs[1].json;
  EXPECT_GT(json_number(rs[1].json, "retransmits"), 0) << rs[1].json;
  EXPECT_GT(d_.metric("conflux_dataplane_retransmits_served_total"), 0);
  for (const WorkerResult& w : rs) {
    EXPECT_NE(w.err.find("results by multicast"), std::string::npos) << w.err;
    EXPECT_GT(json_number(w.json, "multicast_results"), 0) << w.json;
  }
  EXPECT_EQ(d_.stop(), "exit 0");
}

TEST_F(E2EMulticast, RankThatCannotHearTheGroupMakesEveryRankUseUnicast) {
  start_daemon({"--multicast-probe-ms", "300"});
  auto rs = run_workers(
      dir_, d_.endpoint(), 3,
      worker_args({"--dtype", "float,int8", "--op", "sum,min", "--count", "1,5000", "--iters", "1",
                   "--fault-rank", "2", "--fault-multicast-drop", "1"}));
  for (const WorkerResult& w : rs) {
    ASSERT_TRUE(w.exited_ok) << explain(rs);
    EXPECT_EQ(count_of(w.err + w.out, "results by unicast (group 239.77.0.0:"), 1u) << w.err;
    EXPECT_EQ(count_of(w.err + w.out, "rank 2 did not receive the probe"), 1u) << w.err;
    EXPECT_EQ(json_number(w.json, "multicast_results"), 0) << w.json;
  }
  EXPECT_NE(rs[0].out.find("verified: all 8 results correct"), std::string::npos) << rs[0].out;
  EXPECT_EQ(sample(d_, "conflux_multicast_decisions_total{mode=\"unicast\"}"), 1);
  EXPECT_EQ(count_of(daemon_log(), "results by unicast: rank 2 did not receive the probe"), 1u)
      << daemon_log();
  EXPECT_EQ(d_.stop(), "exit 0");
}

// Sends RESULT-shaped datagrams to `group` from a socket of its own until stopped.
class GroupForger {
 public:
  GroupForger(const std::string& group, uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    in_addr lo{};
    ::inet_pton(AF_INET, "127.0.0.1", &lo);
    ::setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_IF, &lo, sizeof lo);
    to_.sin_family = AF_INET;
    to_.sin_port = htons(port);
    ::inet_pton(AF_INET, group.c_str(), &to_.sin_addr);
    thread_ = std::thread([this] { run(); });
  }
  ~GroupForger() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  uint64_t sent() const { return sent_; }

 private:
  void run() {
    proto::DataHeader h;
    h.type = proto::PacketType::kResult;
    h.job_id = 4096;  // the first job id of a fresh daemon; the source is what gives it away
    h.count = 4;
    std::vector<uint8_t> d(proto::kDataHeaderSize + h.payload_bytes(), 0x5a);
    while (!stop_) {
      h.generation = static_cast<uint32_t>(sent_);
      proto::encode_data_header(h, d.data());
      if (::sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to_), sizeof to_) > 0) {
        ++sent_;
      }
      std::this_thread::sleep_for(2ms);
    }
  }
  int fd_ = -1;
  sockaddr_in to_{};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

TEST_F(E2EMulticast, TwoJobsGetTheirOwnGroupsAndForgedGroupPacketsAreDropped) {
  start_daemon();
  const std::string dir_a = dir_ + "/a", dir_b = dir_ + "/b";
  std::filesystem::create_directories(dir_a);
  std::filesystem::create_directories(dir_b);
  // Long enough to overlap: both jobs are live at once, so they hold two groups.
  const auto args = worker_args({"--dtype", "float", "--op", "sum", "--count", "50000", "--iters",
                                 "300", "--timeout-s", "100"});
  std::vector<WorkerResult> ra, rb;
  {
    GroupForger forger("239.77.0.0", d_.data_ports[0]);
    auto pa = start_workers(dir_a, d_.endpoint(), 2, args);
    auto pb = start_workers(dir_b, d_.endpoint(), 2, args);
    ra = wait_workers(dir_a, pa, 100s);
    rb = wait_workers(dir_b, pb, 100s);
    EXPECT_GT(forger.sent(), 0u);
  }
  for (const WorkerResult& w : ra) ASSERT_TRUE(w.exited_ok) << explain(ra);
  for (const WorkerResult& w : rb) ASSERT_TRUE(w.exited_ok) << explain(rb);
  // Each job its own group of the range; both by multicast.
  const bool a_first = ra[0].err.find("group 239.77.0.0:") != std::string::npos;
  const std::string ga = a_first ? "group 239.77.0.0:" : "group 239.77.0.1:";
  const std::string gb = a_first ? "group 239.77.0.1:" : "group 239.77.0.0:";
  for (const WorkerResult& w : ra)
    EXPECT_EQ(count_of(w.err, "results by multicast (" + ga), 1u) << w.err;
  for (const WorkerResult& w : rb)
    EXPECT_EQ(count_of(w.err, "results by multicast (" + gb), 1u) << w.err;
  // The forged datagrams reached the ranks of the job that holds 239.77.0.0 and were dropped
  // as wrong_source there (counted), never touching a result; the other job never saw them.
  const auto& on_group0 = a_first ? ra : rb;
  const auto& other = a_first ? rb : ra;
  for (const WorkerResult& w : on_group0) EXPECT_GT(drops(w, "wrong_source"), 0) << w.json;
  for (const WorkerResult& w : other) EXPECT_EQ(drops(w, "wrong_source"), 0) << w.json;
  // Both groups released with their jobs.
  EXPECT_EQ(sample(d_, "conflux_multicast_decisions_total{mode=\"multicast\"}"), 2);
  EXPECT_EQ(d_.metric("conflux_jobs_active"), 0);
  EXPECT_EQ(d_.metric("conflux_multicast_groups_in_use"), 0);
  EXPECT_EQ(d_.stop(), "exit 0");
}

}  // namespace
}  // namespace conflux::client::e2e
