// CollNet setup: contexts, devices, listen, the collective connect and its agreement.
#include <strings.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collnet/coll_comm.h"
#include "collnet/collnet_api.h"
#include "collnet/path_model.h"
#include "collnet/ring_exchange.h"
#include "collnet/split.h"
#include "collnet/test_hooks.h"
#include "collnet/tree_layout.h"
#include "conflux/protocol/control.h"
#include "core/plugin_state.h"
#include "net/log.h"
#include "net/transport.h"

namespace conflux::plugin {
namespace {

using net::kLogColl;
using net::kLogInit;

constexpr uint32_t kHandleMagic = 0x4346434e;  // "CFCN"
struct CollHandle {
  uint32_t magic;
  uint32_t version;
  uint8_t ring[net::wire::kHandleBytes];
};
static_assert(sizeof(CollHandle) <= size_t(nccl::NCCL_NET_HANDLE_MAXSIZE));

struct CollListen {
  static constexpr uint32_t kMagic = 0x434c5354;
  uint32_t magic = kMagic;
  int dev = 0;
  std::unique_ptr<net::ListenComm> ring;
  std::optional<uint64_t> comm_id;  // NCCL's commId (v11 contexts), the tuner's key
};

// The one-element AllReduces collConnect times for the tuner's model (step 6), and the one
// that agrees on the result: every communicator's first requests.
constexpr int kLatencyProbes = 9;
// The connect's bulk probe: one AllReduce of 1 MiB, timed for the tuner's model.
constexpr size_t kBulkProbeFloats = 256 * 1024;
// NCCL's smallest CollNetChain AllReduce request: one staging region, 32 KiB at least
// (path_model.h min_request_bytes).
constexpr size_t kNcclMinCollNetRequest = 32 * 1024;
constexpr uint32_t kConnectRequests = kLatencyProbes + 2;  // + the bulk probe and the max

// What each rank tells the others at the end of connect.
// The split inputs travel with it: every rank uses the same ring fraction, rank 0's setting,
// and with "auto" the slowest link and the smallest aggregator capacity any rank saw.
struct Verdict {
  uint8_t ok = 0;
  char reason[127] = {};
  double ring_fraction = 0;  // CONFLUX_RING_FRACTION here (kAutoFraction: auto)
  int64_t ring_min_us = 0;   // CONFLUX_RING_MIN_US here (rank 0's is used)
  double link_mbps = 0;
  double capacity_mbps = 0;
  double grant_mbps = 0;     // sum of its aggregators' grants (Capacity share_mbps) now
  double hop_us = 0;         // one hop of the worker ring, as this rank measured it at connect
  double measured_mbps = 0;  // what its link to rank+1 delivered at connect (0: not measured)
  // CONFLUX_AGGREGATOR_MBPS here (rank 0's is used): an operator's figure for the aggregators
  // wins over the connect's probe, as CONFLUX_LINK_MBPS wins over the link's.
  double aggregator_mbps = 0;
  int64_t staging_chunk = 0;  // CONFLUX_STAGING_CHUNK here (rank 0's is used)
};

// The smallest value of a Verdict field over every rank.
double smallest(const std::vector<Verdict>& all, double Verdict::*field) {
  double m = all[0].*field;
  for (const Verdict& v : all) m = std::min(m, v.*field);
  return m;
}

double agreed_ring_fraction(const std::vector<Verdict>& all, int nranks) {
  if (all[0].ring_fraction != kAutoFraction) return all[0].ring_fraction;
  return collnet::auto_ring_fraction(nranks, smallest(all, &Verdict::link_mbps),
                                     smallest(all, &Verdict::capacity_mbps));
}

double largest_hop_us(const std::vector<Verdict>& all) {
  double m = 0;
  for (const Verdict& v : all) m = std::max(m, v.hop_us);
  return m;
}

// CONFLUX_RING_MIN_US (rank 0's) in bytes at the slowest link any rank reported. With the
// measured split the controller adds its own floor from the ring's hop latency
// (SplitController::min_ring_bytes); CONFLUX_RING_MIN_US=0 turns both off.
size_t ring_min_bytes(const std::vector<Verdict>& all) {
  const double link = std::max(smallest(all, &Verdict::link_mbps), 0.0);
  return static_cast<size_t>(static_cast<double>(all[0].ring_min_us) * link / 8);
}

// Identical on every rank: derived from every rank's handle, unique per communicator.
uint64_t job_key(void* const* handles, int nranks) {
  std::vector<uint8_t> all;
  for (int i = 0; i < nranks; ++i) {
    const auto* h = static_cast<const uint8_t*>(handles[i]);
    all.insert(all.end(), h, h + sizeof(CollHandle));
  }
  return proto::siphash24(0x436f6e666c757831ULL, 0x436f6c6c4e657431ULL, all);
}

client::ClientConfig engine_config(const Config& c, uint64_t key, int nranks, int rank,
                                   const collnet::TreeCounts& tree, std::string* error) {
  client::ClientConfig cfg;
  if (!client::parse_endpoints(c.aggregators, &cfg.aggregators, error)) {
    *error = "CONFLUX_AGGREGATORS: " + *error;
    return cfg;
  }
  cfg.job_key = key;
  cfg.n_workers = static_cast<uint32_t>(nranks);
  cfg.rank = static_cast<uint32_t>(rank);
  // A reduction tree (SPEC.md §7): ranks under each leaf, and under each level above it.
  cfg.served_ranks = tree.served;
  cfg.served_up_ranks = tree.served_up;
  cfg.window_slots = static_cast<uint32_t>(c.windowSlots);
  cfg.payload_bytes = static_cast<uint32_t>(c.payloadBytes);
  cfg.deterministic = c.deterministic;
  cfg.secret = c.secret;
  cfg.aggregator_timeout = std::chrono::milliseconds(c.aggregatorTimeoutMs);
  cfg.congestion.enabled = c.congestionControl;
  cfg.udp_offload = c.udpOffload;
  cfg.spin_us = static_cast<uint32_t>(c.busyPollUs);
  cfg.spin_max_bytes = c.busyPollMaxBytes;
  cfg.bulk_wake = std::chrono::microseconds(c.bulkWakeUs);
  cfg.caller_progress = c.callerProgress;
  cfg.multicast = strcasecmp(c.multicast.c_str(), "on") == 0    ? client::MulticastMode::kOn
                  : strcasecmp(c.multicast.c_str(), "off") == 0 ? client::MulticastMode::kOff
                                                                : client::MulticastMode::kAuto;
  // A request without results for this long fails the engine too, so a rank that stops
  // hearing the aggregator (while its control channel lives) starts the failover.
  cfg.stall_timeout = 4 * cfg.aggregator_timeout;
  cfg.join_timeout = std::chrono::milliseconds(c.joinTimeoutMs);
  collnet::hooks::engineFaults(c, rank, &cfg);
  cfg.log = [](client::LogLevel level, std::string_view msg) {
    if (level >= client::LogLevel::kWarn) {
      CFX_WARN(kLogColl, "%.*s", static_cast<int>(msg.size()), msg.data());
    } else if (level == client::LogLevel::kInfo) {
      CFX_INFO(kLogColl, "%.*s", static_cast<int>(msg.size()), msg.data());
    }
  };
  return cfg;
}

// What each rank tells the others once every aggregator of its list answered its Join or was
// given up (ClientConfig::join_agree): the entries it joined, and why not the others.
struct JoinOutcome {
  uint64_t joined = 0;  // bit i: entry i of CONFLUX_AGGREGATORS (stripe i)
  char why[184] = {};
};

// The agreement on the aggregators a job keeps, over connect's own ring: every rank keeps the
// entries every rank joined (the AND of the JoinOutcomes), so a striped job goes on without an
// aggregator that refused it (a draining daemon). While its joins wait, a rank looks at rank-1's
// outcome (the allgather's first step, received early): an entry rank-1 did not join will be
// left out anyway, so the join stops waiting for it. That carries a refusal around the ring in
// one hop per rank, instead of every rank waiting for the join timeout of an aggregator whose
// job can no longer form (a tree whose other leaf refused the job: the leaf's Join at the root
// waits for a subtree that never comes).
class JoinExchange {
 public:
  JoinExchange(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
               std::chrono::milliseconds timeout)
      : next_(next),
        prev_(prev),
        rank_(rank),
        nranks_(nranks),
        timeout_(timeout),
        all_(static_cast<size_t>(nranks)) {}

  // ClientConfig::join_peers.
  bool peek(uint64_t* alive) {
    if (nranks_ < 2 || ran_ || failed_) return false;
    bool arrived = false;
    if (collnet::ring_allgather_post_first(prev_, rank_, nranks_, all_.data(), sizeof(JoinOutcome),
                                           &early_) != Status::kOk ||
        collnet::ring_allgather_test_first(&early_, &arrived) != Status::kOk) {
      failed_ = true;  // the allgather below reports it
      return false;
    }
    if (!arrived) return false;
    *alive = all_[static_cast<size_t>((rank_ + nranks_ - 1) % nranks_)].joined;
    return true;
  }

  // ClientConfig::join_agree; also run with joined = 0 by a rank whose engine failed before it
  // joined anything, so that every rank takes part exactly once.
  std::string agree(uint64_t joined, const std::string& why, uint64_t* agreed) {
    ran_ = true;
    JoinOutcome mine;
    mine.joined = joined;
    std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
    *agreed = joined;
    if (nranks_ > 1) {
      // Ranks come here up to one join timeout apart, as to the verdicts.
      const Status st =
          collnet::ring_allgather(next_, prev_, rank_, nranks_, &mine, all_.data(),
                                  sizeof(JoinOutcome), 2 * timeout_, failed_ ? nullptr : &early_);
      if (st != Status::kOk) {
        return "agreeing on the aggregators joined failed (" + std::string(net::toString(st)) + ")";
      }
      for (const JoinOutcome& o : all_) *agreed &= o.joined;
    } else {
      all_[0] = mine;
    }
    agreed_ = *agreed;
    if (*agreed == 0) {
      const int r = cause(~uint64_t{0});
      if (r >= 0) {
        return "no aggregator joined on every rank (rank " + std::to_string(r) + ": " +
               all_[static_cast<size_t>(r)].why + ")";
      }
      return "no aggregator joined on every rank" + (why.empty() ? "" : " (" + why + ")");
    }
    return "";
  }

  bool ran() const { return ran_; }

  // Rank 0: one line per entry of its list left out on every rank, with the first reason a rank
  // gave (an aggregator that refused: a draining daemon, no capacity; or one not reached).
  void log_left_out(const Config& cfg) const {
    if (rank_ != 0 || agreed_ == 0) return;
    std::vector<client::Endpoint> eps;
    std::string unused;
    if (!client::parse_endpoints(cfg.aggregators, &eps, &unused)) return;
    const int kept = std::popcount(agreed_);
    for (size_t i = 0; i < eps.size() && i < 64; ++i) {
      if ((agreed_ >> i) & 1) continue;
      const int r = cause(uint64_t{1} << i);
      const std::string why =
          r < 0 ? "not joined by every rank"
                : "rank " + std::to_string(r) + ": " + all_[static_cast<size_t>(r)].why;
      CFX_WARN(kLogColl | kLogInit,
               "CollNet connect: aggregator %s (entry %zu of CONFLUX_AGGREGATORS) left out on "
               "every rank (%s); the job is striped over the other %d",
               eps[i].to_string().c_str(), i, why.c_str(), kept);
    }
  }

 private:
  // The rank whose reason best explains why an entry of `entries` was left out: first a rank
  // refused outright (e.g. shutting_down, no_capacity), then one whose rendezvous ended
  // (join_timeout: its aggregator gave up when a rank that had given up left), never one that
  // only gave up because another rank could not join; -1: none said why.
  int cause(uint64_t entries) const {
    for (int pass = 0; pass < 2; ++pass) {
      for (int r = 0; r < nranks_; ++r) {
        const JoinOutcome& o = all_[static_cast<size_t>(r)];
        if ((~o.joined & entries) == 0 || o.why[0] == '\0' ||
            std::strstr(o.why, "another rank could not") != nullptr) {
          continue;
        }
        if (pass == 0 && (std::strstr(o.why, "join_timeout") != nullptr ||
                          std::strstr(o.why, "no JoinAck within") != nullptr)) {
          continue;
        }
        return r;
      }
    }
    return -1;
  }

  net::SendComm* next_;
  net::RecvComm* prev_;
  int rank_, nranks_;
  std::chrono::milliseconds timeout_;
  std::vector<JoinOutcome> all_;
  collnet::EarlyFirstRecv early_;
  bool failed_ = false;
  bool ran_ = false;
  uint64_t agreed_ = 0;
};

std::unique_ptr<client::Engine> join_aggregators(const Config& c, uint64_t key, int nranks,
                                                 int rank, const collnet::TreeCounts& tree,
                                                 JoinExchange* exchange, std::string* why) {
  if (c.aggregators.empty()) {
    *why = "CONFLUX_AGGREGATORS is not set";
    return nullptr;
  }
  std::string error;
  client::ClientConfig cfg = engine_config(c, key, nranks, rank, tree, &error);
  if (!error.empty()) {
    *why = error;
    return nullptr;
  }
  cfg.join_agree = [exchange](uint64_t joined, const std::string& w, uint64_t* agreed) {
    return exchange->agree(joined, w, agreed);
  };
  cfg.join_peers = [exchange](uint64_t* alive) { return exchange->peek(alive); };
  auto engine = client::Engine::create(cfg, &error);
  if (!engine) *why = error;
  return engine;
}

}  // namespace

Status collInit(void** ctx, uint64_t commId, nccl::ncclDebugLogger_t log) {
  return openContext(ctx, NetContext::kCollMagic, commId, nccl::NCCL_NET_TRAFFIC_CLASS_UNDEF, log);
}

Status collFinalize(void* ctx) {
  return closeContext(ctx, NetContext::kCollMagic, "CollNet finalize", kLogColl);
}

Status collInitLegacy(nccl::ncclDebugLogger_t log) { return netInitLegacy(log); }

// CollNet's devices. Without a delegate net they are the net's (Conflux's TCP devices). With one
// (CONFLUX_NET_DELEGATE) they are the delegate's, one for one, because NCCL's topology
// (graph/topo.cc, ncclTopoPopulateNics; NCCL 2.28 and 2.30) describes CollNet's devices first
// and the net's after, merging a net device into the CollNet device of the same *name*, keeping
// the first description's speed, latency, port, guid and gdr, and taking the net's index: a
// CollNet device named otherwise would be a NIC of its own, which NCCL 2.30 leaves out of the
// CollNet graph (CollNet then finds no channel and is disabled) and 2.28 may confuse with the
// net device of the same index. So each CollNet device carries the delegate device's name, PCI
// path, guid, speed, port and latency, and Conflux's own ptrSupport: host memory only, which
// makes the merged NIC's gdr 0 — point-to-point traffic over the delegate then stages through
// host memory on that NIC instead of GPUDirect RDMA (the price of a host-memory CollNet; see
// nccl_plugin/README.md, "Delegate net"). CollNet's own traffic leaves by the TCP device with
// the delegate device's PCI path (the same NIC), else by TCP device 0.
namespace {

// The TCP device on the NIC with PCI path `pciPath` (the same NIC as a delegate device), else 0.
int tcpDeviceAt(const PluginState& s, const char* pciPath) {
  if (pciPath == nullptr || pciPath[0] == '\0') return 0;
  for (int i = 0; i < s.transport().numDevices(); ++i) {
    if (s.transport().device(i).pciPath == pciPath) return i;
  }
  return 0;
}

}  // namespace

Status collDevices(int* ndev) {
  if (NetDelegate* d = activeDelegate()) return d->devices(ndev);
  return netDevices(ndev);
}

int collTransportDevice(int dev) {
  PluginState* s = PluginState::get();
  NetDelegate* d = s != nullptr ? s->delegate() : nullptr;
  if (d == nullptr) return dev;
  NetProperties theirs;
  return d->getProperties(dev, &theirs) == Status::kOk ? tcpDeviceAt(*s, theirs.pciPath) : 0;
}

Status collListen(void* ctx, int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return Status::kInvalidArgument;
  *listenComm = nullptr;
  PluginState* s = PluginState::get();
  if (s == nullptr) {
    CFX_WARN(kLogColl, "CollNet listen called before init");
    return Status::kInvalidUsage;
  }
  const int tcpDev = collTransportDevice(dev);
  if (!s->transport().validDevice(tcpDev)) {
    CFX_WARN(kLogColl, "CollNet listen: no device %d", dev);
    return Status::kInvalidArgument;
  }
  auto l = std::make_unique<CollListen>();
  l->dev = tcpDev;
  const auto* context = static_cast<const NetContext*>(ctx);
  if (context != nullptr && context->magic == NetContext::kCollMagic) {
    l->comm_id = context->commId;
  }
  net::ConnectHandle ring{};
  CFX_RETURN_IF_ERROR(s->transport().listen(tcpDev, &ring, &l->ring));
  CollHandle h{kHandleMagic, 1, {}};
  std::memcpy(h.ring, ring.bytes, sizeof h.ring);
  std::memset(handle, 0, nccl::NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &h, sizeof h);
  *listenComm = l.release();
  return Status::kOk;
}

namespace {

// The steps of collConnect, in order. Each that fails logs one warning naming the rank.

bool valid_handles(void* const* handles, int nranks) {
  for (int i = 0; i < nranks; ++i) {
    CollHandle h;
    std::memcpy(&h, handles[i], sizeof h);
    if (h.magic != kHandleMagic || h.version != 1) {
      CFX_WARN(kLogColl, "CollNet connect: handle of rank %d is not a Conflux handle", i);
      return false;
    }
  }
  return true;
}

// The connection pair that carries connect's own exchanges (names, hop time, verdicts, probe
// outcomes). It stays with collConnect, which runs them on NCCL's service thread, and closes
// when connect returns: the communicator's rings belong to its threads once it exists.
struct SetupRing {
  std::unique_ptr<net::SendComm> next;
  std::unique_ptr<net::RecvComm> prev;
};

// 1. The worker rings (the main ring's lanes, the failover ring, the split ring) and the setup
//    pair: connect to rank+1 lanes + 3 times (each completes without the peer's accept), then
//    accept rank-1's connections, in the same order.
Status connect_rings(const PluginState& s, const CollListen& l, const void* next_handle, int rank,
                     int lanes, std::chrono::milliseconds timeout, collnet::CollRings* rings,
                     SetupRing* setup) {
  CollHandle peer;
  std::memcpy(&peer, next_handle, sizeof peer);
  net::ConnectHandle ring;
  std::memcpy(ring.bytes, peer.ring, sizeof ring.bytes);
  Status st = Status::kOk;
  for (int i = 0; i < lanes && st == Status::kOk; ++i) {
    rings->next.emplace_back();
    st = s.transport().connectBlocking(l.dev, ring, timeout, &rings->next.back());
  }
  if (st == Status::kOk) {
    st = s.transport().connectBlocking(l.dev, ring, timeout, &rings->failover_next);
  }
  if (st == Status::kOk) {
    st = s.transport().connectBlocking(l.dev, ring, timeout, &rings->split_next);
  }
  if (st == Status::kOk) st = s.transport().connectBlocking(l.dev, ring, timeout, &setup->next);
  for (int i = 0; i < lanes && st == Status::kOk; ++i) {
    rings->prev.emplace_back();
    st = net::TcpTransport::acceptBlocking(*l.ring, timeout, &rings->prev.back());
  }
  if (st == Status::kOk) {
    st = net::TcpTransport::acceptBlocking(*l.ring, timeout, &rings->failover_prev);
  }
  if (st == Status::kOk) {
    st = net::TcpTransport::acceptBlocking(*l.ring, timeout, &rings->split_prev);
  }
  if (st == Status::kOk) st = net::TcpTransport::acceptBlocking(*l.ring, timeout, &setup->prev);
  if (st != Status::kOk) {
    CFX_WARN(kLogColl, "CollNet connect: rank %d could not build the worker ring (%s)", rank,
             net::toString(st));
  }
  return st;
}

// 2. Which ranks share each aggregator (a reduction tree's leaves), over the ring.
Status exchange_served(const Config& cfg, net::SendComm* next, net::RecvComm* prev, int rank,
                       int nranks, std::chrono::milliseconds timeout, collnet::TreeCounts* tree) {
  std::vector<client::Endpoint> eps;
  collnet::AggregatorChains chains;
  std::string unused;  // a bad list fails the join below, on every rank
  if (client::parse_endpoints(cfg.aggregators, &eps, &unused)) {
    for (const client::Endpoint& e : eps) {
      chains.push_back({e.to_string()});
      chains.back().insert(chains.back().end(), e.above.begin(), e.above.end());
    }
  }
  // The ranks' first use of the ring: allow for ranks that arrive far apart (as below).
  const Status st =
      collnet::exchange_tree_counts(next, prev, rank, nranks, chains, 2 * timeout, tree);
  if (st != Status::kOk) {
    CFX_WARN(kLogColl, "CollNet connect: rank %d: exchanging aggregator names failed (%s)", rank,
             net::toString(st));
  }
  return st;
}

// 1b. One hop of the worker ring: kHopRounds allgathers of one word, each timed; a hop is the
// typical round (typical_round: the first, which brings the ranks together, and outliers left
// out) over the nranks-1 steps of an allgather (microseconds; 0 with one rank, or when the
// ring failed, which the agreement then reports).
double measure_hop_us(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                      std::chrono::milliseconds timeout) {
  constexpr int kHopRounds = 9;
  if (nranks < 2) return 0;
  const uint64_t mine = static_cast<uint64_t>(rank);
  std::vector<uint64_t> all(static_cast<size_t>(nranks));
  std::vector<double> rounds;
  for (int i = 0; i < kHopRounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (collnet::ring_allgather(next, prev, rank, nranks, &mine, all.data(), sizeof mine,
                                timeout) != Status::kOk) {
      return 0;
    }
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
    rounds.push_back(took.count());
  }
  return collnet::typical_round(std::move(rounds)) / (nranks - 1);
}

// 1c. What the link to rank+1 delivers: kLinkRounds ring steps of kLinkProbeBytes, every rank
//     sending and receiving at once as a ring does; the fastest round, in Mbit/s (0 with one
//     rank, or when the ring failed). A NIC reports its own speed, not a slower bottleneck
//     behind it (a veth says 10 Gbit/s over a 1 Gbit/s fabric), so this corrects the prior.
double measure_link_mbps(net::SendComm* next, net::RecvComm* prev, int nranks,
                         std::chrono::milliseconds timeout) {
  constexpr size_t kLinkProbeBytes = size_t{2} << 20;
  constexpr int kLinkRounds = 2;
  if (nranks < 2) return 0;
  std::vector<char> out(kLinkProbeBytes, 1), in(kLinkProbeBytes);
  double best = 0;
  for (int i = 0; i < kLinkRounds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (collnet::ring_shift(next, prev, out.data(), in.data(), kLinkProbeBytes, timeout) !=
        Status::kOk) {
      return 0;
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    best = std::max(best, kLinkProbeBytes * 8.0 / took.count() / 1e6);
  }
  return best;
}

// 3. This rank's verdict after its join (engine: the joined aggregators, or null and `why`).
Verdict local_verdict(const Config& cfg, int dev, int rank, int nranks,
                      const client::Engine* engine, const std::string& why, double measured_mbps) {
  Verdict mine;
  mine.ok = engine != nullptr;
  std::snprintf(mine.reason, sizeof mine.reason, "%s", why.c_str());
  mine.ring_fraction = cfg.ringFraction;
  mine.ring_min_us = cfg.ringMinUs;
  mine.aggregator_mbps = cfg.aggregatorMbps;
  mine.staging_chunk = static_cast<int64_t>(cfg.stagingChunkBytes);
  NetProperties props;
  if (tcpNetProperties(dev, &props) == Status::kOk) mine.link_mbps = props.speed;
  const double nominal = mine.link_mbps;
  mine.link_mbps = collnet::link_prior_mbps(cfg.linkMbps, nominal, measured_mbps);
  if (cfg.linkMbps <= 0 && mine.link_mbps != nominal) {
    CFX_INFO(kLogColl | kLogInit,
             "CollNet connect: rank %d: the link to rank+1 delivered %.0f Mbit/s, the "
             "interface reports %.0f: the split and the tuner start from %.0f",
             rank, measured_mbps, nominal, mine.link_mbps);
  }
  mine.measured_mbps = measured_mbps;
  if (engine != nullptr) {
    std::vector<collnet::AggregatorShare> shares;
    // The grants now (a grant update may have come since the JoinAck): the prior and the
    // grant the controller compares later updates with are the same figures.
    const std::vector<uint32_t> grants = engine->grants();
    for (size_t i = 0; i < grants.size(); ++i) {
      shares.push_back({engine->aggregators()[i].granted_slots,
                        static_cast<uint32_t>(cfg.windowSlots), static_cast<double>(grants[i])});
      mine.grant_mbps += grants[i];
    }
    mine.capacity_mbps =
        collnet::aggregator_capacity_mbps(nranks, mine.link_mbps, cfg.aggregatorMbps, shares);
  }
  return mine;
}

// 4. Agreement: everyone learns every rank's verdict, so all decline or none does.
Status agree(const Config& cfg, net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
             const Verdict& mine, std::chrono::milliseconds timeout, std::vector<Verdict>* all) {
  all->assign(static_cast<size_t>(nranks), Verdict{});
  if (nranks > 1) {
    // Ranks reach this point up to one join timeout apart (a rank that fails fast waits for
    // those still inside Engine::create), so allow two.
    const Status st = collnet::ring_allgather(next, prev, rank, nranks, &mine, all->data(),
                                              sizeof(Verdict), 2 * timeout);
    if (st != Status::kOk) {
      CFX_WARN(kLogColl, "CollNet connect: rank %d: agreement over the ring failed (%s)", rank,
               net::toString(st));
      return st;
    }
  } else {
    (*all)[0] = mine;
  }
  for (int i = 0; i < nranks; ++i) {
    if ((*all)[static_cast<size_t>(i)].ok) continue;
    if (cfg.requireAggregators) {
      CFX_WARN(kLogColl | kLogInit,
               "CONFLUX_REQUIRE_AGGREGATORS=1 and rank %d cannot use the aggregators: %s", i,
               (*all)[static_cast<size_t>(i)].reason);
      return Status::kSystemError;
    }
    CFX_INFO(kLogColl | kLogInit,
             "CollNet declined on every rank: rank %d cannot use the aggregators (%s); NCCL "
             "will use its own algorithms",
             i, (*all)[static_cast<size_t>(i)].reason);
    return Status::kSystemError;
  }
  return Status::kOk;
}

// 5. The communicator's options from the agreed verdicts, with the re-join on survivors.
collnet::CollOptions comm_options(const Config& cfg, const std::vector<Verdict>& all, uint64_t key,
                                  int nranks, int rank, const collnet::TreeCounts& tree,
                                  const client::Engine& engine) {
  collnet::CollOptions opts;
  opts.ring_fraction = agreed_ring_fraction(all, nranks);
  if (all[0].ring_fraction == kAutoFraction && nranks > 1) {
    // Measured while the job runs, from the agreed link and capacity (Mbit/s to bytes/s).
    opts.controller.emplace(nranks, smallest(all, &Verdict::link_mbps) * 1e6 / 8,
                            smallest(all, &Verdict::capacity_mbps) * 1e6 / 8,
                            static_cast<uint32_t>(engine.aggregators().size()));
    // A later grant update (another job joined or left an aggregator) scales R from here.
    opts.controller->set_grant(smallest(all, &Verdict::grant_mbps));
    // Ring shares too small for the ring's latency go through the aggregators.
    if (all[0].ring_min_us > 0) opts.controller->set_hop(largest_hop_us(all) * 1e-6);
    opts.ring_fraction = opts.controller->ring_fraction();
  }
  opts.ring_min_bytes = ring_min_bytes(all);
  if (cfg.callerProgress) {
    opts.idle_poll = std::chrono::microseconds(cfg.busyPollUs);
    opts.inline_completion = true;
  }
  // Every rank cuts NCCL's requests alike, or their sequences of requests would differ.
  opts.staging.chunk_bytes = static_cast<size_t>(all[0].staging_chunk);
  opts.staging.slots = cfg.stagingSlots;
  opts.ring.block_bytes = cfg.ringBlockBytes;
  opts.ring.inflight = cfg.ringInflight;
  opts.ring.timeout = std::chrono::milliseconds(cfg.ringTimeoutMs);
  collnet::hooks::abortAt(cfg, rank, kConnectRequests, &opts);
  std::string unused;
  client::ClientConfig base = engine_config(cfg, key, nranks, rank, tree, &unused);
  collnet::hooks::clearEngineFaults(&base);
  // The entries the engine kept at connect (an aggregator that refused the job is left out on
  // every rank): the re-join's survivors are positions in this list, as in the engine's.
  {
    client::ClientConfig all = base;
    base.aggregators.clear();
    base.served_ranks.clear();
    base.served_up_ranks.clear();
    for (const client::AggregatorInfo& a : engine.aggregators()) {
      base.aggregators.push_back(all.aggregators.at(a.stripe));
      if (!all.served_ranks.empty()) base.served_ranks.push_back(all.served_ranks.at(a.stripe));
      if (!all.served_up_ranks.empty()) {
        base.served_up_ranks.push_back(all.served_up_ranks.at(a.stripe));
      }
    }
  }
  opts.rejoin = [base](const std::vector<size_t>& survivors, uint32_t epoch,
                       std::string* why) -> std::unique_ptr<client::Engine> {
    client::ClientConfig c = base;
    c.aggregators.clear();
    c.served_ranks.clear();
    c.served_up_ranks.clear();
    for (size_t i : survivors) {
      c.aggregators.push_back(base.aggregators.at(i));
      if (!base.served_ranks.empty()) c.served_ranks.push_back(base.served_ranks.at(i));
      if (!base.served_up_ranks.empty()) c.served_up_ranks.push_back(base.served_up_ranks.at(i));
    }
    // A job of its own on each survivor, the same on every rank.
    c.job_key = base.job_key ^ (0x9e3779b97f4a7c15ULL * epoch);
    return client::Engine::create(c, why);
  };
  return opts;
}

// 6. The tuner's model (collnet/path_model.h): the agreed figures of the split, and the time
//    of a one-element AllReduce through CollNet, measured here.
collnet::PathModel path_model(const std::vector<Verdict>& all, const collnet::CollOptions& opts,
                              int nranks) {
  collnet::PathModel m;
  m.nranks = nranks;
  m.link_Bps = smallest(all, &Verdict::link_mbps) * 1e6 / 8;
  m.capacity_Bps = smallest(all, &Verdict::capacity_mbps) * 1e6 / 8;
  m.ring_fraction = opts.ring_fraction;
  m.min_ring_bytes =
      std::max(opts.ring_min_bytes, opts.controller ? opts.controller->min_ring_bytes() : 0);
  m.hop_s = largest_hop_us(all) * 1e-6;
  m.min_request_bytes = kNcclMinCollNetRequest;
  return m;
}

// The probes' buffers: they outlive the CollComm (declared before it), since a probe that
// timed out stays in its queue until the CollComm is destroyed.
struct ProbeBuffers {
  std::vector<float> in = std::vector<float>(kBulkProbeFloats);
  std::vector<float> out = std::vector<float>(kBulkProbeFloats);
};

// One AllReduce of `count` floats of b.in into b.out through `c`, to completion (NCCL's
// proxy thread, too, calls test() in a loop). Fails after `timeout`. *seconds (if given): from
// the request's acceptance to its completion (not the wait for the split's first decision).
Status allreduce_n(collnet::CollComm& c, ProbeBuffers& b, size_t count, Op op,
                   std::chrono::milliseconds timeout, double* seconds = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  collnet::CollRequest* r = nullptr;
  while (r == nullptr) {
    CFX_RETURN_IF_ERROR(c.iallreduce(b.in.data(), b.out.data(), count, DType::kFloat32, op, &r));
    if (r != nullptr) break;
    if (std::chrono::steady_clock::now() > deadline) return Status::kRemoteError;
    std::this_thread::yield();  // the split is not decided yet
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (bool done = false;;) {
    CFX_RETURN_IF_ERROR(collnet::CollComm::test(r, &done, nullptr));
    if (done) {
      if (seconds != nullptr) {
        *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      return Status::kOk;
    }
    if (std::chrono::steady_clock::now() > deadline) return Status::kRemoteError;
    std::this_thread::yield();
  }
}

// One timed AllReduce of `count` ones; every element of the result must be nranks.
Status timed_sum(collnet::CollComm& c, ProbeBuffers& b, size_t count, int nranks,
                 std::chrono::milliseconds timeout, double* seconds) {
  std::fill(b.in.begin(), b.in.begin() + static_cast<ptrdiff_t>(count), 1.0f);
  CFX_RETURN_IF_ERROR(allreduce_n(c, b, count, Op::kSum, timeout, seconds));
  for (size_t i = 0; i < count; ++i) {
    if (b.out[i] != static_cast<float>(nranks)) {
      CFX_WARN(kLogColl, "CollNet connect: a probe AllReduce of 1.0 on %d ranks gave %g", nranks,
               static_cast<double>(b.out[i]));
      return Status::kInternalError;
    }
  }
  return Status::kOk;
}

// What the connect probes measured, agreed by every rank (the slowest rank's figures).
struct ProbeTimes {
  double latency_s = 0;  // the median of the one-element sums
  double bulk_s = 0;     // one sum of kBulkProbeFloats
};

// kLatencyProbes one-element sums, timed (typical_round: the median of all but the first,
// which waits for the last rank to arrive), then one of kBulkProbeFloats (what the path delivers,
// for the tuner's model; a request's size as NCCL issues them); then the largest figures any rank
// measured, by one more AllReduce (max) through the same path, so that every rank holds the
// same. Checks every sum, so a CollNet that gives wrong results fails here, before any data.
Status probe_collnet(collnet::CollComm& c, int nranks, std::chrono::milliseconds timeout,
                     ProbeBuffers& b, ProbeTimes* times) {
  std::vector<double> took;
  for (int i = 0; i < kLatencyProbes; ++i) {
    double d = 0;
    CFX_RETURN_IF_ERROR(timed_sum(c, b, 1, nranks, timeout, &d));
    took.push_back(d);
  }
  double bulk = 0;
  CFX_RETURN_IF_ERROR(timed_sum(c, b, kBulkProbeFloats, nranks, timeout, &bulk));
  b.in[0] = static_cast<float>(collnet::typical_round(std::move(took)));
  b.in[1] = static_cast<float>(bulk);
  CFX_RETURN_IF_ERROR(allreduce_n(c, b, 2, Op::kMax, timeout));
  times->latency_s = b.out[0];
  times->bulk_s = b.out[1];
  return Status::kOk;
}

// 7. Every rank learns every probe's outcome, so all decline or none does. NCCL compares
//    connect results only among the ranks of one node (src/transport.cc): a node whose rank
//    declined alone would run NCCL's algorithms while the others wait in CollNet. A rank
//    whose probe failed comes here early; the others may still be in theirs for up to two
//    join timeouts, hence three.
Status agree_probe(net::SendComm* next, net::RecvComm* prev, int rank, int nranks, Status mine,
                   std::chrono::milliseconds timeout) {
  const uint8_t ok = mine == Status::kOk ? 1 : 0;
  std::vector<uint8_t> all(static_cast<size_t>(nranks), 0);
  const Status st = collnet::ring_allgather(next, prev, rank, nranks, &ok, all.data(), 1, timeout);
  if (st != Status::kOk) {
    CFX_WARN(kLogColl, "CollNet connect: rank %d: agreeing on the probes failed (%s)", rank,
             net::toString(st));
    return st;
  }
  for (int i = 0; i < nranks; ++i) {
    if (all[static_cast<size_t>(i)] != 0) continue;
    CFX_INFO(kLogColl | kLogInit,
             "CollNet declined on every rank: rank %d's probe through the aggregators failed; "
             "NCCL will use its own algorithms",
             i);
    return mine != Status::kOk ? mine : Status::kSystemError;
  }
  return Status::kOk;
}

}  // namespace

Status collConnect(void* const* handles, int nranks, int rank, void* listenComm, void** collComm) {
  if (handles == nullptr || collComm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) {
    return Status::kInvalidArgument;
  }
  *collComm = nullptr;
  auto* l = static_cast<CollListen*>(listenComm);
  PluginState* s = PluginState::get();
  if (l == nullptr || l->magic != CollListen::kMagic || s == nullptr) {
    CFX_WARN(kLogColl, "CollNet connect: invalid listen comm or plugin not initialised");
    return Status::kInvalidArgument;
  }
  if (!valid_handles(handles, nranks)) return Status::kInvalidArgument;
  const Config& cfg = s->config();
  const auto timeout = std::chrono::milliseconds(cfg.joinTimeoutMs);

  collnet::CollRings rings;
  SetupRing setup;
  if (nranks > 1) {
    CFX_RETURN_IF_ERROR(connect_rings(*s, *l, handles[(rank + 1) % nranks], rank, cfg.ringLanes,
                                      timeout, &rings, &setup));
  }
  net::SendComm* next = setup.next.get();
  net::RecvComm* prev = setup.prev.get();

  collnet::TreeCounts tree;
  CFX_RETURN_IF_ERROR(exchange_served(cfg, next, prev, rank, nranks, timeout, &tree));
  const double hop_us = measure_hop_us(next, prev, rank, nranks, timeout);
  // CONFLUX_LINK_MBPS set: the operator's figure wins over any measure (link_prior_mbps), so
  // the probe's 2 x 2 MiB would be spent for a log line.
  const double link_mbps = cfg.linkMbps > 0 ? 0 : measure_link_mbps(next, prev, nranks, timeout);
  std::string why;
  const uint64_t key = job_key(handles, nranks);
  JoinExchange exchange(next, prev, rank, nranks, timeout);
  auto engine = join_aggregators(cfg, key, nranks, rank, tree, &exchange, &why);
  if (!exchange.ran()) {
    uint64_t unused = 0;  // failed before it joined: the others still hear from this rank
    exchange.agree(0, why, &unused);
  } else if (engine != nullptr) {
    exchange.log_left_out(cfg);
  }
  Verdict mine = local_verdict(cfg, l->dev, rank, nranks, engine.get(), why, link_mbps);
  mine.hop_us = hop_us;

  std::vector<Verdict> all;
  CFX_RETURN_IF_ERROR(agree(cfg, next, prev, rank, nranks, mine, timeout, &all));
  const collnet::CollOptions opts = comm_options(cfg, all, key, nranks, rank, tree, *engine);
  if (rank == 0) {
    CFX_INFO(kLogColl | kLogInit,
             "CollNet connected: %d ranks, %zu aggregator(s), ring fraction %.3f%s (ring shares "
             "under %zu bytes go through the aggregators; ring hop %.0f us, link %.0f Mbit/s, "
             "measured %.0f)%s",
             nranks, engine->aggregators().size(), opts.ring_fraction,
             opts.controller
                 ? " (auto: from the advertised capacity, then the probe's, then measured)"
                 : "",
             std::max(opts.ring_min_bytes,
                      opts.controller ? opts.controller->min_ring_bytes() : size_t{0}),
             largest_hop_us(all), smallest(all, &Verdict::link_mbps),
             smallest(all, &Verdict::measured_mbps),
             engine->aggregators().front().deterministic ? ", deterministic" : "");
  }
  const size_t naggregators = engine->aggregators().size();
  ProbeBuffers probe;  // before comm: see ProbeBuffers
  auto comm =
      std::make_unique<collnet::CollComm>(rank, nranks, std::move(rings), std::move(engine), opts);
  collnet::PathModel model = path_model(all, opts, nranks);
  ProbeTimes times;
  if (nranks > 1) {
    Status st = probe_collnet(*comm, nranks, 2 * timeout, probe, &times);
    model.collnet_s = times.latency_s;
    Status told = st;  // what the others hear (a test hook may make the two differ)
    st = collnet::hooks::probeVerdict(cfg, rank, st, &told);
    if (st != Status::kOk) {
      CFX_WARN(kLogColl,
               "CollNet connect: rank %d: the first AllReduces through CollNet (the probes "
               "timed for the tuner) failed or took over %lld ms (%s)",
               rank, static_cast<long long>(2 * timeout.count()), net::toString(st));
    }
    CFX_RETURN_IF_ERROR(agree_probe(next, prev, rank, nranks, told, 3 * timeout));
    if (st != Status::kOk) return st;
  }
  // What the aggregators delivered in the bulk probe corrects the advertised capacity in the
  // tuner's model and the measured split's start, by the link's rule (split.h): a daemon
  // reports its NIC's speed, not a bottleneck behind it; CONFLUX_AGGREGATOR_MBPS (rank 0's)
  // wins over both, as CONFLUX_LINK_MBPS does for the link. n ranks sent the aggregators'
  // share of the probe each.
  const double advertised = model.capacity_Bps;
  double delivered = 0;
  bool split_from_probe = false;
  if (nranks > 1) {
    const double agg_bytes =
        4.0 * static_cast<double>(collnet::aggregator_elements(
                  kBulkProbeFloats, 4, opts.ring_fraction, opts.ring_min_bytes));
    const double busy = times.bulk_s - model.collnet_s;
    if (agg_bytes > 0 && busy > 0) delivered = nranks * agg_bytes / busy;
    const double probed = all[0].aggregator_mbps > 0 ? 0 : delivered;  // 0: the operator's
    model.capacity_Bps = collnet::link_prior_mbps(0, advertised, probed);
    // The measured split takes the same figure by the same rule (identical on every rank:
    // the probe times were agreed above) and starts every later request from the split it
    // implies; the tuner, which cannot follow the split later, prices CollNet at that start.
    double start = model.ring_fraction;
    split_from_probe = opts.controller && comm->take_connect_probe(probed, &start);
    if (split_from_probe) model.ring_fraction = start;
  }
  if (rank == 0) {
    CFX_INFO(
        kLogColl | kLogInit,
        "CollNet path: a 4 B AllReduce takes %.0f us through %zu aggregator(s) (the "
        "slowest rank's median), against %.0f us for %d ring hops; 1 MiB took %.0f us, "
        "the aggregators delivered %.0f Mbit/s (advertised %.0f): the tuner's model takes %.0f "
        "and ring fraction %.3f%s",
        model.collnet_s * 1e6, naggregators, model.ring_latency_s() * 1e6, 2 * (nranks - 1),
        times.bulk_s * 1e6, delivered * 8e-6, advertised * 8e-6, model.capacity_Bps * 8e-6,
        model.ring_fraction, split_from_probe ? " (the measured split starts there too)" : "");
  }
  if (l->comm_id.has_value()) collnet::publish_model(*l->comm_id, comm.get(), model);
  *collComm = comm.release();
  return Status::kOk;
}

Status collCloseColl(void* collComm) {
  auto* c = static_cast<collnet::CollComm*>(collComm);
  if (c == nullptr || !c->valid()) return Status::kInvalidArgument;
  collnet::withdraw_model(c);
  delete c;
  return Status::kOk;
}

Status collCloseListen(void* listenComm) {
  auto* l = static_cast<CollListen*>(listenComm);
  if (l == nullptr || l->magic != CollListen::kMagic) return Status::kInvalidArgument;
  l->magic = 0;
  delete l;
  return Status::kOk;
}

}  // namespace conflux::plugin
