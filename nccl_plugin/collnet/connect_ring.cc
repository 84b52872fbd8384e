// SPDX-License-Identifier: Apache-2.0
#include "collnet/connect_ring.h"

#include <cstring>
#include <vector>

#include "collnet/ring_exchange.h"
#include "conflux/client/discovery.h"
#include "conflux/protocol/control.h"
#include "net/log.h"

namespace conflux::plugin::connect {
namespace {

using net::kLogColl;
using net::kLogInit;

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

// Identical on every rank: derived from every rank's handle, unique per communicator.
uint64_t job_key(void* const* handles, int nranks) {
  std::vector<uint8_t> all;
  for (int i = 0; i < nranks; ++i) {
    const auto* h = static_cast<const uint8_t*>(handles[i]);
    all.insert(all.end(), h, h + sizeof(CollHandle));
  }
  return proto::siphash24(0x436f6e666c757831ULL, 0x436f6c6c4e657431ULL, all);
}

// 1a. The rings: connect to rank+1 lanes + 3 times (each completes without the peer's accept),
//     then accept rank-1's connections, in the same order.
Status connect_rings(const PluginState& s, const CollListen& l, const void* next_handle, int rank,
                     int lanes, std::chrono::milliseconds timeout, Rendezvous* rv) {
  collnet::CollRings* rings = &rv->rings;
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
  if (st == Status::kOk) st = s.transport().connectBlocking(l.dev, ring, timeout, &rv->next);
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
  if (st == Status::kOk) st = net::TcpTransport::acceptBlocking(*l.ring, timeout, &rv->prev);
  if (st != Status::kOk) {
    CFX_WARN(kLogColl, "CollNet connect: rank %d could not build the worker ring (%s)", rank,
             net::toString(st));
  }
  return st;
}

// 1b. Which ranks share each aggregator (a reduction tree's leaves), over the ring.
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

// 1c. CONFLUX_AGGREGATORS with its dns: entries resolved. Rank 0 resolves its list and sends
//     "list\nresolved\nweights" (or "list\n!why\nweights") around the ring; a rank with the
//     same list takes rank 0's answer, one with a list of its own (a tree's leaf) resolves that
//     itself. Every rank takes rank 0's CONFLUX_STRIPE_WEIGHTS: a packet must go to the same
//     stripe on every rank. Every rank takes part, dns: entries or not, so that the exchange is
//     the same on all.
Status discover(const Config& cfg, net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                std::chrono::milliseconds timeout, Rendezvous* rv) {
  const std::string& mine = cfg.aggregators;
  // *out: `mine` with its dns: entries resolved; or `mine`, and why they could not be.
  auto resolve = [&](std::string* out) -> conflux::Status {
    *out = mine;
    if (!client::has_dns_entries(mine)) return {};
    std::string expanded, why;
    if (!client::expand_dns(mine, timeout, &expanded, &why)) return unavailable(why);
    *out = expanded;
    return {};
  };
  std::vector<uint8_t> msg;
  if (rank == 0) {
    std::string out;
    const conflux::Status resolved = resolve(&out);
    const std::string text =
        mine + "\n" + (resolved.ok() ? out : "!" + resolved.message()) + "\n" + cfg.stripeWeights;
    msg.assign(text.begin(), text.end());
  }
  if (nranks > 1) {
    const Status st = collnet::ring_broadcast(next, prev, rank, nranks, 0, &msg, 64 << 10, timeout);
    if (st != Status::kOk) {
      CFX_WARN(kLogColl, "CollNet connect: rank %d: receiving rank 0's aggregator list failed (%s)",
               rank, net::toString(st));
      return st;
    }
  }
  const std::string text(msg.begin(), msg.end());
  const size_t nl = text.find('\n'), nl2 = text.find('\n', nl + 1);
  const std::string theirs = text.substr(0, nl), answer = text.substr(nl + 1, nl2 - nl - 1);
  rv->stripe_weights = nl2 == std::string::npos ? "" : text.substr(nl2 + 1);
  if (rv->stripe_weights != cfg.stripeWeights) {
    CFX_WARN(kLogColl,
             "CollNet connect: rank %d: CONFLUX_STRIPE_WEIGHTS=%s differs from rank 0's "
             "(%s); every rank uses rank 0's",
             rank, cfg.stripeWeights.c_str(), rv->stripe_weights.c_str());
  }
  if (theirs == mine) {
    if (answer.starts_with("!")) {
      rv->discovery = unavailable("CONFLUX_AGGREGATORS: " + answer.substr(1));
    } else {
      rv->aggregators = answer;
    }
  } else {
    rv->discovery = resolve(&rv->aggregators).prefixed("CONFLUX_AGGREGATORS: ");
  }
  if (rank == 0 && rv->discovery.ok() && rv->aggregators != mine) {
    CFX_INFO(kLogColl | kLogInit, "CollNet connect: CONFLUX_AGGREGATORS=%s is %s", mine.c_str(),
             rv->aggregators.c_str());
  }
  return Status::kOk;
}

}  // namespace

Status rendezvous(const PluginState& s, const CollListen& l, void* const* handles, int rank,
                  int nranks, std::chrono::milliseconds timeout, Rendezvous* out) {
  if (!valid_handles(handles, nranks)) return Status::kInvalidArgument;
  const Config& cfg = s.config();
  if (nranks > 1) {
    CFX_RETURN_IF_ERROR(
        connect_rings(s, l, handles[(rank + 1) % nranks], rank, cfg.ringLanes, timeout, out));
  }
  out->key = job_key(handles, nranks);
  CFX_RETURN_IF_ERROR(discover(cfg, out->next.get(), out->prev.get(), rank, nranks, timeout, out));
  Config resolved = cfg;
  resolved.aggregators = out->aggregators;
  return exchange_served(resolved, out->next.get(), out->prev.get(), rank, nranks, timeout,
                         &out->tree);
}

}  // namespace conflux::plugin::connect
