// SPDX-License-Identifier: Apache-2.0
// The dataplane conformance suite: every test runs against every backend, with an in-process
// daemon and the raw test client of test_client.h. A backend that cannot run on this machine
// (not compiled in, not root) skips every test with the reason. To add a backend, add its name
// to conformance_backends() and its set-up to DaemonTest (conformance.cc).
//
// "udp":  daemon and clients on 127.0.0.1 in the test's own network namespace.
// "dpdk": one veth pair per test process (conformance_netns.h): the daemon's threads, its TCP
//         control/metrics sockets and the EAL (initialised once per process, on the first
//         dpdk test) live in the aggregator namespace, with a net_af_packet vdev on agg0 and
//         one queue (af_packet has no rte_flow to steer UDP ports to queues); the test's main
//         thread moves into the worker namespace for the whole test, so every client socket
//         (and thread) it creates is a kernel-UDP worker on the far end of the veth.
// A test may also ask for the wire with any backend (use_wire(): a fresh veth pair for udp),
// e.g. to drop packets with nftables on the workers' input hook.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "aggregator/daemon/daemon.h"
#include "conformance_netns.h"
#include "gtest/gtest.h"
#include "test_client.h"

namespace conflux::agg::testing {

// Every backend of the conformance suite (config value of `dataplane`); see the file comment.
std::vector<std::string> conformance_backends();
// Backends that run as a separate confluxd process on 127.0.0.1 with no set-up (the Process
// suite of process_test.cc): udp only. DPDK needs a vdev on a veth pair; its process life cycle
// (ready file, SIGTERM -> exit 0, clear errors) is covered by tests/dpdk/dpdk_veth_test.sh.
std::vector<std::string> runnable_backends();

// Base of the parameterized suites; GetParam() is the backend name.
class DaemonTest : public ::testing::TestWithParam<std::string> {
 protected:
  // dpdk: skips unless runnable here, else moves the main thread into the worker namespace.
  void SetUp() override;
  // udp: loopback, ephemeral ports, two dataplane threads. On a wire: the daemon's veth
  // address; dpdk: one queue on fixed data ports (7471...). Quiet logs.
  Config base_config() const;
  // Puts this test on a veth pair (call before start()); "" or why not (then GTEST_SKIP).
  std::string use_wire();
  VethTopology* wire() const { return wire_; }
  // Creates and starts a daemon (replacing a previous one), inside the aggregator namespace
  // when on a wire.
  Daemon& start(const Config& cfg);
  Daemon& start() { return start(base_config()); }
  Daemon& daemon() { return *daemon_; }
  std::string metrics() const;
  uint64_t drops(const std::string& reason) const;
  // Polls /metrics until done(text) holds or 3 s pass; returns the last text read.
  std::string wait_metrics(const std::function<bool(const std::string&)>& done) const;
  // Polls /metrics until `name` (summed) equals `value` or 3 s pass; returns the last value.
  uint64_t wait_metric(const std::string& name, uint64_t value) const;

  // Joins n workers to one job (all ranks concurrently); asserts every JoinAck is ok.
  std::vector<std::unique_ptr<Worker>> join_job(JoinSpec spec, uint32_t n);
  static std::vector<Worker*> ptrs(const std::vector<std::unique_ptr<Worker>>& w);

  // More than one dataplane queue: slots are spread over several data ports.
  bool multi_queue() const { return daemon_->data_ports().size() > 1; }

  void TearDown() override;

  std::unique_ptr<Daemon> daemon_;
  VethTopology* wire_ = nullptr;              // the wire this test runs on, if any
  std::unique_ptr<VethTopology> own_wire_;    // a per-test wire (use_wire() with udp)
  std::unique_ptr<NetnsScope> in_worker_ns_;  // main thread in the workers' namespace
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
