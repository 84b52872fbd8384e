// SPDX-License-Identifier: Apache-2.0
#include "aggregator/metrics/prometheus.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <functional>

#include "fmt/format.h"

namespace conflux::agg {
namespace {

// When this process started (static initialisation), for conflux_uptime_seconds.
const std::chrono::steady_clock::time_point kProcessStart = std::chrono::steady_clock::now();

class Writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                   type);
  }
  void sample(std::string_view name, double v) {
    fmt::format_to(std::back_inserter(out_), "{} {:.6f}\n", name, v);
  }
  void sample(std::string_view name, std::string_view labels, uint64_t v) {
    if (labels.empty()) {
      fmt::format_to(std::back_inserter(out_), "{} {}\n", name, v);
    } else {
      fmt::format_to(std::back_inserter(out_), "{}{{{}}} {}\n", name, labels, v);
    }
  }
  void sample_seconds(std::string_view name, std::string_view labels, double v) {
    fmt::format_to(std::back_inserter(out_), "{}{{{}}} {:.6f}\n", name, labels, v);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

using QueueField = std::function<uint64_t(const QueueCounters&)>;
using JobField = std::function<uint64_t(const JobQueueCounters&)>;

// A counter's unit: a count, or nanoseconds exported as seconds (Prometheus' base unit).
enum class Unit { kCount, kNanoseconds };

void counter_sample(Writer& w, std::string_view name, std::string_view labels, uint64_t v,
                    Unit unit) {
  if (unit == Unit::kNanoseconds) {
    w.sample_seconds(name, labels, static_cast<double>(v) * 1e-9);
  } else {
    w.sample(name, labels, v);
  }
}

void queue_family(Writer& w, const Dataplane& dp, std::string_view name, std::string_view help,
                  const QueueField& f, Unit unit = Unit::kCount) {
  w.family(name, "counter", help);
  for (unsigned q = 0; q < dp.n_queues(); ++q) {
    counter_sample(w, name, fmt::format("thread=\"{}\"", q), f(dp.counters(q)), unit);
  }
}

void job_family(Writer& w, const JobTable& jobs, std::string_view name, std::string_view help,
                const JobField& f, Unit unit = Unit::kCount) {
  w.family(name, "counter", help);
  jobs.for_each_live([&](const Job& j) {
    uint64_t sum = 0;
    for (unsigned q = 0; q < j.n_queues(); ++q) sum += f(j.counters(q));
    counter_sample(w, name, fmt::format("conflux_job=\"{}\"", j.id()), sum, unit);
  });
}

void dataplane_metrics(Writer& w, const Dataplane& dp) {
  queue_family(w, dp, "conflux_dataplane_packets_in_total", "Datagrams received.",
               [](const QueueCounters& c) { return c.packets_in.get(); });
  queue_family(w, dp, "conflux_dataplane_bytes_in_total", "Bytes received (UDP payload).",
               [](const QueueCounters& c) { return c.bytes_in.get(); });
  queue_family(w, dp, "conflux_dataplane_packets_out_total", "RESULT datagrams sent.",
               [](const QueueCounters& c) { return c.packets_out.get(); });
  queue_family(w, dp, "conflux_dataplane_bytes_out_total", "Bytes sent (UDP payload).",
               [](const QueueCounters& c) { return c.bytes_out.get(); });
  queue_family(w, dp, "conflux_dataplane_retransmits_served_total",
               "Results re-sent to a worker that asked again.",
               [](const QueueCounters& c) { return c.retransmits_served.get(); });
  queue_family(w, dp, "conflux_dataplane_slots_completed_total",
               "Slot generations completed (all contributions reduced).",
               [](const QueueCounters& c) { return c.slots_completed.get(); });
  queue_family(
      w, dp, "conflux_dataplane_gather_seconds_total",
      "Seconds from the first to the last contribution, summed over the slot "
      "generations the thread completed (all jobs): divided by "
      "conflux_dataplane_slots_completed_total, how long the slowest rank kept the "
      "others waiting.",
      [](const QueueCounters& c) { return c.gather_ns.get(); }, Unit::kNanoseconds);
  queue_family(w, dp, "conflux_dataplane_send_errors_total",
               "Result datagrams the kernel refused to send.",
               [](const QueueCounters& c) { return c.send_errors.get(); });
  queue_family(w, dp, "conflux_dataplane_gso_sends_total",
               "Sends that carried several RESULT datagrams to one worker (UDP GSO).",
               [](const QueueCounters& c) { return c.gso_sends.get(); });
  queue_family(w, dp, "conflux_dataplane_deferred_total",
               "Result sends set aside while their job was over its fair share (sent later, in "
               "order, while the thread serves the other jobs).",
               [](const QueueCounters& c) { return c.deferred.get(); });
  queue_family(w, dp, "conflux_dataplane_borrowed_total",
               "Result sends of a job over its fair share made while no other job had results "
               "waiting (work-conserving: an idle job's share is lent).",
               [](const QueueCounters& c) { return c.borrowed.get(); });
  queue_family(w, dp, "conflux_dataplane_gro_receives_total",
               "Received buffers that held several coalesced datagrams (UDP GRO).",
               [](const QueueCounters& c) { return c.gro_receives.get(); });
  queue_family(w, dp, "conflux_dataplane_sleeps_total",
               "Kernel UDP: times the thread slept waiting for datagrams (each a wake-up).",
               [](const QueueCounters& c) { return c.sleeps.get(); });
  queue_family(w, dp, "conflux_dataplane_uplink_resends_total",
               "Tree leaf: partial results sent up to the parent again (a member resent).",
               [](const QueueCounters& c) { return c.uplink_resends.get(); });
  queue_family(w, dp, "conflux_dataplane_uplink_resends_held_total",
               "Tree leaf: member resends not sent up, a request for that result being up already.",
               [](const QueueCounters& c) { return c.uplink_resends_held.get(); });
  queue_family(w, dp, "conflux_dataplane_direct_results_total",
               "Tree parent: results sent straight to a child aggregator's members' group.",
               [](const QueueCounters& c) { return c.direct_results.get(); });
  const std::string_view drops = "conflux_dataplane_drops_total";
  w.family(drops, "counter", "Datagrams dropped, by reason (protocol/SPEC.md section 5).");
  for (unsigned q = 0; q < dp.n_queues(); ++q) {
    for (int r = 1; r < proto::kNumDropReasons; ++r) {
      w.sample(drops,
               fmt::format("thread=\"{}\",reason=\"{}\"", q,
                           proto::drop_reason_name(static_cast<proto::DropReason>(r))),
               dp.counters(q).drops[r].get());
    }
  }
#ifdef CONFLUX_TEST_HOOKS
  const std::string_view faults = "conflux_dataplane_faults_injected_total";
  w.family(faults, "counter", "Faults injected on receive (test builds), by kind.");
  constexpr std::string_view kKinds[kNumFaultKinds] = {"drop", "dup", "reorder"};
  for (unsigned q = 0; q < dp.n_queues(); ++q) {
    for (int k = 0; k < kNumFaultKinds; ++k) {
      w.sample(faults, fmt::format("thread=\"{}\",kind=\"{}\"", q, kKinds[k]),
               dp.counters(q).faults[k].get());
    }
  }
#endif
}

void job_metrics(Writer& w, const JobTable& jobs) {
  job_family(w, jobs, "conflux_job_packets_in_total",
             "Datagrams received for the job (valid job id and token).",
             [](const JobQueueCounters& c) { return c.packets_in.get(); });
  job_family(w, jobs, "conflux_job_bytes_in_total", "Bytes received for the job.",
             [](const JobQueueCounters& c) { return c.bytes_in.get(); });
  job_family(w, jobs, "conflux_job_slots_completed_total", "Slot generations completed.",
             [](const JobQueueCounters& c) { return c.slots_completed.get(); });
  job_family(w, jobs, "conflux_job_results_sent_total",
             "RESULT datagrams sent to the job's workers.",
             [](const JobQueueCounters& c) { return c.results_sent.get(); });
  job_family(w, jobs, "conflux_job_drops_total",
             "Of the job's datagrams, those the slot state machine dropped (duplicates, stale "
             "generations, mismatches: the per-thread drop counters say why).",
             [](const JobQueueCounters& c) { return c.drops.get(); });
  job_family(w, jobs, "conflux_job_result_bytes_sent_total",
             "Bytes of RESULT datagrams sent for the job (a multicast send counts once).",
             [](const JobQueueCounters& c) { return c.result_bytes.get(); });
  job_family(
      w, jobs, "conflux_job_gather_seconds_total",
      "Seconds from the first to the last contribution, summed over the job's completed "
      "slot generations: divided by conflux_job_slots_completed_total, how long the "
      "slowest rank kept the others waiting.",
      [](const JobQueueCounters& c) { return c.gather_ns.get(); }, Unit::kNanoseconds);
  job_family(w, jobs, "conflux_job_unicast_resends_total",
             "Results re-sent by unicast to one rank that asked again.",
             [](const JobQueueCounters& c) { return c.unicast_resends.get(); });
  w.family("conflux_job_multicast", "gauge", "1 when the job's results go to its multicast group.");
  jobs.for_each_live([&](const Job& j) {
    w.sample("conflux_job_multicast", fmt::format("conflux_job=\"{}\"", j.id()),
             j.multicast() ? 1 : 0);
  });
  w.family("conflux_job_workers", "gauge", "Workers (ranks) of the job.");
  jobs.for_each_live([&](const Job& j) {
    w.sample("conflux_job_workers", fmt::format("conflux_job=\"{}\"", j.id()),
             j.params().n_workers);
  });
  w.family("conflux_job_slots", "gauge", "Slots granted to the job.");
  jobs.for_each_live([&](const Job& j) {
    w.sample("conflux_job_slots", fmt::format("conflux_job=\"{}\"", j.id()), j.params().slots);
  });
  w.family("conflux_job_grant_mbps", "gauge",
           "The job's fair share of the bandwidth capacity, Mbit/s (its Capacity share_mbps; 0 = "
           "unknown).");
  jobs.for_each_live([&](const Job& j) {
    w.sample("conflux_job_grant_mbps", fmt::format("conflux_job=\"{}\"", j.id()), j.grant_mbps());
  });
  w.family("conflux_job_share_weight", "gauge",
           "The job's weight in the division of the capacity (its tenant's weight; tenant=\"\" "
           "for the shared secret).");
  jobs.for_each_live([&](const Job& j) {
    w.sample("conflux_job_share_weight",
             fmt::format("conflux_job=\"{}\",tenant=\"{}\"", j.id(), j.params().tenant),
             j.share_weight());
  });
  w.family("conflux_job_paced_mbps", "gauge",
           "What the job's result sends are paced to, Mbit/s (0 = not paced: alone, or no "
           "capacity known).");
  jobs.for_each_live([&](const Job& j) {
    w.sample("conflux_job_paced_mbps", fmt::format("conflux_job=\"{}\"", j.id()), j.pace_mbps());
  });
  w.family("conflux_job_result_mbps", "gauge",
           "The job's achieved result rate, Mbit/s of RESULT bytes over the last second or so.");
  jobs.for_each_live([&](const Job& j) {
    w.sample("conflux_job_result_mbps", fmt::format("conflux_job=\"{}\"", j.id()),
             static_cast<uint64_t>(std::llround(j.result_mbps())));
  });
}

void control_metrics(Writer& w, const ControlCounters& cc) {
  auto one = [&w](std::string_view name, std::string_view type, std::string_view help,
                  const Counter& c) {
    w.family(name, type, help);
    w.sample(name, "", c.get());
  };
  one("conflux_control_connections_total", "counter", "Control connections accepted.",
      cc.connections_total);
  one("conflux_control_connections", "gauge", "Control connections open.", cc.connections_open);
  one("conflux_control_joins_total", "counter", "Join messages received.", cc.joins_total);
  w.family("conflux_control_join_acks_total", "counter", "JoinAck answers sent, by status.");
  for (int s = 0; s < kNumJoinStatuses; ++s) {
    w.sample("conflux_control_join_acks_total",
             fmt::format("status=\"{}\"", proto::status_name(static_cast<proto::Status>(s))),
             cc.join_acks[s].get());
  }
  w.family("conflux_control_errors_total", "counter",
           "Control connections answered Error and closed, by reason.");
  for (int r = 0; r < static_cast<int>(ControlErrorReason::kCount); ++r) {
    w.sample("conflux_control_errors_total",
             fmt::format("reason=\"{}\"", control_error_name(static_cast<ControlErrorReason>(r))),
             cc.errors[r].get());
  }
  one("conflux_control_worker_timeouts_total", "counter",
      "Control connections closed after worker_timeout_ms of silence.", cc.worker_timeouts);
  one("conflux_control_join_deadline_closes_total", "counter",
      "Control connections closed without a Join after control_join_timeout_ms.",
      cc.join_deadline_closes);
  w.family("conflux_control_refused_total", "counter",
           "Control connections closed at accept, by reason.");
  for (int r = 0; r < static_cast<int>(RefuseReason::kCount); ++r) {
    w.sample("conflux_control_refused_total",
             fmt::format("reason=\"{}\"", refuse_reason_name(static_cast<RefuseReason>(r))),
             cc.refused[r].get());
  }
  w.family("conflux_control_evicted_total", "counter",
           "Control connections without a Join closed to make room for a new one, by the limit "
           "that needed the room.");
  for (int r = 0; r < static_cast<int>(RefuseReason::kCount); ++r) {
    w.sample("conflux_control_evicted_total",
             fmt::format("reason=\"{}\"", refuse_reason_name(static_cast<RefuseReason>(r))),
             cc.evicted[r].get());
  }
  one("conflux_control_loop_stalls_total", "counter",
      "Gaps of the control loop of at least max(worker_timeout_ms / 2, 250 ms) (timers restarted).",
      cc.loop_stalls);
  one("conflux_jobs_created_total", "counter", "Jobs created.", cc.jobs_created);
  one("conflux_jobs_deleted_total", "counter", "Jobs deleted (every rank gone).", cc.jobs_deleted);
  one("conflux_jobs_active", "gauge", "Jobs currently served.", cc.jobs_active);
  one("conflux_draining", "gauge", "1 while the daemon is drained: Joins refused (conflux drain).",
      cc.draining);
  one("conflux_max_mbps", "gauge",
      "The cap on the result bytes the daemon sends, Mbit/s (max_mbps, or conflux throttle; 0 = "
      "none).",
      cc.max_mbps);
  one("conflux_config_generation", "gauge",
      "The configuration's generation: 1 at start, +1 per reload applied (SIGHUP, conflux reload).",
      cc.config_generation);
  w.family("conflux_config_reloads_total", "counter",
           "Reloads of the configuration, by result (applied, refused: a key that needs a "
           "restart changed, error: the file is not valid).");
  for (const char* r : {"applied", "refused", "error"}) {
    const int i = r[0] == 'a' ? 0 : r[0] == 'r' ? 1 : 2;
    w.sample("conflux_config_reloads_total", fmt::format("result=\"{}\"", r),
             cc.config_reloads[i].get());
  }
  one("conflux_slots_in_use", "gauge", "Slots granted to live jobs (of total_slots).",
      cc.slots_in_use);
  one("conflux_metrics_requests_total", "counter", "HTTP requests served on the metrics port.",
      cc.metrics_requests);
  one("conflux_multicast_groups_in_use", "gauge", "Multicast groups held by live jobs.",
      cc.multicast_groups_in_use);
  w.family("conflux_multicast_decisions_total", "counter",
           "Jobs whose ranks agreed on result delivery, by mode (multicast or unicast).");
  w.sample("conflux_multicast_decisions_total", "mode=\"unicast\"",
           cc.multicast_decisions[0].get());
  w.sample("conflux_multicast_decisions_total", "mode=\"multicast\"",
           cc.multicast_decisions[1].get());
  one("conflux_multicast_unasked_mbps", "gauge",
      "IPv4 bytes that reached this host's network namespace over the last second beyond what "
      "the daemon received and multicast, Mbit/s: multicast the network floods here.",
      cc.multicast_unasked_mbps);
  one("conflux_multicast_flood_unicast_total", "counter",
      "Multicast jobs moved to unicast because the network floods multicast to this host.",
      cc.multicast_flood_unicast);
}

// What `conflux status` shows of the daemon itself: version, backend, threads, uptime.
void daemon_metrics(Writer& w, const Dataplane& dp) {
  w.family("conflux_build_info", "gauge", "Always 1; the labels name the version and dataplane.");
  w.sample("conflux_build_info",
           fmt::format("version=\"{}\",dataplane=\"{}\"", CONFLUX_VERSION, dp.name()), 1);
  w.family("conflux_dataplane_threads", "gauge", "Dataplane threads (queues).");
  w.sample("conflux_dataplane_threads", "", dp.n_queues());
  w.family("conflux_uptime_seconds", "gauge", "Seconds since the confluxd process started.");
  const auto up = std::chrono::steady_clock::now() - kProcessStart;
  w.sample("conflux_uptime_seconds", "",
           std::chrono::duration_cast<std::chrono::seconds>(up).count());
  // The Prometheus convention (client libraries export it as well): user + system CPU time of
  // every thread of the process, for CPU per byte next to the byte counters.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const auto secs = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  w.family("process_cpu_seconds_total", "counter", "User and system CPU time of confluxd.");
  w.sample("process_cpu_seconds_total", secs(ru.ru_utime) + secs(ru.ru_stime));
}

}  // namespace

std::string render_metrics(const Dataplane& dp, const JobTable& jobs, const ControlCounters& cc) {
  Writer w;
  daemon_metrics(w, dp);
  dataplane_metrics(w, dp);
  job_metrics(w, jobs);
  control_metrics(w, cc);
  return w.take() + dp.extra_metrics();
}

}  // namespace conflux::agg
