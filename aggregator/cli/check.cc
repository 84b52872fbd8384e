// SPDX-License-Identifier: Apache-2.0
#include "aggregator/cli/check.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "conflux/client/config.h"
#include "conflux/client/discovery.h"
#include "conflux/client/engine.h"
#include "conflux/common/json_text.h"
#include "conflux/common/status.h"
#include "core/net_delegate.h"
#include "cuda/cuda_driver.h"
#include "fmt/format.h"
#include "nccl/topo_gdr.h"

namespace conflux::cli {
namespace {

using Clock = std::chrono::steady_clock;

// One AllReduce of `count` floats on a one-rank engine: ok when exact (the input back), else
// why not: timed_out (no result in time), unavailable (the AllReduce failed) or internal_error
// (wrong values).
Status round_trip(client::Engine& e, size_t count, int timeout_ms, double* us) {
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(i % 1021) * 0.5f;
  const auto t0 = Clock::now();
  const uint64_t h = e.allreduce(in.data(), out.data(), count, DType::kFloat32, Op::kSum);
  std::string err;
  client::RequestState s = client::RequestState::kPending;
  while (s == client::RequestState::kPending) {
    s = e.wait(h, std::chrono::milliseconds(10), &err);
    if (s == client::RequestState::kPending &&
        Clock::now() - t0 > std::chrono::milliseconds(timeout_ms)) {
      e.abort("conflux check: no result in time");
      return timed_out(fmt::format(
          "no result within {} ms (UDP to the data ports blocked or lost?)", timeout_ms));
    }
  }
  *us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  if (s != client::RequestState::kDone) return unavailable("AllReduce failed: " + err);
  if (out != in) return internal_error("AllReduce returned wrong values");
  return {};
}

AggregatorCheck check_one(const client::Endpoint& ep, const CheckOptions& o) {
  AggregatorCheck c;
  c.endpoint = ep.to_string();
  client::ClientConfig cfg;
  cfg.aggregators = {ep};
  std::random_device rd;
  cfg.job_key = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  cfg.n_workers = 1;
  cfg.rank = 0;
  cfg.window_slots = 16;
  cfg.payload_bytes = o.payload_bytes;
  cfg.secret = o.secret;
  cfg.bind_addr = o.bind_addr;
  cfg.connect_timeout = std::chrono::milliseconds(o.timeout_ms);
  cfg.join_timeout = std::chrono::milliseconds(o.timeout_ms);
  cfg.aggregator_timeout = std::chrono::milliseconds(std::max(o.timeout_ms, 1000));
  auto e = client::Engine::create(cfg, &c.error);
  if (e == nullptr) return c;
  c.joined = true;
  const client::AggregatorInfo& a = e->aggregators().front();
  c.granted_slots = a.granted_slots;
  c.payload_bytes = a.payload_bytes;
  c.data_mac = a.data_mac;
  c.deterministic = a.deterministic;
  c.multicast = a.multicast;
  c.group = a.group;
  // Full packets through every slot (a window's worth), then one-packet round trips.
  const size_t per_packet = e->payload_bytes() / sizeof(float);
  double us = 0;
  if (Status st = round_trip(*e, per_packet * a.granted_slots, o.timeout_ms, &us); !st.ok()) {
    c.error = st.message();
    return c;
  }
  std::vector<double> rtts;
  for (int i = 0; i < 21; ++i) {
    if (Status st = round_trip(*e, per_packet, o.timeout_ms, &us); !st.ok()) {
      c.error = st.message();
      return c;
    }
    rtts.push_back(us);
  }
  std::nth_element(rtts.begin(), rtts.begin() + 10, rtts.end());
  c.rtt_us = rtts[10];
  c.round_trip = true;
  return c;
}

void quiet_logger(nccl::ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

// The delegate's devices with the gdr bit NCCL computes for each: CollNet describes the same
// devices (it mirrors the net), first, so the net's own ptrSupport decides.
void describe_nics(plugin::NetDelegate& d, CheckReport* r) {
  int ndev = 0;
  if (d.initProcess(quiet_logger, nullptr) != plugin::Status::kOk ||
      d.devices(&ndev) != plugin::Status::kOk) {
    return;
  }
  std::vector<nccl::NicDescription> descs;
  for (int i = 0; i < ndev; ++i) {
    plugin::NetProperties p;
    if (d.getProperties(i, &p) != plugin::Status::kOk) continue;
    descs.push_back({p.name != nullptr ? p.name : "?", p.ptrSupport});
  }
  for (const nccl::NicGdr& n : nccl::topo_gdr(descs, descs, /*dmabuf_usable=*/true)) {
    int ptr = 0;
    for (const nccl::NicDescription& x : descs) ptr = x.name == n.name ? x.ptr_support : ptr;
    r->nics.push_back({n.name, ptr, n.gdr});
  }
}

// What CollNet does with the memory NCCL hands it on these NICs.
void describe_device_memory(CheckReport* r) {
  const cuda::Api* api = nullptr;
  const Status loaded = cuda::driver(&api);
  r->cuda = loaded.ok();
  bool any_gdr = false;
  for (const NicCheck& n : r->nics) any_gdr = any_gdr || n.gdr;
  if (!any_gdr) {
    r->device_memory = "NCCL hands CollNet pinned host memory (no NIC with gdr 1)";
  } else if (api != nullptr) {
    r->device_memory = fmt::format(
        "NCCL hands CollNet device memory (gdr 1): accepted, staged through pinned host memory "
        "(CUDA driver {})",
        api->version);
  } else {
    r->device_memory = "NCCL hands CollNet device memory (gdr 1), which it cannot take here (" +
                       loaded.message() + "): NCCL would run the job without CollNet";
    r->device_ok = false;
  }
}

// Which net would carry point-to-point traffic: the delegate is loaded as the plugin loads it.
void describe_p2p(const CheckOptions& o, CheckReport* r) {
  if (o.net_delegate.empty()) {
    r->p2p_net =
        "point-to-point traffic: Conflux's TCP net (on InfiniBand/RoCE set CONFLUX_NET_DELEGATE "
        "to the cluster's net plugin)";
    return;
  }
  std::unique_ptr<plugin::NetDelegate> d;
  const Status loaded = plugin::NetDelegate::load(o.net_delegate, &d);
  const std::string& why = loaded.message();
  if (loaded.ok()) {
    r->p2p_net =
        fmt::format("point-to-point traffic: the delegate net '{}' (ncclNetPlugin_v{} of {})",
                    d->name(), d->version(), o.net_delegate);
    describe_nics(*d, r);
  } else if (o.net_delegate_fallback) {
    r->p2p_net = why +
                 ": point-to-point traffic would use Conflux's TCP net "
                 "(CONFLUX_NET_DELEGATE_FALLBACK=1)";
  } else {
    r->p2p_net = why + ": NCCL's init would fail (CONFLUX_NET_DELEGATE_FALLBACK=0)";
    r->p2p_ok = false;
  }
}

}  // namespace

CheckReport run_check(const CheckOptions& o) {
  CheckReport r;
  describe_p2p(o, &r);
  describe_device_memory(&r);
  std::vector<client::Endpoint> eps;
  std::string err;
  if (o.aggregators.empty()) {
    r.verdict =
        "no aggregators given (--aggregators or CONFLUX_AGGREGATORS): the plugin would "
        "decline CollNet and run every collective on the worker ring";
    return r;
  }
  // dns:NAME:PORT entries, resolved as rank 0 of a job resolves them (client/discovery.h).
  std::string list = o.aggregators;
  if (client::has_dns_entries(o.aggregators)) {
    if (!client::expand_dns(o.aggregators, std::chrono::milliseconds(o.timeout_ms), &list, &err)) {
      r.verdict = "CONFLUX_AGGREGATORS: " + err + ": the plugin would decline CollNet";
      return r;
    }
    r.resolved = list;
  }
  if (!client::parse_endpoints(list, &eps, &err)) {
    r.verdict = "CONFLUX_AGGREGATORS: " + err + ": the plugin would decline CollNet";
    return r;
  }
  for (const client::Endpoint& ep : eps) r.aggregators.push_back(check_one(ep, o));
  const auto bad = std::find_if(r.aggregators.begin(), r.aggregators.end(),
                                [](const AggregatorCheck& c) { return !c.round_trip; });
  r.usable = bad == r.aggregators.end();
  if (r.usable) {
    uint32_t payload = UINT32_MAX;
    for (const AggregatorCheck& c : r.aggregators) payload = std::min(payload, c.payload_bytes);
    const bool all_mc = std::all_of(r.aggregators.begin(), r.aggregators.end(),
                                    [](const AggregatorCheck& c) { return c.multicast; });
    r.verdict = fmt::format(
        "a job would stripe its AllReduce over {} aggregator(s), {} B per packet{}{}",
        r.aggregators.size(), payload,
        r.aggregators.front().data_mac ? ", every packet signed (data MAC)" : "",
        all_mc ? ", results by multicast (if every rank's host receives the groups too)" : "");
  } else {
    r.verdict = fmt::format(
        "the plugin would decline CollNet and run every collective on the worker ring: {}: {}",
        bad->endpoint, bad->error);
  }
  return r;
}

std::string check_table(const CheckReport& r) {
  std::string out;
  if (!r.aggregators.empty()) {
    out =
        fmt::format("{:<24} {:<6} {:<10} {:>6} {:>8} {:<4} {:<9} {:>9}  {}\n", "AGGREGATOR", "JOIN",
                    "ROUNDTRIP", "SLOTS", "PAYLOAD", "MAC", "RESULTS", "RTT(us)", "PROBLEM");
  }
  for (const AggregatorCheck& c : r.aggregators) {
    out += fmt::format("{:<24} {:<6} {:<10} {:>6} {:>8} {:<4} {:<9} {:>9.0f}  {}\n", c.endpoint,
                       c.joined ? "ok" : "FAILED", c.round_trip ? "ok" : "FAILED", c.granted_slots,
                       c.payload_bytes, c.data_mac ? "on" : "off",
                       c.multicast ? "multicast" : "unicast", c.rtt_us, c.error);
  }
  if (!r.resolved.empty()) out += "aggregators resolved: " + r.resolved + "\n";
  out += r.verdict + "\n" + r.p2p_net + "\n";
  for (const NicCheck& n : r.nics) {
    out += fmt::format("NIC {}: ptrSupport {:#x}, gdr {} (CollNet mirrors the net's device)\n",
                       n.name, n.ptr_support, n.gdr ? 1 : 0);
  }
  return out + "device memory: " + r.device_memory + "\n";
}

std::string check_json(const CheckReport& r) {
  json::Json aggregators = json::Json::array();
  for (const AggregatorCheck& c : r.aggregators) {
    aggregators.push_back({{"endpoint", c.endpoint},
                           {"joined", c.joined},
                           {"round_trip", c.round_trip},
                           {"granted_slots", c.granted_slots},
                           {"payload_bytes", c.payload_bytes},
                           {"data_mac", c.data_mac},
                           {"deterministic", c.deterministic},
                           {"multicast", c.multicast},
                           {"group", c.group},
                           {"rtt_us", json::fixed(c.rtt_us, 1)},
                           {"error", c.error}});
  }
  json::Json nics = json::Json::array();
  for (const NicCheck& n : r.nics) {
    nics.push_back({{"name", n.name}, {"ptr_support", n.ptr_support}, {"gdr", n.gdr}});
  }
  const json::Json out = {{"usable", r.usable},
                          {"verdict", r.verdict},
                          {"aggregators", std::move(aggregators)},
                          {"p2p_net", r.p2p_net},
                          {"p2p_ok", r.p2p_ok},
                          {"nics", std::move(nics)},
                          {"cuda", r.cuda},
                          {"device_memory", r.device_memory},
                          {"device_ok", r.device_ok},
                          {"resolved", r.resolved}};
  return json::one_line(out) + "\n";
}

}  // namespace conflux::cli
