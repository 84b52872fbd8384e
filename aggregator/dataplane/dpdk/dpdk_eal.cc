// SPDX-License-Identifier: Apache-2.0
#include "aggregator/dataplane/dpdk/dpdk_eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace conflux::agg::dpdk {
namespace {

std::mutex g_mu;
bool g_eal_done = false;
std::string g_eal_args;
Status g_eal_status;

struct PoolKey {
  std::string kind;
  int socket;
  bool operator<(const PoolKey& o) const {
    return kind != o.kind ? kind < o.kind : socket < o.socket;
  }
};
struct PoolInfo {
  rte_mempool* pool;
  uint32_t n;
  uint16_t data_room;
};
std::map<PoolKey, PoolInfo> g_pools;
unsigned g_pool_seq = 0;

}  // namespace

Status eal_init_once(const std::string& args) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_eal_done) {
    if (g_eal_status.ok() && args != g_eal_args) {
      spdlog::warn("dpdk: EAL already initialized with '{}'; ignoring '{}'", g_eal_args, args);
    }
    return g_eal_status;
  }
  g_eal_done = true;
  g_eal_args = args;
  static std::vector<std::string> words{"confluxd"};  // argv outlives rte_eal_init
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int rc = rte_eal_init(static_cast<int>(words.size()), argv.data());
  if (rc < 0) {
    g_eal_status = system_error(
        fmt::format("dpdk: rte_eal_init('{}') failed: {}", args, rte_strerror(rte_errno)));
    return g_eal_status;
  }
  spdlog::info("dpdk: EAL up ({} lcores, {} ports) with '{}'", rte_lcore_count(),
               rte_eth_dev_count_avail(), args);
  return {};
}

rte_mempool* shared_pool(const char* kind, uint32_t n, uint16_t data_room, int socket,
                         std::string* err) {
  std::lock_guard<std::mutex> lock(g_mu);
  const PoolKey key{kind, socket};
  auto it = g_pools.find(key);
  if (it != g_pools.end() && it->second.n >= n && it->second.data_room >= data_room) {
    return it->second.pool;
  }
  const std::string name = fmt::format("cfx_{}_{}", kind, g_pool_seq++);
  const unsigned cache = n >= 4096 ? 256 : 0;
  rte_mempool* p = rte_pktmbuf_pool_create(name.c_str(), n, cache, 0, data_room, socket);
  if (p == nullptr) {
    *err = fmt::format("dpdk: mbuf pool {} ({} x {} bytes): {} (with --no-huge, raise -m)", name, n,
                       data_room, rte_strerror(rte_errno));
    return nullptr;
  }
  g_pools[key] = {p, n, data_room};  // an older, smaller pool stays allocated (see header)
  return p;
}

}  // namespace conflux::agg::dpdk
