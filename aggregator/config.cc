// SPDX-License-Identifier: Apache-2.0
// Loading the configuration: TOML file, environment and command line, then cross-field checks.
#include "aggregator/config.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "CLI/CLI.hpp"
#include "aggregator/util/ipv4.h"
#include "fmt/format.h"
#include "toml++/toml.h"

namespace conflux::agg {
namespace {

std::string env_name(std::string_view key) {
  std::string out = "CONFLUX_";
  for (char c : key) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string flag_name(std::string_view key) {
  std::string out = "--";
  for (char c : key) out += c == '_' ? '-' : c;
  return out;
}

Status apply_toml_node(Config& cfg, const ParamInfo& p, const toml::node& n,
                       const std::string& source) {
  if (auto v = n.value_exact<int64_t>()) {
    return set_param_int(cfg, p, *v, source);
  }
  if (auto v = n.value_exact<double>()) return set_param_double(cfg, p, *v, source);
  if (auto v = n.value_exact<bool>()) return set_param_bool(cfg, p, *v, source);
  if (auto v = n.value_exact<std::string>()) return set_param_string(cfg, p, *v, source);
  return invalid_argument(
      fmt::format("invalid value for '{}' (from {}): not a scalar", p.key, source));
}

Status read_secret_file(const std::string& path, std::string* secret) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument(fmt::format("cannot read secret_file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty()) return invalid_argument(fmt::format("secret_file '{}' is empty", path));
  *secret = std::move(s);
  return {};
}

constexpr int64_t kMaxTenantWeight = 1000;

bool valid_tenant_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
}

// `[tenants.NAME]` tables: secret or secret_file, and weight.
Status apply_tenants(Config& cfg, const toml::node& node, const std::string& source) {
  const toml::table* all = node.as_table();
  if (all == nullptr) {
    return invalid_argument(fmt::format(
        "invalid value for 'tenants' (from {}): expected tables [tenants.NAME]", source));
  }
  for (const auto& [name_key, tnode] : *all) {
    const std::string name(name_key.str());
    if (!valid_tenant_name(name)) {
      return invalid_argument(fmt::format(
          "invalid tenant name '{}' (from {}): 1-64 letters, digits, '_' or '-'", name, source));
    }
    const toml::table* t = tnode.as_table();
    if (t == nullptr) {
      return invalid_argument(
          fmt::format("invalid value for 'tenants.{}' (from {}): expected a table", name, source));
    }
    Tenant tenant;
    tenant.name = name;
    for (const auto& [key, v] : *t) {
      const std::string where = fmt::format("tenants.{}.{}", name, key.str());
      if (key.str() == "weight") {
        auto w = v.value_exact<int64_t>();
        if (!w || *w < 1 || *w > kMaxTenantWeight) {
          return invalid_argument(
              fmt::format("invalid value for '{}' (from {}): expected an integer in [1, {}]", where,
                          source, kMaxTenantWeight));
        }
        tenant.weight = *w;
      } else if (key.str() == "secret" || key.str() == "secret_file") {
        auto text = v.value_exact<std::string>();
        if (!text) {
          return invalid_argument(
              fmt::format("invalid value for '{}' (from {}): expected a string", where, source));
        }
        (key.str() == "secret" ? tenant.secret : tenant.secret_file) = *text;
      } else {
        return invalid_argument(fmt::format("unknown key '{}' in {}", where, source));
      }
    }
    cfg.tenants.push_back(std::move(tenant));
  }
  return {};
}

// Every tenant has exactly one secret, and no two secrets (the shared one included) are equal:
// a Join's MAC names one tenant.
Status finalize_tenants(Config& cfg) {
  for (Tenant& t : cfg.tenants) {
    if (t.secret.empty() == t.secret_file.empty()) {
      return invalid_argument(
          fmt::format("tenant '{}': set exactly one of 'tenants.{}.secret' and "
                      "'tenants.{}.secret_file'",
                      t.name, t.name, t.name));
    }
    if (!t.secret_file.empty()) {
      if (Status st = read_secret_file(t.secret_file, &t.secret); !st.ok()) {
        return st.prefixed(fmt::format("tenant '{}': ", t.name));
      }
    }
    if (t.secret == cfg.secret) {
      return invalid_argument(fmt::format(
          "tenant '{}' has the shared 'secret': a tenant needs a secret of its own", t.name));
    }
    for (const Tenant& u : cfg.tenants) {
      if (&u == &t) break;
      if (u.secret == t.secret) {
        return invalid_argument(
            fmt::format("tenants '{}' and '{}' have the same secret", u.name, t.name));
      }
    }
  }
  return {};
}

// The multicast_* keys together; ok or an error naming the key.
Status check_multicast_config(const Config& cfg) {
  if (!cfg.multicast_range.empty()) {
    MulticastRange r;
    if (Status st = parse_multicast_range(cfg.multicast_range, &r); !st.ok()) {
      return st.prefixed(
          fmt::format("invalid value '{}' for 'multicast_range': ", cfg.multicast_range));
    }
  }
  in_addr a{};
  if (!cfg.multicast_interface.empty() &&
      inet_pton(AF_INET, cfg.multicast_interface.c_str(), &a) != 1) {
    return invalid_argument(
        fmt::format("invalid value '{}' for 'multicast_interface': expected an IPv4 address",
                    cfg.multicast_interface));
  }
  return {};
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Status apply_toml_file(Config& cfg, const std::string& path) {
  // toml++ reads a directory (or a FIFO, a device) as an empty document: refuse anything but
  // a regular file we can open, so a mistyped path never means "run on defaults".
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return invalid_argument(fmt::format("config file '{}': {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument(fmt::format("config file '{}' is not a regular file ({})", path,
                                        S_ISDIR(st.st_mode) ? "a directory" : "a special file"));
  }
  if (std::ifstream probe(path); !probe.is_open()) {
    return invalid_argument(
        fmt::format("config file '{}' cannot be read: {}", path, std::strerror(errno)));
  }
  toml::table tbl;
  try {
    tbl = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& pos = e.source().begin;
    return invalid_argument(fmt::format("cannot parse config file '{}' (line {}, column {}): {}",
                                        path, pos.line, pos.column, e.description()));
  }
  const std::string source = "file " + path;
  for (const auto& [key, node] : tbl) {
    if (key.str() == "tenants") {
      CFX_TRY(apply_tenants(cfg, node, source));
      continue;
    }
    const ParamInfo* p = find_param(key.str());
    if (p == nullptr) {
      return invalid_argument(fmt::format("unknown key '{}' in {}", key.str(), source));
    }
    CFX_TRY(apply_toml_node(cfg, *p, node, source));
  }
  return {};
}

Status finalize_config(Config& cfg) {
  in_addr a{};
  if (inet_pton(AF_INET, cfg.listen.c_str(), &a) != 1) {
    return invalid_argument(
        fmt::format("invalid value '{}' for 'listen': expected an IPv4 address", cfg.listen));
  }
  if (cfg.data_port != 0 && cfg.data_port + cfg.threads - 1 > 65535) {
    return invalid_argument(fmt::format("'data_port' {} + 'threads' {} exceeds port 65535",
                                        cfg.data_port, cfg.threads));
  }
  CFX_TRY(check_multicast_config(cfg));
  if (!cfg.secret.empty() && !cfg.secret_file.empty()) {
    return invalid_argument("'secret' and 'secret_file' are both set; use one");
  }
  if (!cfg.secret_file.empty()) {
    CFX_TRY(read_secret_file(cfg.secret_file, &cfg.secret));
  }
  CFX_TRY(finalize_tenants(cfg));
  if (cfg.data_mac && !cfg.auth_required()) {
    return invalid_argument(
        "'data_mac' needs a shared secret: set 'secret', 'secret_file' or a tenant");
  }
  if (!cfg.parent.empty()) {
    sockaddr_in a{};
    if (!parse_ipv4_endpoint(cfg.parent, &a)) {
      return invalid_argument(
          fmt::format("invalid value '{}' for 'parent': expected IPv4:port", cfg.parent));
    }
    if (cfg.dataplane != "udp") {
      return invalid_argument(
          fmt::format("'parent' needs dataplane = \"udp\" (got \"{}\")", cfg.dataplane));
    }
    if (cfg.data_mac && cfg.secret.empty()) {
      // The leaf signs its partial sums with a key derived from the secret its Join to the
      // parent carries: the tree's shared one, not a tenant's.
      return invalid_argument(
          "'parent' and 'data_mac' need 'secret' or 'secret_file' (the tree's shared secret)");
    }
  }
  if (cfg.tree_results == "direct" && (cfg.parent.empty() || cfg.multicast_range.empty())) {
    // Straight down reaches the members through this leaf's multicast group (SPEC.md §7).
    return invalid_argument("'tree_results = \"direct\"' needs 'parent' and 'multicast_range'");
  }
  return {};
}

std::string config_to_toml(const Config& cfg) {
  std::string out;
  for (const ParamInfo& p : config_params()) {
    std::string v = param_value_toml(cfg, p);
    if (p.key == "secret" && !cfg.secret.empty()) v = "\"<redacted>\"";
    out += fmt::format("{} = {}\n", p.key, v);
  }
  for (const Tenant& t : cfg.tenants) {
    out += fmt::format("\n[tenants.{}]\nsecret = \"<redacted>\"\nweight = {}\n", t.name, t.weight);
  }
  return out;
}

LoadStatus load_config(std::span<const std::string> args, const EnvLookup& env, Config* out,
                       std::string* message) {
  CLI::App app{"confluxd: Conflux in-network AllReduce aggregator", "confluxd"};
  std::string config_file;
  bool print_config = false;
  app.add_option("--config", config_file, "TOML configuration file (or CONFLUX_CONFIG)");
  app.add_flag("--print-config", print_config, "print the effective configuration and exit");
  std::map<std::string, std::string> flag_values;
  std::map<std::string, bool> bool_flags;
  const Config defaults;
  for (const ParamInfo& p : config_params()) {
    const std::string doc = fmt::format("{} [default {}] (env {})", p.doc,
                                        param_value_toml(defaults, p), env_name(p.key));
    if (p.type == ParamType::kBool) {
      app.add_flag(flag_name(p.key), bool_flags[std::string(p.key)], doc);
    } else {
      static constexpr const char* kTypeNames[] = {"INT", "NUMBER", "BOOL", "TEXT"};
      app.add_option(flag_name(p.key), flag_values[std::string(p.key)], doc)
          ->type_name(kTypeNames[static_cast<int>(p.type)]);
    }
  }
  std::vector<std::string> rev(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(rev);
  } catch (const CLI::CallForHelp&) {
    *message = app.help();
    return LoadStatus::kExitSuccess;
  } catch (const CLI::ParseError& e) {
    *message = fmt::format("command line: {}", e.what());
    return LoadStatus::kError;
  }

  Config cfg;
  if (config_file.empty()) {
    if (auto v = env("CONFLUX_CONFIG")) config_file = *v;
  }
  if (!config_file.empty()) {
    if (Status st = apply_toml_file(cfg, config_file); !st.ok()) {
      *message = st.message();
      return LoadStatus::kError;
    }
  }
  for (const ParamInfo& p : config_params()) {
    const std::string name = env_name(p.key);
    if (auto v = env(name)) {
      if (Status st = set_param_text(cfg, p, *v, "environment " + name); !st.ok()) {
        *message = st.message();
        return LoadStatus::kError;
      }
    }
  }
  for (const ParamInfo& p : config_params()) {
    const std::string flag = flag_name(p.key);
    if (app.get_option(flag)->count() == 0) continue;
    const std::string v = p.type == ParamType::kBool
                              ? (bool_flags[std::string(p.key)] ? "true" : "false")
                              : flag_values[std::string(p.key)];
    if (Status st = set_param_text(cfg, p, v, "flag " + flag); !st.ok()) {
      *message = st.message();
      return LoadStatus::kError;
    }
  }
  if (Status st = finalize_config(cfg); !st.ok()) {
    *message = st.message();
    return LoadStatus::kError;
  }
  *out = std::move(cfg);
  if (print_config) {
    *message = config_to_toml(*out);
    return LoadStatus::kExitSuccess;
  }
  return LoadStatus::kOk;
}

}  // namespace conflux::agg
