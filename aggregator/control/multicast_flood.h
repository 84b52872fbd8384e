// SPDX-License-Identifier: Apache-2.0
// MulticastFlood: notices that the network floods multicast to this host, and says whether a
// multicast job should go unicast instead. Control thread only (JobManager's rate sampling).
//
// Why: a switch without IGMP snooping (or a plain Linux bridge) sends every group's datagrams
// to every port. Aggregators that stripe one job each send its results to a group of their
// own; flooded, each aggregator's downlink carries all the others' results on top of the
// contributions it needs. Four aggregators at the workers' rate reached 0.56 of the link by
// multicast on the emulated fabric (a bridge) and 0.98 by unicast (bench/fabric/README.md,
// run W). Unicast fan-out costs egress instead, which a striped aggregator has to spare.
//
// How: over each sampling period, IpExt InOctets of the daemon's network namespace (every IPv4
// byte that arrived, including multicast that the stack then drops for want of a member)
// less what its dataplane received: the rest arrived unasked. (Its own group sends are not
// in InOctets while no socket of this namespace is a member; with a worker on this host the
// count means nothing, and JobManager does not watch.) Two periods in a row at 5 % of the line
// rate or more (at least 1 Mbit/s) mean the network floods. A kernel-bypass dataplane (DPDK)
// is invisible to InOctets and never trips it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace conflux::agg {

class MulticastFlood {
 public:
  // IPv4 and UDP headers of one datagram: InOctets counts them, the dataplane's bytes do not.
  static constexpr uint64_t kHeaderBytes = 28;
  static constexpr double kShareOfLine = 0.05;
  static constexpr int kPeriodsInARow = 2;
  // Unicast must leave this much of the line rate free.
  static constexpr double kEgressHeadroom = 0.95;

  // One sampling period of `seconds`: `ip_in_octets` is the namespace's InOctets now (nullopt:
  // unreadable, or not watched), `asked_bytes` what this daemon's dataplane received over the
  // period (headers included). Returns whether the network floods (see above) at `line_mbps`.
  bool sample(std::optional<uint64_t> ip_in_octets, uint64_t asked_bytes, double seconds,
              double line_mbps);
  // What arrived unasked over the last period, Mbit/s (0 before two readings).
  double unasked_mbps() const { return unasked_mbps_; }
  bool flooding() const { return in_a_row_ >= kPeriodsInARow; }

  // Whether a multicast job of `members` ranks and `job_mbps` of results (one copy) may go
  // unicast: its fan-out, with the `egress_mbps` this daemon sends now (the job's one copy
  // included), stays within kEgressHeadroom of the line rate.
  static bool unicast_fits(double egress_mbps, uint32_t members, double job_mbps, double line_mbps);

 private:
  std::optional<uint64_t> last_octets_;
  double unasked_mbps_ = 0;
  int in_a_row_ = 0;
};

// IpExt InOctets from the text of /proc/net/netstat (nullopt if absent or malformed).
std::optional<uint64_t> ip_in_octets(std::string_view netstat);
// The same, read from this process's network namespace.
std::optional<uint64_t> read_ip_in_octets();

}  // namespace conflux::agg
