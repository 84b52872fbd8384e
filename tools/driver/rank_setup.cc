// SPDX-License-Identifier: Apache-2.0
// Per-rank setup helpers (see rank_setup.h).
#include "driver/rank_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "conflux/common/reduce.h"

extern char** environ;

namespace conflux::driver {
namespace {

struct Member {
  const char* name;
  bool present;
};

Status check(const char* what, std::initializer_list<Member> members) {
  for (const Member& m : members) {
    if (!m.present) {
      return internal_error(std::string(what) + "." + m.name +
                            " is NULL in the plugin, but NCCL calls it");
    }
  }
  return Status();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

Status check_net_members(const nccl::ncclNet_v11_t* n) {
  return check("ncclNetPlugin_v11", {{"name", n->name != nullptr},
                                     {"init", n->init != nullptr},
                                     {"devices", n->devices != nullptr},
                                     {"getProperties", n->getProperties != nullptr},
                                     {"listen", n->listen != nullptr},
                                     {"connect", n->connect != nullptr},
                                     {"accept", n->accept != nullptr},
                                     {"regMr", n->regMr != nullptr},
                                     {"deregMr", n->deregMr != nullptr},
                                     {"isend", n->isend != nullptr},
                                     {"irecv", n->irecv != nullptr},
                                     {"test", n->test != nullptr},
                                     {"closeSend", n->closeSend != nullptr},
                                     {"closeRecv", n->closeRecv != nullptr},
                                     {"closeListen", n->closeListen != nullptr},
                                     {"finalize", n->finalize != nullptr}});
}

Status check_collnet_members(const nccl::ncclCollNet_v11_t* c) {
  return check("ncclCollNetPlugin_v11", {{"name", c->name != nullptr},
                                         {"init", c->init != nullptr},
                                         {"devices", c->devices != nullptr},
                                         {"getProperties", c->getProperties != nullptr},
                                         {"listen", c->listen != nullptr},
                                         {"connect", c->connect != nullptr},
                                         {"reduceSupport", c->reduceSupport != nullptr},
                                         {"regMr", c->regMr != nullptr},
                                         {"deregMr", c->deregMr != nullptr},
                                         {"iallreduce", c->iallreduce != nullptr},
                                         {"test", c->test != nullptr},
                                         {"closeColl", c->closeColl != nullptr},
                                         {"closeListen", c->closeListen != nullptr},
                                         {"finalize", c->finalize != nullptr}});
}

Status net_init(const nccl::ncclNet_v11_t* net, int rank, uint64_t comm_id, Bootstrap* bs,
                void** ctx, NetDevice* dev) {
  nccl::ncclNetCommConfig_v11_t config{};
  config.trafficClass = nccl::NCCL_NET_TRAFFIC_CLASS_UNDEF;
  DRV_CALL(rank, "net.init", net->init(ctx, comm_id, &config, driver_logger, nullptr));
  DRV_CALL(rank, "net.devices", net->devices(&dev->ndev));
  if (dev->ndev <= 0) {
    return internal_error("net.devices reported " + std::to_string(dev->ndev) +
                          " devices; NCCL would not use this plugin");
  }
  nccl::ncclNetProperties_v11_t props{};
  DRV_CALL(rank, "net.getProperties(0)", net->getProperties(0, &props));
  dev->name = props.name != nullptr ? props.name : "(null)";
  dev->speed_mbps = props.speed;
  dev->ptr_support = props.ptrSupport;
  dev->latency_us = props.latency;
  dev->max_recvs = props.maxRecvs;
  if ((props.ptrSupport & nccl::NCCL_PTR_HOST) == 0) {
    return internal_error("net device 0 does not support NCCL_PTR_HOST (ptrSupport=" +
                          std::to_string(props.ptrSupport) + ")");
  }
  return agree_latency(bs, *dev);
}

Status agree_latency(Bootstrap* bs, const NetDevice& dev) {
  std::vector<std::string> all;
  CFX_TRY(bs->allgather(
      std::string(reinterpret_cast<const char*>(&dev.latency_us), sizeof dev.latency_us), &all));
  bool same = true;
  std::string list;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(float)) return internal_error("bootstrap: malformed latency");
    float v;
    std::memcpy(&v, all[r].data(), sizeof v);
    same = same && std::memcmp(all[r].data(), all[0].data(), sizeof v) == 0;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%srank %zu: %g us", r == 0 ? "" : ", ", r, double(v));
    list += buf;
  }
  if (same) return Status();
  return internal_error(
      "NCCL would hang: net.getProperties(0).latency differs between ranks (" + list +
      "); NCCL models the network with each rank's own figure, so ranks could choose different "
      "protocols for one collective");
}

Status gather_threads_and_fds(Bootstrap* bs, std::string* out) {
  const auto count = [](const char* dir) {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir),
                                             std::filesystem::directory_iterator()));
  };
  const std::string mine =
      std::to_string(count("/proc/self/task")) + " " + std::to_string(count("/proc/self/fd"));
  std::vector<std::string> all;
  CFX_TRY(bs->allgather(mine, &all));
  size_t tmax = 0, fmax = 0, tmin = SIZE_MAX, fmin = SIZE_MAX;
  for (const std::string& a : all) {
    const size_t t = std::stoul(a), f = std::stoul(a.substr(a.find(' ') + 1));
    tmax = std::max(tmax, t);
    tmin = std::min(tmin, t);
    fmax = std::max(fmax, f);
    fmin = std::min(fmin, f);
  }
  *out = "threads " + std::to_string(tmin) + ".." + std::to_string(tmax) + ", fds " +
         std::to_string(fmin) + ".." + std::to_string(fmax);
  return Status();
}

Status agree_max_recvs(Bootstrap* bs, int max_recvs) {
  std::vector<std::string> all;
  CFX_TRY(bs->allgather(std::to_string(max_recvs), &all));
  std::string list;
  bool same = true;
  for (size_t r = 0; r < all.size(); ++r) {
    same = same && all[r] == all[0];
    list += (r ? ", rank " : "rank ") + std::to_string(r) + ": " + all[r];
  }
  if (same) return Status();
  return internal_error("NCCL would hang: net.getProperties(0).maxRecvs differs between ranks (" +
                        list +
                        "); a proxy that shares connections (maxRecvs > 1) connects once "
                        "per peer while one that does not waits for a connection per sender");
}

Status agree_comm_id(Bootstrap* bs, uint64_t* id) {
  uint64_t mine = 0;
  if (bs->rank() == 0) {
    std::random_device rd;
    mine = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }
  std::vector<std::string> all;
  CFX_TRY(bs->allgather(std::string(reinterpret_cast<char*>(&mine), sizeof mine), &all));
  if (all[0].size() != sizeof mine) return internal_error("bootstrap: malformed comm id");
  std::memcpy(id, all[0].data(), sizeof mine);
  return Status();
}

RunInfo describe_run(const Options& o, const LoadedPlugin& p, const NetDevice& d, int nranks) {
  RunInfo info;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  char when[64] = {};
  std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  info.add("date", when);
  info.add("host", host);
  info.add("plugin", p.path);
  info.add("plugin_opened_as", p.opened_as);
  info.add("net_symbol", p.net_symbol);
  info.add("net_versions", join(p.net_versions));
  info.add("collnet_symbol", p.collnet_symbol);
  info.add("collnet_versions", join(p.collnet_versions));
  info.add("net_name", p.net != nullptr && p.net->name != nullptr ? p.net->name : "");
  info.add("net_ndev", std::to_string(d.ndev));
  info.add("net_dev0_name", d.name);
  info.add("net_dev0_speed_mbps", std::to_string(d.speed_mbps));
  info.add("nranks", std::to_string(nranks));
  std::vector<std::string> modes, dtypes, ops;
  for (Mode m : o.modes) modes.push_back(mode_name(m));
  for (DType t : o.dtypes) dtypes.emplace_back(dtype_name(t));
  for (Op op : o.ops) ops.emplace_back(op_name(op));
  info.add("modes", join(modes));
  info.add("dtypes", join(dtypes));
  info.add("ops", join(ops));
  info.add("minbytes", std::to_string(o.minbytes));
  info.add("maxbytes", std::to_string(o.maxbytes));
  info.add("stepfactor", std::to_string(o.stepfactor));
  info.add("iters", std::to_string(o.iters));
  info.add("warmup", std::to_string(o.warmup));
  info.add("chunk_bytes", std::to_string(o.chunk_bytes));
  info.add("inflight", std::to_string(o.inflight));
  info.add("inplace", o.inplace ? "1" : "0");
  info.add("deterministic", o.deterministic ? "1" : "0");
  info.add("check_iters", o.check_iters ? "1" : "0");
  info.add("ring_fraction", std::to_string(o.ring_fraction));
  info.add("seed", std::to_string(o.seed));
  info.add("idle_sleep_us", std::to_string(o.idle_sleep_us));
  info.add("reduce_isa", std::string(conflux::reduce::active_isa()));
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("CONFLUX_", 0) == 0 || kv.rfind("NCCL_", 0) == 0) {
      size_t eq = kv.find('=');
      info.add("env." + kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1));
    }
  }
  return info;
}

}  // namespace conflux::driver
