// SPDX-License-Identifier: Apache-2.0
// Two network namespaces joined by a veth pair, for conformance tests that need a real wire:
// the DPDK backend (an af_packet vdev bound to the aggregator's veth end) and the loss tests
// (nftables drops on the workers' input hook). Root only.
//
//   netns cfxconf-a-<pid>-<n>: veth agg0 10.78.<n>.1/24  <- daemon (kernel TCP control/metrics;
//                                                          data: kernel UDP, or DPDK af_packet)
//   netns cfxconf-w-<pid>-<n>: veth wrk0 10.78.<n>.2/24  <- the tests' raw clients
//
// The veth is created directly inside the two namespaces, so nothing ever appears in the
// host's namespace; deleting the namespaces deletes it. Namespaces of dead test processes
// (same prefix, pid no longer alive) are removed before a new pair is created.
// Used from the test's main thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace conflux::agg::testing {

class VethTopology {
 public:
  enum class Mode {
    kKernel,  // the aggregator's kernel owns agg0's address for everything (UDP backend)
    kDpdk,    // the kernel keeps TCP only: it ignores ARP (the PMD answers) and drops
              // UDP to the data ports (the af_packet PMD has already seen those frames)
  };
  static constexpr uint16_t kDpdkFirstDataPort = 7471;
  static constexpr const char* kAggIface = "agg0";
  static constexpr const char* kWorkerIface = "wrk0";

  // "" when this process can create one (root, `ip`, `nft`, `ethtool` present), else why not.
  static std::string unavailable_reason();
  // Creates the namespaces, the veth and the addresses. nullptr + *err on failure.
  static std::unique_ptr<VethTopology> create(Mode mode, std::string* err);
  ~VethTopology();  // moves the calling thread home if needed, deletes both namespaces
  VethTopology(const VethTopology&) = delete;
  VethTopology& operator=(const VethTopology&) = delete;

  uint32_t agg_ip() const { return agg_ip_; }        // host order
  uint32_t worker_ip() const { return worker_ip_; }  // host order
  std::string agg_ip_text() const;
  std::string worker_ip_text() const;
  int agg_ns_fd() const { return agg_fd_; }
  int worker_ns_fd() const { return worker_fd_; }
  const std::string& worker_ns() const { return worker_ns_; }

  // Runs a shell command line in one namespace (ip netns exec); true on exit status 0.
  bool run_in_agg(const std::string& cmd) const;
  bool run_in_worker(const std::string& cmd) const;

 private:
  VethTopology() = default;

  std::string agg_ns_, worker_ns_;
  uint32_t agg_ip_ = 0, worker_ip_ = 0;
  int agg_fd_ = -1, worker_fd_ = -1;
};

// Moves the calling thread into the network namespace `ns_fd` and back home (the namespace it
// was in) when destroyed. Threads and sockets created meanwhile stay in `ns_fd`'s namespace.
class NetnsScope {
 public:
  explicit NetnsScope(int ns_fd);
  ~NetnsScope();
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;
  bool ok() const { return ok_; }

 private:
  int home_fd_ = -1;
  bool ok_ = false;
};

}  // namespace conflux::agg::testing
