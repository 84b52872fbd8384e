// The dataplane conformance suite: every test runs against every backend this machine can
// run, with an in-process daemon on 127.0.0.1 and the raw test client of test_client.h.
// To add a backend, add its name to runnable_backends() (conformance.cc).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "aggregator/daemon.h"
#include "gtest/gtest.h"
#include "test_client.h"

namespace conflux::agg::testing {

// Backends that can run here (config value of `dataplane`).
std::vector<std::string> runnable_backends();

// Base of the parameterized suites; GetParam() is the backend name.
class DaemonTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Loopback, ephemeral ports, two dataplane threads, quiet logs.
  Config base_config() const;
  // Creates and starts a daemon (replacing a previous one).
  Daemon& start(const Config& cfg);
  Daemon& start() { return start(base_config()); }
  Daemon& daemon() { return *daemon_; }
  std::string metrics() const;
  uint64_t drops(const std::string& reason) const;
  // Polls /metrics until `name` (summed) equals `value` or 3 s pass; returns the last value.
  uint64_t wait_metric(const std::string& name, uint64_t value) const;

  // Joins n workers to one job (all ranks concurrently); asserts every JoinAck is ok.
  std::vector<std::unique_ptr<Worker>> join_job(JoinSpec spec, uint32_t n);
  static std::vector<Worker*> ptrs(const std::vector<std::unique_ptr<Worker>>& w);

  void TearDown() override;

  std::unique_ptr<Daemon> daemon_;
};

// Element values that every accumulation order reduces to the same bits: random bits for
// integers, small dyadic values (exact in fp32 sums and products) for floats.
std::vector<uint8_t> exact_values(DType dt, size_t count, std::mt19937_64& rng);
// Random finite floats of the type (deterministic-mode tests).
std::vector<uint8_t> random_floats(DType dt, size_t count, std::mt19937_64& rng);
// Reference reduction in rank order (conflux::reduce::ref, rounded once).
std::vector<uint8_t> reference(DType dt, Op op, const std::vector<std::vector<uint8_t>>& in,
                               size_t count);

}  // namespace conflux::agg::testing
