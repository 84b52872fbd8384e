// SPDX-License-Identifier: Apache-2.0
#include "conformance.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "conflux/common/reduce.h"
#include "tests/common/ci_skip.h"

namespace conflux::agg::testing {
namespace {

std::string dpdk_file_prefix() { return "cfxconf" + std::to_string(getpid()); }

// The veth pair of this process's dpdk tests: the EAL binds its af_packet vdev to agg0 of
// this pair once and for all, so the pair lives as long as the process (deleted at exit,
// with the EAL's runtime directory).
VethTopology* dpdk_wire(std::string* err) {
  struct Holder {
    std::unique_ptr<VethTopology> wire;
    std::string error;
    ~Holder() {
      std::error_code ec;
      if (wire != nullptr) std::filesystem::remove_all("/var/run/dpdk/" + dpdk_file_prefix(), ec);
    }
  };
  static Holder h;
  if (h.wire == nullptr && h.error.empty()) {
    h.wire = VethTopology::create(VethTopology::Mode::kDpdk, &h.error);
  }
  *err = h.error;
  return h.wire.get();
}

// The EAL's lcores float over the CPUs this process may use (lcore 0: the main thread while
// it initialises the EAL; lcore 1: the dataplane queue), so that it pins nothing.
std::string dpdk_eal_args() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    }
  }
  if (cpus.empty()) cpus = "0";
  // --no-shconf: no shared files, no IPC (--in-memory would conflict with --no-huge).
  return "--lcores=0@(" + cpus + "),1@(" + cpus + ") --no-huge -m 128 --no-pci --no-shconf " +
         "--file-prefix=" + dpdk_file_prefix() +
         " --no-telemetry --log-level=*:warning --vdev=net_af_packet0,iface=" +
         VethTopology::kAggIface + ",framesz=9216,blocksz=36864,framecnt=512,qpairs=1";
}

}  // namespace

std::vector<std::string> conformance_backends() {
  // A backend that cannot run on this machine skips with the reason (DaemonTest::SetUp).
  return {"udp", "dpdk"};
}

std::vector<std::string> runnable_backends() { return {"udp"}; }

void DaemonTest::SetUp() {
  if (GetParam() != "dpdk") return;
#ifndef CONFLUX_HAVE_DPDK_DATAPLANE
  CONFLUX_SKIP_UNLESS_CI()
      << "confluxd built without the DPDK dataplane (libdpdk not found by pkg-config, "
         "or CONFLUX_WITH_DPDK=OFF)";
#endif
  if (const std::string why = VethTopology::unavailable_reason(); !why.empty()) {
    CONFLUX_SKIP_UNLESS_CI() << "dpdk backend on a veth pair: " << why;
  }
  std::string err;
  wire_ = dpdk_wire(&err);
  ASSERT_NE(wire_, nullptr) << "veth pair for the dpdk backend: " << err;
  in_worker_ns_ = std::make_unique<NetnsScope>(wire_->worker_ns_fd());
  ASSERT_TRUE(in_worker_ns_->ok()) << "setns(worker namespace): " << std::strerror(errno);
  set_endpoints(wire_->agg_ip(), wire_->worker_ip());
}

std::string DaemonTest::use_wire() {
  if (wire_ != nullptr) return "";
  if (std::string why = VethTopology::unavailable_reason(); !why.empty()) return why;
  std::string err;
  own_wire_ = VethTopology::create(VethTopology::Mode::kKernel, &err);
  if (own_wire_ == nullptr) {
    ADD_FAILURE() << "veth pair: " << err;
    return err;
  }
  wire_ = own_wire_.get();
  in_worker_ns_ = std::make_unique<NetnsScope>(wire_->worker_ns_fd());
  if (!in_worker_ns_->ok()) {
    ADD_FAILURE() << "setns(worker namespace): " << std::strerror(errno);
    return "setns failed";
  }
  set_endpoints(wire_->agg_ip(), wire_->worker_ip());
  return "";
}

Config DaemonTest::base_config() const {
  Config c;
  c.listen = wire_ != nullptr ? wire_->agg_ip_text() : "127.0.0.1";
  c.control_port = 0;
  c.data_port = 0;
  c.metrics_port = 0;
  c.threads = 2;
  c.dataplane = GetParam();
  c.log_level = "warn";
  c.join_timeout_ms = 5000;
  c.socket_buffer_bytes = 8 << 20;
  if (GetParam() == "dpdk") {
    c.threads = 1;  // af_packet: no rte_flow, so one queue (two are refused at start)
    c.data_port = VethTopology::kDpdkFirstDataPort;
    c.dpdk_eal_args = dpdk_eal_args();
    c.dpdk_idle_sleep_us = 10;  // do not hog a core of a shared CI machine between bursts
  }
  return c;
}

Daemon& DaemonTest::start(const Config& cfg) {
  daemon_.reset();
  setup_logging(cfg.log_level);
  std::string err;
  {
    // Sockets and threads the daemon creates (and the EAL's, on the first dpdk start) belong
    // to the namespace of the creating thread.
    std::optional<NetnsScope> in_agg;
    if (wire_ != nullptr) {
      in_agg.emplace(wire_->agg_ns_fd());
      if (!in_agg->ok()) {
        ADD_FAILURE() << "setns(aggregator namespace): " << std::strerror(errno);
        std::abort();
      }
    }
    cpu_set_t affinity;
    const bool saved = sched_getaffinity(0, sizeof(affinity), &affinity) == 0;
    daemon_ = Daemon::create(cfg, &err);
    if (saved) (void)sched_setaffinity(0, sizeof(affinity), &affinity);  // rte_eal_init pins
    if (daemon_ != nullptr) {
      const Status st = daemon_->start();
      EXPECT_TRUE(st.ok()) << st.message();
    }
  }
  if (daemon_ == nullptr) {
    ADD_FAILURE() << "daemon: " << err;
    std::abort();
  }
  return *daemon_;
}

void DaemonTest::TearDown() {
  daemon_.reset();
  in_worker_ns_.reset();
  set_endpoints(INADDR_LOOPBACK, INADDR_LOOPBACK);
  own_wire_.reset();
  wire_ = nullptr;
}

std::string DaemonTest::metrics() const {
  return http_get(static_cast<uint16_t>(daemon_->metrics_port()), "/metrics");
}

uint64_t DaemonTest::drops(const std::string& reason) const {
  return metric_sum(metrics(), "conflux_dataplane_drops_total", {{"reason", reason}});
}

std::string DaemonTest::wait_metrics(const std::function<bool(const std::string&)>& done) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::string m = metrics();
  while (!done(m) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = metrics();
  }
  return m;
}

uint64_t DaemonTest::wait_metric(const std::string& name, uint64_t value) const {
  return metric_sum(
      wait_metrics([&](const std::string& m) { return metric_sum(m, name) == value; }), name);
}

std::vector<std::unique_ptr<Worker>> DaemonTest::join_job(JoinSpec spec, uint32_t n) {
  std::vector<std::unique_ptr<Worker>> w;
  for (uint32_t r = 0; r < n; ++r) {
    w.push_back(std::make_unique<Worker>());
    spec.n_workers = n;
    spec.rank = r;
    EXPECT_TRUE(w.back()->start_join(daemon_->control_port(), spec));
  }
  for (auto& x : w) EXPECT_EQ(x->finish_join(3000), proto::Status::kOk);
  return w;
}

std::vector<Worker*> DaemonTest::ptrs(const std::vector<std::unique_ptr<Worker>>& w) {
  std::vector<Worker*> out;
  for (auto& x : w) out.push_back(x.get());
  return out;
}

namespace {

// Stores d as one element of floating type dt at p; false for integer types.
bool store_float(DType dt, double d, uint8_t* p) {
  const float f = static_cast<float>(d);
  switch (dt) {
    case DType::kFloat32:
      std::memcpy(p, &f, 4);
      return true;
    case DType::kFloat64:
      std::memcpy(p, &d, 8);
      return true;
    case DType::kFloat16: {
      const uint16_t h = reduce::float_to_half(f);
      std::memcpy(p, &h, 2);
      return true;
    }
    case DType::kBfloat16: {
      const uint16_t h = reduce::float_to_bf16(f);
      std::memcpy(p, &h, 2);
      return true;
    }
    case DType::kFloat8e4m3:
      *p = reduce::float_to_fp8e4m3(f);
      return true;
    case DType::kFloat8e5m2:
      *p = reduce::float_to_fp8e5m2(f);
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<uint8_t> exact_values(DType dt, size_t count, std::mt19937_64& rng) {
  static constexpr float kSet[] = {0.f,   0.5f, -0.5f, 1.f, -1.f, 1.5f,
                                   -1.5f, 2.f,  -2.f,  3.f, -3.f, 4.f};
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = out.data() + i * es;
    if (!store_float(dt, kSet[rng() % std::size(kSet)], p)) {
      const uint64_t bits = rng();  // integers: any bits (sums and products wrap exactly)
      std::memcpy(p, &bits, es);
    }
  }
  return out;
}

std::vector<uint8_t> random_floats(DType dt, size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-5.0, 5.0);
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    const double d = dist(rng) * std::pow(2.0, static_cast<int>(rng() % 8) - 4);
    store_float(dt, d, out.data() + i * es);  // integer types stay zero
  }
  return out;
}

std::vector<uint8_t> reference(DType dt, Op op, const std::vector<std::vector<uint8_t>>& in,
                               size_t count) {
  std::vector<uint8_t> acc(count * accum_size(dt)), out(count * dtype_size(dt));
  reduce::ref::init(dt, acc.data(), in[0].data(), count);
  for (size_t r = 1; r < in.size(); ++r)
    reduce::ref::accumulate(dt, op, acc.data(), in[r].data(), count);
  reduce::ref::finish(dt, out.data(), acc.data(), count);
  return out;
}

}  // namespace conflux::agg::testing
