// SPDX-License-Identifier: Apache-2.0
#include "collnet/connect_agree.h"

#include <algorithm>
#include <cstdio>

#include "collnet/connect_join.h"
#include "collnet/ring_exchange.h"
#include "collnet/split.h"
#include "collnet/test_hooks.h"
#include "net/log.h"

namespace conflux::plugin::connect {

using net::kLogColl;
using net::kLogInit;

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

// This rank's verdict after its join (engine: the joined aggregators, or null and `joined`
// says why).
Verdict local_verdict(const Config& cfg, int dev, int rank, int nranks,
                      const client::Engine* engine, const conflux::Status& joined,
                      double measured_mbps) {
  Verdict mine;
  mine.ok = engine != nullptr;
  std::snprintf(mine.reason, sizeof mine.reason, "%s", joined.message().c_str());
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
      const client::AggregatorInfo& a = engine->aggregators()[i];
      shares.push_back({a.granted_slots, static_cast<uint32_t>(cfg.windowSlots),
                        static_cast<double>(grants[i]), cfg.stripeWeights.empty() ? 0u : a.weight});
      mine.grant_mbps += grants[i];
    }
    mine.capacity_mbps =
        collnet::aggregator_capacity_mbps(nranks, mine.link_mbps, cfg.aggregatorMbps, shares);
  }
  return mine;
}

// Everyone learns every rank's verdict, so all decline or none does.
Status agree_verdicts(const Config& cfg, net::SendComm* next, net::RecvComm* prev, int rank,
                      int nranks, const Verdict& mine, std::chrono::milliseconds timeout,
                      std::vector<Verdict>* all) {
  // Ranks reach this point up to one join timeout apart (a rank that fails fast waits for
  // those still inside Engine::create), so allow two.
  const Status st = collnet::ring_agree(next, prev, rank, nranks, mine, all, 2 * timeout);
  if (st != Status::kOk) {
    CFX_WARN(kLogColl, "CollNet connect: rank %d: agreement over the ring failed (%s)", rank,
             net::toString(st));
    return st;
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

namespace {

// `from` with only its aggregator entries at `picks`, in that order, each with its tree counts
// (served_ranks, served_up_ranks) when it has them.
client::ClientConfig with_entries(const client::ClientConfig& from,
                                  const std::vector<size_t>& picks) {
  client::ClientConfig c = from;
  c.aggregators.clear();
  c.served_ranks.clear();
  c.served_up_ranks.clear();
  c.stripe_weights.clear();
  for (size_t i : picks) {
    if (!from.stripe_weights.empty()) c.stripe_weights.push_back(from.stripe_weights.at(i));
    c.aggregators.push_back(from.aggregators.at(i));
    if (!from.served_ranks.empty()) c.served_ranks.push_back(from.served_ranks.at(i));
    if (!from.served_up_ranks.empty()) c.served_up_ranks.push_back(from.served_up_ranks.at(i));
  }
  return c;
}

// The probe of an aggregator the job lost (collnet/return_prober.h): a job of one rank on
// it alone, under a key of its own, left at once. Short timeouts: a host that is still down
// answers nothing, and the prober's thread is joined at close.
collnet::ReturnProber::Probe probe_function(const client::ClientConfig& base) {
  client::ClientConfig c = with_entries(base, {});
  c.join_agree = nullptr;
  c.join_peers = nullptr;
  c.n_workers = 1;
  c.rank = 0;
  c.window_slots = 4;
  c.connect_timeout = std::chrono::milliseconds(500);
  c.join_timeout = std::chrono::milliseconds(1000);
  // "Connection refused" every few seconds while a daemon is down is no news: a probe says
  // nothing below TRACE (ReturnProber logs the outcome).
  c.log = [](client::LogLevel, std::string_view line) {
    CFX_TRACE(kLogColl, "CollNet probe: %.*s", static_cast<int>(line.size()), line.data());
  };
  // Every probe a key of its own (a daemon may still hold the last probe's job): the job's key
  // mixed with a count, apart from the re-joins' keys.
  return [c, list = base.aggregators, key = base.job_key,
          n = uint64_t{0}](size_t index) mutable -> conflux::Status {
    if (index >= list.size()) {
      return internal_error("no aggregator " + std::to_string(index) + " to probe");
    }
    // The entry alone, as a flat one-rank job (not the chain up a tree it may name).
    c.aggregators = {client::Endpoint{list[index].host, list[index].port}};
    c.job_key = key ^ 0x50524f4245000000ULL ^ (0xc2b2ae3d27d4eb4fULL * ++n);
    std::unique_ptr<client::Engine> probe;
    return create_engine(c, &probe);  // the probe job is left at once
  };
}

}  // namespace

// The communicator's options from the agreed verdicts, with the re-join on survivors.
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
  // The join used the same settings, so they are valid here.
  client::ClientConfig base;
  static_cast<void>(engine_config(cfg, key, nranks, rank, tree, &base));
  collnet::hooks::clearEngineFaults(&base);
  // The entries the engine kept at connect (an aggregator that refused the job is left out on
  // every rank): the re-join's survivors are positions in this list, as in the engine's.
  std::vector<size_t> kept;
  for (const client::AggregatorInfo& a : engine.aggregators()) kept.push_back(a.stripe);
  base = with_entries(base, kept);
  opts.rejoin = [base](const std::vector<size_t>& survivors, uint32_t epoch,
                       std::unique_ptr<client::Engine>* out) {
    client::ClientConfig c = with_entries(base, survivors);
    // A job of its own on each survivor, the same on every rank.
    c.job_key = base.job_key ^ (0x9e3779b97f4a7c15ULL * epoch);
    return create_engine(c, out);
  };
  opts.probe = probe_function(base);
  opts.probe_on_every_rank = !tree.served.empty();  // the ranks named different aggregators
  return opts;
}

void log_connected(const std::vector<Verdict>& all, const collnet::CollOptions& opts,
                   const client::Engine& engine, int nranks) {
  CFX_INFO(kLogColl | kLogInit,
           "CollNet connected: %d ranks, %zu aggregator(s), ring fraction %.3f%s (ring shares "
           "under %zu bytes go through the aggregators; ring hop %.0f us, link %.0f Mbit/s, "
           "measured %.0f)%s",
           nranks, engine.aggregators().size(), opts.ring_fraction,
           opts.controller
               ? " (auto: from the advertised capacity, then the probe's, then measured)"
               : "",
           std::max(opts.ring_min_bytes,
                    opts.controller ? opts.controller->min_ring_bytes() : size_t{0}),
           largest_hop_us(all), smallest(all, &Verdict::link_mbps),
           smallest(all, &Verdict::measured_mbps),
           engine.aggregators().front().deterministic ? ", deterministic" : "");
}

namespace {

// Every rank learns every probe's outcome, so all decline or none does. NCCL compares
//    connect results only among the ranks of one node (src/transport.cc): a node whose rank
//    declined alone would run NCCL's algorithms while the others wait in CollNet. A rank
//    whose probe failed comes here early; the others may still be in theirs for up to two
//    join timeouts, hence three.
Status agree_probe(net::SendComm* next, net::RecvComm* prev, int rank, int nranks, Status mine,
                   std::chrono::milliseconds timeout) {
  const uint8_t ok = mine == Status::kOk ? 1 : 0;
  std::vector<uint8_t> all;
  const Status st = collnet::ring_agree(next, prev, rank, nranks, ok, &all, timeout);
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

Status agree_on_probes(const Config& cfg, collnet::CollComm& comm, const Rendezvous& rv, int rank,
                       int nranks, std::chrono::milliseconds timeout, ProbeBuffers& probe,
                       ProbeTimes* times) {
  Status st = probe_collnet(comm, nranks, 2 * timeout, probe, times);
  Status told = st;  // what the others hear (a test hook may make the two differ)
  st = collnet::hooks::probeVerdict(cfg, rank, st, &told);
  if (st != Status::kOk) {
    CFX_WARN(kLogColl,
             "CollNet connect: rank %d: the first AllReduces through CollNet (the probes "
             "timed for the tuner) failed or took over %lld ms (%s)",
             rank, static_cast<long long>(2 * timeout.count()), net::toString(st));
  }
  CFX_RETURN_IF_ERROR(agree_probe(rv.next.get(), rv.prev.get(), rank, nranks, told, 3 * timeout));
  return st;
}

}  // namespace conflux::plugin::connect
