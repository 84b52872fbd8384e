// The `latency` the plugin reports to NCCL (getProperties), measured instead of left at 0.
//
// NCCL adds a net device's `latency` (µs) to its own per-hop network latency when it models
// its ring and tree algorithms (src/graph/tuning.cc); 0 makes our TCP transport look like
// InfiniBand, so NCCL picks protocols and crossovers for a network an order of magnitude
// faster per message than this one. At the first getProperties of a device the plugin opens
// one connection from the device's address to itself through its own transport (the sockets,
// helper threads and caller progress every NCCL connection uses) and times a ping-pong of
// small messages: half the median round trip is the per-message cost of our stack. The wire
// hop itself is not in it (the kernel routes a host's own address internally), so the figure
// is a lower bound of the device's latency; NCCL's model adds its own network hop to it.
#pragma once

#include "net/transport.h"

namespace conflux::plugin {

// Half the median round trip of `rounds` 8-byte ping-pongs over a connection from `dev` to
// itself, in µs; a negative value when the probe could not run (the reason is logged at INFO).
// Blocks for a few milliseconds. Any thread.
float measureStackLatencyUs(const net::TcpTransport& t, int dev, int rounds = 64);

}  // namespace conflux::plugin
