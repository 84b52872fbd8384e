// SPDX-License-Identifier: Apache-2.0
// confluxd configuration: one table of typed parameters (config_params.cc) filled from, in
// increasing precedence, built-in defaults, a TOML file (--config FILE or CONFLUX_CONFIG),
// CONFLUX_<KEY> environment variables and --key-with-dashes command-line flags.
// Every value is checked against the parameter's type and range; an error names the key and
// where the value came from. Loaded once by main() before any thread starts.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conflux/common/status.h"

namespace conflux::agg {

// A tenant (`[tenants.NAME]` in the TOML file): the jobs whose Joins authenticate with its
// secret get `weight` parts of the daemon's bandwidth where a job of the shared `secret` gets
// one (aggregator/README.md "Fair share"). Its secret also keys its jobs' data MAC.
struct Tenant {
  std::string name;
  std::string secret;
  std::string secret_file;
  int64_t weight = 1;
};

// The effective configuration. Field names equal the parameter keys.
struct Config {
  std::string listen = "0.0.0.0";
  int64_t control_port = 7470;
  int64_t data_port = 7471;
  int64_t threads = 2;
  int64_t max_mbps = 0;
  int64_t line_mbps = 0;
  int64_t metrics_port = 9470;
  int64_t max_jobs = 64;
  int64_t max_slots_per_job = 256;
  int64_t total_slots = 8192;
  int64_t max_payload_bytes = 8192;
  std::string secret;
  std::string secret_file;
  // After a reload changed the secret, the previous one still authenticates Joins and admin
  // commands this long (jobs rejoin with the secret they started with).
  int64_t secret_overlap_s = 600;
  bool deterministic = false;
  int64_t join_timeout_ms = 30000;
  int64_t worker_timeout_ms = 10000;
  int64_t heartbeat_ms = 1000;
  int64_t control_join_timeout_ms = 5000;
  int64_t max_control_connections = 4096;
  int64_t max_control_connections_per_addr = 256;
  std::string log_level = "info";
  std::string ready_file;
  std::string dataplane = "udp";
#ifdef CONFLUX_TEST_HOOKS
  // Receive-path fault injection (engine/fault_injector.h): test builds only.
  double fault_drop = 0.0;
  double fault_dup = 0.0;
  double fault_reorder = 0.0;
#endif
  int64_t batch = 32;
  int64_t socket_buffer_bytes = 8 << 20;
  bool udp_offload = true;
  int64_t busy_poll_us = 0;
  bool data_mac = false;  // per-packet MAC on the data channel (SPEC.md §6); needs a secret
  std::string dpdk_eal_args = "";
  int64_t dpdk_port = 0;
  std::string dpdk_ipv4 = "";
  int64_t dpdk_vlan = 0;
  int64_t dpdk_idle_sleep_us = 0;
  std::string parent = "";            // reduction tree: the parent aggregator's control endpoint
  std::string tree_results = "leaf";  // a leaf's results: through it, or straight (SPEC §7)
  // Multicast result delivery (protocol/SPEC.md §8).
  std::string multicast = "auto";
  std::string multicast_range = "";
  int64_t multicast_slice = 64;  // groups this daemon grants from; where: its address (ipv4.h)
  int64_t multicast_port = 0;
  int64_t multicast_ttl = 1;
  std::string multicast_interface = "";
  int64_t multicast_probe_ms = 1000;
  bool multicast_flood_unicast = true;
  // Not in the parameter table: only a TOML file holds tenants (each a table of its own).
  std::vector<Tenant> tenants;

  // Joins must carry a MAC: a shared secret or a tenant is configured.
  bool auth_required() const { return !secret.empty() || !tenants.empty(); }
};

enum class ParamType : uint8_t { kInt, kDouble, kBool, kString };

// One row of the parameter table.
struct ParamInfo {
  std::string_view key;  // TOML key; env CONFLUX_<KEY>; flag --key-with-dashes
  ParamType type;
  std::string_view doc;  // one line, shown by --help and in the docs
  double min = 0;        // numbers: inclusive range
  double max = 0;
  std::span<const std::string_view> choices = {};  // strings: allowed values (empty = any)
  bool test_hook = false;  // exists only in test builds (CONFLUX_TEST_HOOKS): not in packages
};

// The parameter table, in documentation order.
std::span<const ParamInfo> config_params();
const ParamInfo* find_param(std::string_view key);

// Where a value came from, for error messages: "default", "file x.toml", "environment
// CONFLUX_X", "flag --x".
// Sets parameter `key` from its text form. Ok, or invalid_argument naming key and source.
Status set_param_text(Config& cfg, const ParamInfo& p, std::string_view text,
                      std::string_view source);
// Same for a number/bool/string already typed (TOML values).
Status set_param_int(Config& cfg, const ParamInfo& p, int64_t v, std::string_view source);
Status set_param_double(Config& cfg, const ParamInfo& p, double v, std::string_view source);
Status set_param_bool(Config& cfg, const ParamInfo& p, bool v, std::string_view source);
Status set_param_string(Config& cfg, const ParamInfo& p, std::string_view v,
                        std::string_view source);
// Current value of a parameter as TOML text (strings quoted).
std::string param_value_toml(const Config& cfg, const ParamInfo& p);

// Checks that need more than one field (port ranges, fault injection compiled in, secret
// file readable, tenants) and resolves every secret_file into its secret. Ok, or
// invalid_argument saying what is wrong.
Status finalize_config(Config& cfg);

// Applies a TOML file. Unknown keys and wrongly typed values are errors (invalid_argument), as
// is a file that cannot be read or parsed.
Status apply_toml_file(Config& cfg, const std::string& path);

enum class LoadStatus : uint8_t { kOk, kExitSuccess, kError };

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Parses `args` (argv[1..]) and the environment. kExitSuccess: --help/--print-config output
// is in *message and the caller exits 0. kError: *message says what and where (exit 2).
LoadStatus load_config(std::span<const std::string> args, const EnvLookup& env, Config* out,
                       std::string* message);

// Process environment lookup for load_config.
std::optional<std::string> process_env(const std::string& name);

// The effective configuration as a TOML document (secrets redacted, tenants last).
std::string config_to_toml(const Config& cfg);

// The list of dataplane backends compiled into this binary ("udp", ...).
std::span<const std::string_view> compiled_dataplanes();

}  // namespace conflux::agg
