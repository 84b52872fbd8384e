// SPDX-License-Identifier: Apache-2.0
#include "conformance_netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace conflux::agg::testing {
namespace {

constexpr const char* kPrefix = "cfxconf-";
constexpr const char* kNetnsDir = "/var/run/netns";

bool sh(const std::string& cmd) {
  const std::string quiet = cmd + " >/dev/null 2>&1";
  return std::system(quiet.c_str()) == 0;
}

std::string ip_text(uint32_t ip) {
  in_addr a{htonl(ip)};
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a, buf, sizeof(buf));
}

// Deletes cfxconf-{a,w}-<pid>-<n> namespaces whose pid is no longer alive (a test process
// that crashed or was killed before its destructors ran).
void remove_stale() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kNetnsDir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || name.size() < 11) continue;
    const long pid = std::strtol(name.c_str() + 10, nullptr, 10);  // after "cfxconf-a-"
    if (pid <= 0 || pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    sh("ip netns del " + name);
  }
  // The EAL runtime directories of dead dpdk test processes (conformance.cc: cfxconf<pid>).
  for (const auto& e : std::filesystem::directory_iterator("/var/run/dpdk", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("cfxconf", 0) != 0 || name.size() < 8) continue;
    const long pid = std::strtol(name.c_str() + 7, nullptr, 10);
    if (pid <= 0 || pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::filesystem::remove_all(e.path(), ec);
  }
}

}  // namespace

std::string VethTopology::unavailable_reason() {
  if (geteuid() != 0) return "needs root (network namespaces, veth, AF_PACKET)";
  for (const char* tool : {"ip", "nft", "ethtool"}) {
    if (!sh(std::string("command -v ") + tool)) return std::string("needs `") + tool + "`";
  }
  return "";
}

std::unique_ptr<VethTopology> VethTopology::create(Mode mode, std::string* err) {
  static std::atomic<unsigned> seq{0};
  remove_stale();
  const unsigned n = seq++;
  std::unique_ptr<VethTopology> t(new VethTopology());
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(n);
  const uint32_t net = (10u << 24) | (78u << 16) | ((n % 256) << 8);
  t->agg_ip_ = net | 1;
  t->worker_ip_ = net | 2;
  const std::string a = std::string(kPrefix) + "a-" + tag, w = std::string(kPrefix) + "w-" + tag;
  if (!sh("ip netns add " + a)) {
    *err = "ip netns add " + a + " failed";
    return nullptr;
  }
  t->agg_ns_ = a;
  if (!sh("ip netns add " + w)) {
    *err = "ip netns add " + w + " failed";
    return nullptr;
  }
  t->worker_ns_ = w;
  const std::string agg = kAggIface, wrk = kWorkerIface;
  const std::string steps[] = {
      "ip link add " + agg + " netns " + a + " type veth peer name " + wrk + " netns " + w,
      "ip -n " + a + " link set lo up",
      "ip -n " + w + " link set lo up",
      "ip -n " + a + " link set " + agg + " mtu 9000 up",
      "ip -n " + w + " link set " + wrk + " mtu 9000 up",
      "ip -n " + a + " addr add " + t->agg_ip_text() + "/24 dev " + agg,
      "ip -n " + w + " addr add " + t->worker_ip_text() + "/24 dev " + wrk,
      // af_packet hands the PMD frames as they are on the wire: a checksum left to offload
      // (CHECKSUM_PARTIAL) would arrive unfinished, so the workers' kernel computes it.
      "ip netns exec " + w + " ethtool -K " + wrk + " tx off",
  };
  for (const std::string& s : steps) {
    if (!sh(s)) {
      *err = "failed: " + s;
      return nullptr;
    }
  }
  if (mode == Mode::kDpdk) {
    const std::string last = std::to_string(kDpdkFirstDataPort + 7);
    const std::string dpdk_steps[] = {
        "ip netns exec " + a + " sysctl -qw net.ipv4.conf." + agg + ".arp_ignore=8",
        "ip netns exec " + a + " nft add table inet cfx",
        "ip netns exec " + a +
            " nft add chain inet cfx input '{ type filter hook input priority 0; }'",
        "ip netns exec " + a + " nft add rule inet cfx input udp dport " +
            std::to_string(kDpdkFirstDataPort) + "-" + last + " drop",
    };
    for (const std::string& s : dpdk_steps) {
      if (!sh(s)) {
        *err = "failed: " + s;
        return nullptr;
      }
    }
  }
  t->agg_fd_ = open((std::string(kNetnsDir) + "/" + a).c_str(), O_RDONLY | O_CLOEXEC);
  t->worker_fd_ = open((std::string(kNetnsDir) + "/" + w).c_str(), O_RDONLY | O_CLOEXEC);
  if (t->agg_fd_ < 0 || t->worker_fd_ < 0) {
    *err = "cannot open " + std::string(kNetnsDir) + "/" + a;
    return nullptr;
  }
  return t;
}

VethTopology::~VethTopology() {
  if (agg_fd_ >= 0) close(agg_fd_);
  if (worker_fd_ >= 0) close(worker_fd_);
  // Threads still inside keep a namespace alive until they end; the names go now.
  if (!agg_ns_.empty()) sh("ip netns del " + agg_ns_);
  if (!worker_ns_.empty()) sh("ip netns del " + worker_ns_);
}

std::string VethTopology::agg_ip_text() const { return ip_text(agg_ip_); }
std::string VethTopology::worker_ip_text() const { return ip_text(worker_ip_); }

bool VethTopology::run_in_agg(const std::string& cmd) const {
  return sh("ip netns exec " + agg_ns_ + " " + cmd);
}

bool VethTopology::run_in_worker(const std::string& cmd) const {
  return sh("ip netns exec " + worker_ns_ + " " + cmd);
}

NetnsScope::NetnsScope(int ns_fd) {
  home_fd_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  ok_ = home_fd_ >= 0 && setns(ns_fd, CLONE_NEWNET) == 0;
}

NetnsScope::~NetnsScope() {
  if (home_fd_ < 0) return;
  if (ok_) (void)setns(home_fd_, CLONE_NEWNET);
  close(home_fd_);
}

}  // namespace conflux::agg::testing
