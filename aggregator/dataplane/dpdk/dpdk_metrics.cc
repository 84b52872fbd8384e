// SPDX-License-Identifier: Apache-2.0
// The DPDK backend's own /metrics families: frame-level counters per queue and the port's
// hardware/PMD statistics. Called on the control thread.
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "aggregator/dataplane/dpdk/dpdk_dataplane.h"
#include "aggregator/dataplane/dpdk/dpdk_queue.h"
#include "fmt/format.h"

namespace conflux::agg {
namespace {

using dpdk::FrameCounters;

void family(std::string& out, std::string_view name, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} counter\n", name, help, name);
}

}  // namespace

std::string DpdkDataplane::extra_metrics() const {
  std::string out;
  auto per_queue = [&](std::string_view name, std::string_view help, auto field) {
    family(out, name, help);
    for (unsigned q = 0; q < n_queues(); ++q) {
      fmt::format_to(std::back_inserter(out), "{}{{thread=\"{}\"}} {}\n", name, q,
                     field(queues_[q]->frame_counters()).get());
    }
  };
  per_queue("conflux_dpdk_frames_in_total", "Frames taken from the port's RX queue.",
            [](const FrameCounters& c) -> const Counter& { return c.frames_in; });
  family(out, "conflux_dpdk_frame_drops_total",
         "Frames not handed to the engine, by reason (truncated_frame, bad_ip_header, "
         "ip_fragment, bad_ip_checksum, bad_udp_checksum, foreign).");
  for (unsigned q = 0; q < n_queues(); ++q) {
    for (int r = 1; r < dpdk::kNumFrameDrops; ++r) {
      fmt::format_to(std::back_inserter(out),
                     "conflux_dpdk_frame_drops_total{{thread=\"{}\",reason=\"{}\"}} {}\n", q,
                     dpdk::frame_drop_name(static_cast<dpdk::FrameDrop>(r)),
                     queues_[q]->frame_counters().frame_drops[r].get());
    }
  }
  per_queue("conflux_dpdk_arp_replies_total", "ARP replies sent for the aggregator's address.",
            [](const FrameCounters& c) -> const Counter& { return c.arp_replies; });
  per_queue("conflux_dpdk_arp_requests_total", "ARP requests sent (gratuitous, unknown worker).",
            [](const FrameCounters& c) -> const Counter& { return c.arp_requests; });
  per_queue("conflux_dpdk_neighbor_misses_total",
            "Results not sent because the worker's MAC was not known yet.",
            [](const FrameCounters& c) -> const Counter& { return c.neighbor_misses; });
  per_queue("conflux_dpdk_tx_dropped_total", "Frames the TX queue did not take.",
            [](const FrameCounters& c) -> const Counter& { return c.tx_dropped; });
  per_queue("conflux_dpdk_rx_linearized_total", "Multi-segment frames copied to be parsed.",
            [](const FrameCounters& c) -> const Counter& { return c.rx_linearized; });
  per_queue("conflux_dpdk_busy_cycles_total",
            "TSC cycles spent in poll iterations that received frames (cycles per packet = "
            "this / conflux_dpdk_frames_in_total).",
            [](const FrameCounters& c) -> const Counter& { return c.busy_cycles; });
  per_queue("conflux_dpdk_busy_polls_total",
            "Poll iterations that received frames (mean burst = "
            "conflux_dpdk_frames_in_total / this).",
            [](const FrameCounters& c) -> const Counter& { return c.busy_polls; });
  per_queue("conflux_dpdk_handoff_out_total",
            "Datagrams handed to the queue owning their slot (software steering).",
            [](const FrameCounters& c) -> const Counter& { return c.handoff_out; });
  per_queue("conflux_dpdk_handoff_in_total",
            "Datagrams taken from this queue's inbox ring (software steering).",
            [](const FrameCounters& c) -> const Counter& { return c.handoff_in; });
  per_queue("conflux_dpdk_handoff_drops_total",
            "Datagrams dropped because the owning queue's inbox ring was full.",
            [](const FrameCounters& c) -> const Counter& { return c.handoff_drops; });
  fmt::format_to(std::back_inserter(out),
                 "# HELP conflux_dpdk_software_steering 1 when queues hand datagrams to the "
                 "slot's owner (no rte_flow rules), else 0.\n"
                 "# TYPE conflux_dpdk_software_steering gauge\nconflux_dpdk_software_steering {}\n",
                 software_steering() ? 1 : 0);
  fmt::format_to(std::back_inserter(out),
                 "# HELP conflux_dpdk_tsc_hz TSC frequency.\n# TYPE conflux_dpdk_tsc_hz gauge\n"
                 "conflux_dpdk_tsc_hz {}\n",
                 rte_get_tsc_hz());
  rte_eth_stats st{};
  if (rte_eth_stats_get(port_id_, &st) == 0) {
    const std::pair<const char*, uint64_t> port_stats[] = {
        {"conflux_dpdk_port_rx_missed_total", st.imissed},
        {"conflux_dpdk_port_rx_errors_total", st.ierrors},
        {"conflux_dpdk_port_tx_errors_total", st.oerrors},
        {"conflux_dpdk_port_rx_nombuf_total", st.rx_nombuf}};
    for (const auto& [name, v] : port_stats) {
      family(out, name, "Port statistics (rte_eth_stats).");
      fmt::format_to(std::back_inserter(out), "{}{{port=\"{}\"}} {}\n", name, port_id_, v);
    }
  }
  return out;
}

}  // namespace conflux::agg
