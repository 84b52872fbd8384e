#include "conformance.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "conflux/common/reduce.h"

namespace conflux::agg::testing {

std::vector<std::string> runnable_backends() {
  return {"udp"};  // a new backend that runs on this machine: add its name here
}

Config DaemonTest::base_config() const {
  Config c;
  c.listen = "127.0.0.1";
  c.control_port = 0;
  c.data_port = 0;
  c.metrics_port = 0;
  c.threads = 2;
  c.dataplane = GetParam();
  c.log_level = "warn";
  c.join_timeout_ms = 5000;
  c.socket_buffer_bytes = 8 << 20;
  return c;
}

Daemon& DaemonTest::start(const Config& cfg) {
  daemon_.reset();
  setup_logging(cfg.log_level);
  std::string err;
  daemon_ = Daemon::create(cfg, &err);
  if (daemon_ == nullptr) {
    ADD_FAILURE() << "daemon: " << err;
    std::abort();
  }
  const std::string e = daemon_->start();
  EXPECT_EQ(e, "");
  return *daemon_;
}

void DaemonTest::TearDown() { daemon_.reset(); }

std::string DaemonTest::metrics() const {
  return http_get(static_cast<uint16_t>(daemon_->metrics_port()), "/metrics");
}

uint64_t DaemonTest::drops(const std::string& reason) const {
  return metric_sum(metrics(), "conflux_dataplane_drops_total", {{"reason", reason}});
}

uint64_t DaemonTest::wait_metric(const std::string& name, uint64_t value) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  uint64_t v = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    v = metric_sum(metrics(), name);
    if (v == value) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return v;
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

std::vector<uint8_t> exact_values(DType dt, size_t count, std::mt19937_64& rng) {
  static constexpr float kSet[] = {0.f, 0.5f, -0.5f, 1.f, -1.f, 1.5f, -1.5f, 2.f, -2.f, 3.f, -3.f, 4.f};
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    const float f = kSet[rng() % std::size(kSet)];
    uint8_t* p = out.data() + i * es;
    switch (dt) {
      case DType::kFloat32: std::memcpy(p, &f, 4); break;
      case DType::kFloat64: { const double d = f; std::memcpy(p, &d, 8); break; }
      case DType::kFloat16: { const uint16_t h = reduce::float_to_half(f); std::memcpy(p, &h, 2); break; }
      case DType::kBfloat16: { const uint16_t h = reduce::float_to_bf16(f); std::memcpy(p, &h, 2); break; }
      case DType::kFloat8e4m3: *p = reduce::float_to_fp8e4m3(f); break;
      case DType::kFloat8e5m2: *p = reduce::float_to_fp8e5m2(f); break;
      default: {
        const uint64_t bits = rng();
        std::memcpy(p, &bits, es);
      }
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
    const float f = static_cast<float>(d);
    uint8_t* p = out.data() + i * es;
    switch (dt) {
      case DType::kFloat32: std::memcpy(p, &f, 4); break;
      case DType::kFloat64: std::memcpy(p, &d, 8); break;
      case DType::kFloat16: { const uint16_t h = reduce::float_to_half(f); std::memcpy(p, &h, 2); break; }
      case DType::kBfloat16: { const uint16_t h = reduce::float_to_bf16(f); std::memcpy(p, &h, 2); break; }
      case DType::kFloat8e4m3: *p = reduce::float_to_fp8e4m3(f); break;
      case DType::kFloat8e5m2: *p = reduce::float_to_fp8e5m2(f); break;
      default: break;
    }
  }
  return out;
}

std::vector<uint8_t> reference(DType dt, Op op, const std::vector<std::vector<uint8_t>>& in,
                               size_t count) {
  std::vector<uint8_t> acc(count * accum_size(dt)), out(count * dtype_size(dt));
  reduce::ref::init(dt, acc.data(), in[0].data(), count);
  for (size_t r = 1; r < in.size(); ++r) reduce::ref::accumulate(dt, op, acc.data(), in[r].data(), count);
  reduce::ref::finish(dt, out.data(), acc.data(), count);
  return out;
}

}  // namespace conflux::agg::testing
