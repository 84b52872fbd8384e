// SPDX-License-Identifier: Apache-2.0
// The parameter table of confluxd and typed setters with range checks.
// To add a parameter: add a field to Config (config.h), one row here, and document it in
// deploy/confluxd.example.toml and aggregator/README.md (a test checks both).
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <variant>

#include "aggregator/config.h"
#include "fmt/format.h"

namespace conflux::agg {
namespace {

using Field =
    std::variant<int64_t Config::*, double Config::*, bool Config::*, std::string Config::*>;

constexpr std::array<std::string_view, 6> kLogLevels = {"trace", "debug", "info",
                                                        "warn",  "error", "off"};
constexpr std::array kDataplanes = {
    std::string_view("udp"),
#ifdef CONFLUX_HAVE_DPDK_DATAPLANE
    std::string_view("dpdk"),
#endif
};

constexpr std::array<std::string_view, 3> kMulticastModes = {"auto", "on", "off"};
constexpr std::array<std::string_view, 2> kTreeResults = {"leaf", "direct"};

struct Row {
  ParamInfo info;
  Field field;
};

constexpr double kPortMax = 65535;
constexpr double kMsMax = 3600000;  // one hour

const std::array kRows = {
    Row{{"listen", ParamType::kString, "IPv4 address the control, data and metrics sockets bind"},
        &Config::listen},
    Row{{"control_port", ParamType::kInt, "TCP port of the control plane (0 = ephemeral)", 0,
         kPortMax},
        &Config::control_port},
    Row{{"data_port", ParamType::kInt,
         "first UDP port; dataplane thread i listens on data_port+i (0 = ephemeral ports)", 0,
         kPortMax},
        &Config::data_port},
    Row{{"threads", ParamType::kInt, "dataplane threads (slot s is served by thread s mod threads)",
         1, 64},
        &Config::threads},
    Row{{"max_mbps", ParamType::kInt,
         "cap on the result bytes the dataplane sends, Mbit/s over all threads (0 = none)", 0,
         10000000},
        &Config::max_mbps},
    Row{{"line_mbps", ParamType::kInt,
         "line rate advertised to workers, Mbit/s (0 = the speed sysfs reports for `listen`)", 0,
         10000000},
        &Config::line_mbps},
    Row{{"metrics_port", ParamType::kInt,
         "TCP port of the HTTP /metrics and /healthz endpoint (0 = ephemeral, -1 = disabled)", -1,
         kPortMax},
        &Config::metrics_port},
    Row{{"max_jobs", ParamType::kInt, "jobs served at the same time", 1, 4096}, &Config::max_jobs},
    Row{{"max_slots_per_job", ParamType::kInt, "most slots (window) granted to one job", 1, 65536},
        &Config::max_slots_per_job},
    Row{{"total_slots", ParamType::kInt, "slots shared by all jobs", 1, 1 << 20},
        &Config::total_slots},
    Row{{"max_payload_bytes", ParamType::kInt, "largest payload per packet granted to a job", 1,
         61440},
        &Config::max_payload_bytes},
    Row{{"secret", ParamType::kString,
         "shared secret authenticating Joins (empty = no authentication)"},
        &Config::secret},
    Row{{"secret_file", ParamType::kString,
         "file holding the shared secret (trailing newline ignored); excludes `secret`"},
        &Config::secret_file},
    Row{{"secret_overlap_s", ParamType::kInt,
         "after a reload changed the secret (or a tenant's), the previous one still "
         "authenticates Joins and admin commands this many seconds",
         0, 86400},
        &Config::secret_overlap_s},
    Row{{"data_mac", ParamType::kBool,
         "every data packet of every job carries an AES-128-GMAC keyed per job from the secret "
         "(untrusted fabrics; needs `secret`)"},
        &Config::data_mac},
    Row{{"deterministic", ParamType::kBool,
         "run every job in deterministic mode (bitwise reproducible results)"},
        &Config::deterministic},
    Row{{"join_timeout_ms", ParamType::kInt,
         "longest wait for all ranks of a job to join (caps the worker's value)", 1, kMsMax},
        &Config::join_timeout_ms},
    Row{{"worker_timeout_ms", ParamType::kInt,
         "a connection with no control traffic for this long is considered gone", 1, kMsMax},
        &Config::worker_timeout_ms},
    Row{{"heartbeat_ms", ParamType::kInt,
         "interval of the daemon's own Heartbeats to joined workers (0 = never)", 0, kMsMax},
        &Config::heartbeat_ms},
    Row{{"control_join_timeout_ms", ParamType::kInt,
         "a control connection that has not sent a Join within this long is closed (Heartbeats "
         "do not extend it)",
         1, kMsMax},
        &Config::control_join_timeout_ms},
    Row{{"max_control_connections", ParamType::kInt,
         "control connections open at once (fewer if RLIMIT_NOFILE leaves less room); a new one "
         "evicts the oldest without a Join, and is closed at once only if all have joined",
         1, 1 << 20},
        &Config::max_control_connections},
    Row{{"max_control_connections_per_addr", ParamType::kInt,
         "control connections open at once from one IPv4 address; a new one evicts that "
         "address's oldest without a Join, and is closed at once only if all have joined",
         1, 1 << 20},
        &Config::max_control_connections_per_addr},
    Row{{"log_level", ParamType::kString, "trace, debug, info, warn, error or off", 0, 0,
         kLogLevels},
        &Config::log_level},
    Row{{"ready_file", ParamType::kString,
         "once listening, write control_port/metrics_port/data_ports/pid here (atomically)"},
        &Config::ready_file},
    Row{{"dataplane", ParamType::kString, "packet I/O backend", 0, 0, kDataplanes},
        &Config::dataplane},
#ifdef CONFLUX_TEST_HOOKS
    Row{{"fault_drop",
         ParamType::kDouble,
         "probability of dropping a received datagram (fault injection)",
         0,
         1,
         {},
         true},
        &Config::fault_drop},
    Row{{"fault_dup",
         ParamType::kDouble,
         "probability of processing a received datagram twice (fault injection)",
         0,
         1,
         {},
         true},
        &Config::fault_dup},
    Row{{"fault_reorder",
         ParamType::kDouble,
         "probability of delaying a received datagram behind the next one (fault injection)",
         0,
         1,
         {},
         true},
        &Config::fault_reorder},
#endif
    Row{{"batch", ParamType::kInt, "datagrams per recvmmsg/sendmmsg call", 1, 1024},
        &Config::batch},
    Row{{"socket_buffer_bytes", ParamType::kInt, "SO_RCVBUF/SO_SNDBUF of each data socket", 65536,
         1 << 30},
        &Config::socket_buffer_bytes},
    Row{{"udp_offload", ParamType::kBool,
         "dataplane udp: UDP GSO sends and GRO receives where the kernel has them"},
        &Config::udp_offload},
    Row{{"busy_poll_us", ParamType::kInt,
         "dataplane udp: after its last datagram a thread polls this long (yielding its core "
         "between polls) before it sleeps; lower latency for small messages at the cost of CPU "
         "(0 = sleep at once)",
         0, 100000},
        &Config::busy_poll_us},
    Row{{"dpdk_eal_args", ParamType::kString,
         "dataplane dpdk: EAL arguments, whitespace separated (e.g. \"-l 0-2 -a 0000:3b:00.0\")"},
        &Config::dpdk_eal_args},
    Row{{"dpdk_port", ParamType::kInt, "dataplane dpdk: DPDK port id (threads = its queues)", 0,
         1023},
        &Config::dpdk_port},
    Row{{"dpdk_ipv4", ParamType::kString,
         "dataplane dpdk: the aggregator's IPv4 data address (empty = listen)"},
        &Config::dpdk_ipv4},
    Row{{"dpdk_vlan", ParamType::kInt,
         "dataplane dpdk: 802.1Q VLAN id of the data frames (0 = none)", 0, 4094},
        &Config::dpdk_vlan},
    Row{{"dpdk_idle_sleep_us", ParamType::kInt,
         "dataplane dpdk: sleep after ~1000 empty polls (0 = busy-poll always, for dedicated "
         "cores)",
         0, 100000},
        &Config::dpdk_idle_sleep_us},
    Row{{"parent", ParamType::kString,
         "reduction tree: the parent aggregator's control endpoint IPv4:port; every job is joined "
         "there as one contributor for the ranks it serves here (empty = none: a tree of depth 1)"},
        &Config::parent},
    Row{{"tree_results", ParamType::kString,
         "a leaf's results: leaf (the parent sends them to this leaf, which sends them on), direct "
         "(the parent multicasts them straight to this leaf's members' group; needs this leaf's "
         "jobs by multicast, a parent with multicast_range, and switches that snoop IGMP)",
         0, 0, kTreeResults},
        &Config::tree_results},
    Row{{"multicast", ParamType::kString,
         "results by multicast when multicast_range is set: auto (probe every job's group at "
         "join, unicast if a rank misses it), on (no probe), off",
         0, 0, kMulticastModes},
        &Config::multicast},
    Row{{"multicast_range", ParamType::kString,
         "multicast groups granted to jobs, CIDR in 224.0.0.0/4 (e.g. 239.77.0.0/16; empty = "
         "results by unicast only)"},
        &Config::multicast_range},
    Row{{"multicast_slice", ParamType::kInt,
         "groups of multicast_range this daemon grants: the slice at (its address mod the "
         "range's slices), so that daemons sharing one configuration never grant the same group "
         "(0 = the whole range: give each daemon a range of its own)",
         0, 65536},
        &Config::multicast_slice},
    Row{{"multicast_port", ParamType::kInt,
         "UDP port of the jobs' multicast groups (0 = the first data port)", 0, kPortMax},
        &Config::multicast_port},
    Row{{"multicast_ttl", ParamType::kInt, "IP TTL of multicast results (1 = this segment only)", 1,
         255},
        &Config::multicast_ttl},
    Row{{"multicast_interface", ParamType::kString,
         "IPv4 address of the interface multicast results leave by (empty = listen; the dpdk "
         "dataplane sends by its port and ignores it)"},
        &Config::multicast_interface},
    Row{{"multicast_probe_ms", ParamType::kInt,
         "multicast = auto: every rank must confirm the group probe within this time", 50, 60000},
        &Config::multicast_probe_ms},
    Row{{"multicast_flood_unicast", ParamType::kBool,
         "dataplane udp: when multicast reaches this host unasked (the network floods it to "
         "every port) at 5 % of the line rate for 2 s, send each multicast job's results by "
         "unicast where the fan-out fits the line rate"},
        &Config::multicast_flood_unicast},
};

const std::vector<ParamInfo>& infos() {
  static const std::vector<ParamInfo> v = [] {
    std::vector<ParamInfo> out;
    for (const Row& r : kRows) out.push_back(r.info);
    return out;
  }();
  return v;
}

const Row& row_of(const ParamInfo& p) {
  for (const Row& r : kRows) {
    if (r.info.key == p.key) return r;
  }
  std::abort();  // p always comes from the table
}

// The error for `value` of parameter `p`: invalid_argument naming the key and the source.
Status bad(const ParamInfo& p, std::string_view value, std::string_view source,
           std::string_view expected) {
  return invalid_argument(fmt::format("invalid value '{}' for '{}' (from {}): expected {}", value,
                                      p.key, source, expected));
}

std::string range_text(const ParamInfo& p, bool integer) {
  if (integer) {
    return fmt::format("an integer in [{}, {}]", static_cast<int64_t>(p.min),
                       static_cast<int64_t>(p.max));
  }
  return fmt::format("a number in [{}, {}]", p.min, p.max);
}

}  // namespace

std::span<const ParamInfo> config_params() { return infos(); }

std::span<const std::string_view> compiled_dataplanes() { return kDataplanes; }

const ParamInfo* find_param(std::string_view key) {
  for (const ParamInfo& p : infos()) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

Status set_param_int(Config& cfg, const ParamInfo& p, int64_t v, std::string_view source) {
  const Row& r = row_of(p);
  if (p.type == ParamType::kDouble) return set_param_double(cfg, p, static_cast<double>(v), source);
  if (p.type != ParamType::kInt) return bad(p, std::to_string(v), source, "a different type");
  if (static_cast<double>(v) < p.min || static_cast<double>(v) > p.max) {
    return bad(p, std::to_string(v), source, range_text(p, true));
  }
  cfg.*std::get<int64_t Config::*>(r.field) = v;
  return {};
}

Status set_param_double(Config& cfg, const ParamInfo& p, double v, std::string_view source) {
  const Row& r = row_of(p);
  if (p.type != ParamType::kDouble) return bad(p, fmt::format("{}", v), source, "a different type");
  if (!std::isfinite(v) || v < p.min || v > p.max) {
    return bad(p, fmt::format("{}", v), source, range_text(p, false));
  }
  cfg.*std::get<double Config::*>(r.field) = v;
  return {};
}

Status set_param_bool(Config& cfg, const ParamInfo& p, bool v, std::string_view source) {
  const Row& r = row_of(p);
  if (p.type != ParamType::kBool) return bad(p, v ? "true" : "false", source, "a different type");
  cfg.*std::get<bool Config::*>(r.field) = v;
  return {};
}

Status set_param_string(Config& cfg, const ParamInfo& p, std::string_view v,
                        std::string_view source) {
  const Row& r = row_of(p);
  if (p.type != ParamType::kString) return bad(p, v, source, "a different type");
  if (!p.choices.empty()) {
    bool ok = false;
    for (std::string_view c : p.choices) ok = ok || c == v;
    if (!ok) return bad(p, v, source, fmt::format("one of {}", fmt::join(p.choices, ", ")));
  }
  cfg.*std::get<std::string Config::*>(r.field) = std::string(v);
  return {};
}

Status set_param_text(Config& cfg, const ParamInfo& p, std::string_view text,
                      std::string_view source) {
  switch (p.type) {
    case ParamType::kInt: {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        return bad(p, text, source, range_text(p, true));
      }
      return set_param_int(cfg, p, v, source);
    }
    case ParamType::kDouble: {
      const std::string s(text);
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size())
        return bad(p, text, source, range_text(p, false));
      return set_param_double(cfg, p, v, source);
    }
    case ParamType::kBool:
      if (text == "true" || text == "1" || text == "yes" || text == "on") {
        return set_param_bool(cfg, p, true, source);
      }
      if (text == "false" || text == "0" || text == "no" || text == "off") {
        return set_param_bool(cfg, p, false, source);
      }
      return bad(p, text, source, "true or false");
    case ParamType::kString:
      return set_param_string(cfg, p, text, source);
  }
  return bad(p, text, source, "a known type");
}

std::string param_value_toml(const Config& cfg, const ParamInfo& p) {
  const Row& r = row_of(p);
  return std::visit(
      [&cfg](auto field) -> std::string {
        const auto& v = cfg.*field;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          std::string out = "\"";
          for (char c : v) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
          }
          return out + "\"";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else {
          return fmt::format("{}", v);
        }
      },
      r.field);
}

}  // namespace conflux::agg
