// SPDX-License-Identifier: Apache-2.0
// The circuits of a direct-connect plan: which worker port is wired to which worker or device
// port, topology by topology. Workers take their ports in order (a worker's first topology gets
// its port 0), devices are numbered across the plan, and every port is checked to be used once.
#include <algorithm>
#include <deque>
#include <numeric>
#include <stdexcept>

#include "aggregator/cli/direct_model.h"
#include "fmt/format.h"

namespace conflux::cli::direct {
namespace {

class Builder {
 public:
  Builder(const Input& in, std::vector<Circuit>& out) : in_(in), out_(out) {
    for (const PortClass& c : in.workers)
      worker_ports_.insert(worker_ports_.end(), c.count, c.ports);
    worker_used_.assign(worker_ports_.size(), 0);
  }

  int workers() const { return static_cast<int>(worker_ports_.size()); }
  int new_device() {
    device_used_.push_back(0);
    return static_cast<int>(device_used_.size()) - 1;
  }
  int devices() const { return static_cast<int>(device_used_.size()); }

  struct Node {
    bool device;
    int id;
  };
  void connect(Node a, Node b, int topology) { out_.push_back({port(a), port(b), topology}); }

 private:
  End port(Node n) {
    int& used = n.device ? device_used_[n.id] : worker_used_[n.id];
    const int limit = n.device ? in_.device_ports : worker_ports_[n.id];
    if (used >= limit) {
      throw std::logic_error(fmt::format("direct plan: {} {} has no port left (all {} in use)",
                                         n.device ? "device" : "worker", n.id, limit));
    }
    return {n.device, n.id, used++};
  }

  const Input& in_;
  std::vector<Circuit>& out_;
  std::vector<int> worker_ports_, worker_used_, device_used_;
};

// Hands out segment-ring members class by class, round-robin within each class, so that the
// memberships of a class differ by at most one between its workers.
class Memberships {
 public:
  explicit Memberships(const Input& in) {
    int first = 0;
    for (const PortClass& c : in.workers) {
      classes_.push_back({first, c.count, 0});
      first += c.count;
    }
  }
  std::vector<int> take(const std::vector<int>& per_class) {
    std::vector<int> members;
    for (size_t c = 0; c < per_class.size(); ++c) {
      Class& cl = classes_[c];
      for (int i = 0; i < per_class[c]; ++i) {
        members.push_back(cl.first + cl.next);
        cl.next = (cl.next + 1) % cl.count;
      }
    }
    std::sort(members.begin(), members.end());
    return members;
  }

 private:
  struct Class {
    int first, count, next;
  };
  std::vector<Class> classes_;
};

// A ring through every worker that is not a member and every device (each at its first
// member's place, or at the end with no member: a relay); members are wired to their device,
// groups[j] of them to device j in order.
void wire_ring(Builder& b, const std::vector<int>& members, const std::vector<int>& groups,
               int topology) {
  std::vector<int> device_of(b.workers(), -1), ids;
  size_t next = 0;
  for (int size : groups) {
    ids.push_back(b.new_device());
    for (int i = 0; i < size; ++i) device_of[members.at(next++)] = ids.back();
  }
  std::vector<Builder::Node> ring;
  std::vector<bool> placed(ids.size(), false);
  for (int w = 0; w < b.workers(); ++w) {
    if (device_of[w] < 0) {
      ring.push_back({false, w});
      continue;
    }
    b.connect({false, w}, {true, device_of[w]}, topology);
    const size_t j = static_cast<size_t>(device_of[w] - ids.front());
    if (!placed[j]) ring.push_back({true, device_of[w]});
    placed[j] = true;
  }
  for (size_t j = 0; j < ids.size(); ++j) {
    if (!placed[j]) ring.push_back({true, ids[j]});
  }
  // Two nodes are joined by two circuits (one per direction of travel), one node by none.
  if (ring.size() < 2) return;
  for (size_t i = 0; i < ring.size(); ++i)
    b.connect(ring[i], ring[(i + 1) % ring.size()], topology);
}

// The segment rings of a selection: per ring, its members per class and its devices' member
// counts. Full devices go round-robin from the first ring, partial ones from the last (so
// every ring has one when full + partial >= rings); members fill the rings' devices in order,
// each ring from the classes with the most memberships left (at most a class's workers).
struct SegmentRing {
  std::vector<int> per_class;
  std::vector<int> groups;
};

std::vector<SegmentRing> split_segment_rings(const Input& in, const Rates& r, const Selection& s) {
  const int rings = s.segment_rings;
  const int n = in.worker_count();
  std::vector<std::vector<int>> caps(rings);
  for (int i = 0; i < s.full; ++i) caps[i % rings].push_back(r.group);
  for (int i = 0; i < s.partial; ++i) caps[rings - 1 - i % rings].push_back(n % r.group);
  int left = 0;
  for (int m : s.members) left += m;
  std::vector<int> per_class_left = s.members;
  std::vector<SegmentRing> out(rings);
  for (int k = 0; k < rings; ++k) {
    int size = 0;
    for (int cap : caps[k]) size += cap;
    size = std::min(size, left);
    SegmentRing& ring = out[k];
    ring.per_class.assign(in.workers.size(), 0);
    std::vector<size_t> order(in.workers.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return per_class_left[a] > per_class_left[b]; });
    int taken = 0;
    for (size_t c : order) {
      const int t = std::min({per_class_left[c], in.workers[c].count, size - taken});
      ring.per_class[c] = t;
      per_class_left[c] -= t;
      taken += t;
    }
    left -= taken;
    for (int cap : caps[k]) {
      ring.groups.push_back(std::min(cap, taken));
      taken -= ring.groups.back();
    }
  }
  return out;
}

// A reduction tree: devices take up to E_d - 1 children (the root E_d) from the front of a
// queue of workers and devices, and join its back, until one device can take the rest. Returns
// the tree's depth in device levels.
int wire_tree(Builder& b, int device_ports, int topology) {
  struct Entry {
    Builder::Node node;
    int depth;
  };
  std::deque<Entry> queue;
  for (int w = 0; w < b.workers(); ++w) queue.push_back({{false, w}, 0});
  for (;;) {
    const bool root = static_cast<int>(queue.size()) <= device_ports;
    const size_t take =
        root ? queue.size() : std::min<size_t>(device_ports - 1, queue.size() - device_ports + 1);
    const int d = b.new_device();
    int depth = 0;
    for (size_t i = 0; i < take; ++i) {
      b.connect(queue.front().node, {true, d}, topology);
      depth = std::max(depth, queue.front().depth + 1);
      queue.pop_front();
    }
    if (root) return depth;
    queue.push_back({{true, d}, depth});
  }
}

}  // namespace

std::vector<Circuit> wire(const Input& in, const Rates& r, const Selection& s,
                          std::vector<Topology>& topologies) {
  std::vector<Circuit> circuits;
  Builder b(in, circuits);
  Memberships memberships(in);
  const auto add = [&](Kind kind, double algbw, auto&& build) {
    const int before = b.devices();
    Topology t;
    t.kind = kind;
    t.algbw_gbit = algbw;
    build(t, static_cast<int>(topologies.size()));
    t.devices = b.devices() - before;
    topologies.push_back(t);
  };
  for (int i = 0; i < s.rings; ++i) {
    add(Kind::kRing, r.ring, [&](Topology&, int t) { wire_ring(b, {}, {}, t); });
  }
  for (const SegmentRing& seg : split_segment_rings(in, r, s)) {
    add(Kind::kSegmentRing, r.segment, [&](Topology& top, int t) {
      const std::vector<int> members = memberships.take(seg.per_class);
      wire_ring(b, members, seg.groups, t);
      top.members = static_cast<int>(members.size());
    });
  }
  for (int i = 0; i < s.trees; ++i) {
    add(Kind::kTree, r.tree,
        [&](Topology& top, int t) { top.depth = wire_tree(b, in.device_ports, t); });
  }
  return circuits;
}

}  // namespace conflux::cli::direct
