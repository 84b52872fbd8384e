// SPDX-License-Identifier: Apache-2.0
// Configuration: defaults, TOML, environment, flags, precedence and errors; documentation of
// every key in the example config and the README.
#include "aggregator/config.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"

namespace conflux::agg {
namespace {

struct Loaded {
  LoadStatus status;
  Config cfg;
  std::string message;
};

Loaded load(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  Loaded l;
  l.status = load_config(
      args,
      [&env](const std::string& k) -> std::optional<std::string> {
        auto it = env.find(k);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      &l.cfg, &l.message);
  return l;
}

std::string temp_file(const std::string& text) {
  char path[] = "/tmp/confluxd_cfg_XXXXXX";
  const int fd = mkstemp(path);
  (void)!write(fd, text.data(), text.size());
  close(fd);
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ConfigTest, Defaults) {
  const Loaded l = load({});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  EXPECT_EQ(l.cfg.listen, "0.0.0.0");
  EXPECT_EQ(l.cfg.control_port, 7470);
  EXPECT_EQ(l.cfg.data_port, 7471);
  EXPECT_EQ(l.cfg.threads, 2);
  EXPECT_EQ(l.cfg.max_mbps, 0);
  EXPECT_EQ(l.cfg.line_mbps, 0);
  EXPECT_EQ(l.cfg.metrics_port, 9470);
  EXPECT_EQ(l.cfg.max_jobs, 64);
  EXPECT_EQ(l.cfg.max_slots_per_job, 256);
  EXPECT_EQ(l.cfg.total_slots, 8192);
  EXPECT_EQ(l.cfg.max_payload_bytes, 8192);
  EXPECT_EQ(l.cfg.join_timeout_ms, 30000);
  EXPECT_EQ(l.cfg.worker_timeout_ms, 10000);
  EXPECT_EQ(l.cfg.dataplane, "udp");
  EXPECT_EQ(l.cfg.batch, 32);
  EXPECT_FALSE(l.cfg.deterministic);
  EXPECT_TRUE(l.cfg.secret.empty());
}

TEST(ConfigTest, PrecedenceDefaultsFileEnvFlags) {
  const std::string file = temp_file(
      "control_port = 1000\ndata_port = 2000\nthreads = 3\nfault_drop = 0\n"
      "deterministic = true\nlog_level = \"debug\"\n");
  const Loaded l = load({"--config", file, "--threads", "5", "--deterministic=false"},
                        {{"CONFLUX_DATA_PORT", "3000"}, {"CONFLUX_THREADS", "4"}});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  EXPECT_EQ(l.cfg.control_port, 1000);  // file
  EXPECT_EQ(l.cfg.data_port, 3000);     // env beats file
  EXPECT_EQ(l.cfg.threads, 5);          // flag beats env and file
  EXPECT_FALSE(l.cfg.deterministic);    // flag beats file
  EXPECT_EQ(l.cfg.log_level, "debug");
  EXPECT_EQ(l.cfg.max_jobs, 64);  // default
  unlink(file.c_str());
}

TEST(ConfigTest, ConfigFileFromEnvironment) {
  const std::string file = temp_file("metrics_port = -1\n");
  const Loaded l = load({}, {{"CONFLUX_CONFIG", file}});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  EXPECT_EQ(l.cfg.metrics_port, -1);
  unlink(file.c_str());
}

TEST(ConfigTest, ErrorsNameTheKeyAndTheSource) {
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string file;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {{"--control-port", "abc"}, {}, "", {"control_port", "flag --control-port"}},
      {{"--control-port", "70000"}, {}, "", {"control_port", "[0, 65535]"}},
      {{}, {{"CONFLUX_THREADS", "0"}}, "", {"threads", "environment CONFLUX_THREADS"}},
      {{}, {{"CONFLUX_FAULT_DROP", "1.5"}}, "", {"fault_drop"}},
      {{}, {{"CONFLUX_DETERMINISTIC", "maybe"}}, "", {"deterministic"}},
      {{"--dataplane", "carrier-pigeon"}, {}, "", {"dataplane", "udp"}},
      {{"--log-level", "loud"}, {}, "", {"log_level"}},
      {{"--max-payload-bytes", "61441"}, {}, "", {"max_payload_bytes"}},
      {{"--max-mbps", "-1"}, {}, "", {"max_mbps", "flag --max-mbps"}},
      {{}, {{"CONFLUX_MAX_MBPS", "fast"}}, "", {"max_mbps", "environment CONFLUX_MAX_MBPS"}},
      {{}, {}, "line_mbps = -5\n", {"line_mbps", "file "}},
      {{"--listen", "not-an-ip"}, {}, "", {"listen"}},
      {{}, {}, "bogus_key = 3\n", {"unknown key 'bogus_key'", "file "}},
      {{}, {}, "threads = \"two\"\n", {"threads", "file "}},
      {{}, {}, "threads = \n", {"cannot parse"}},
      {{"--secret", "a", "--secret-file", "/nonexistent"}, {}, "", {"secret_file"}},
      {{"--secret-file", "/nonexistent/secret"}, {}, "", {"secret_file"}},
      {{"--no-such-flag"}, {}, "", {"no-such-flag"}},
      {{"--control-join-timeout-ms", "0"}, {}, "", {"control_join_timeout_ms", "[1, 3600000]"}},
      {{}, {{"CONFLUX_MAX_CONTROL_CONNECTIONS", "-3"}}, "", {"max_control_connections"}},
      {{}, {}, "max_control_connections_per_addr = 0\n", {"max_control_connections_per_addr"}},
      {{"--parent", "agg1:7470"}, {}, "", {"parent", "IPv4:port"}},
      {{"--parent", "10.0.0.1"}, {}, "", {"parent", "IPv4:port"}},
      {{"--parent", "10.0.0.1:0"}, {}, "", {"parent", "IPv4:port"}},
      {{}, {{"CONFLUX_PARENT", "10.0.0.1:70000"}}, "", {"parent", "IPv4:port"}},
      {{"--multicast-range", "10.0.0.0/8"}, {}, "", {"multicast_range", "224.0.0.0/4"}},
      {{"--multicast-range", "239.77.0.0"}, {}, "", {"multicast_range", "CIDR"}},
      {{"--multicast-range", "239.77.0.0/40"}, {}, "", {"multicast_range", "4..32"}},
      {{"--multicast-range", "224.0.0.0/16"}, {}, "", {"multicast_range", "224.0.0.0/24"}},
      {{}, {{"CONFLUX_MULTICAST", "sometimes"}}, "", {"multicast", "environment"}},
      {{"--multicast-ttl", "0"}, {}, "", {"multicast_ttl", "[1, 255]"}},
      {{"--multicast-interface", "eth0"}, {}, "", {"multicast_interface", "IPv4"}},
      {{"--multicast-probe-ms", "10"}, {}, "", {"multicast_probe_ms"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    std::string file;
    if (!c.file.empty()) {
      file = temp_file(c.file);
      args.insert(args.end(), {"--config", file});
    }
    const Loaded l = load(args, c.env);
    EXPECT_EQ(l.status, LoadStatus::kError) << c.expect[0];
    for (const std::string& e : c.expect) {
      EXPECT_NE(l.message.find(e), std::string::npos) << "message: " << l.message << " lacks " << e;
    }
    if (!file.empty()) unlink(file.c_str());
  }
}

// A --config path that is not a regular readable file fails at start-up, naming the path
// (a directory used to be read as an empty document, i.e. defaults, secret lost).
TEST(ConfigTest, ConfigPathMustBeARegularReadableFile) {
  char dir[] = "/tmp/confluxd_cfgdir_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  for (const std::string& path :
       {std::string(dir), std::string(dir) + "/missing.toml", std::string("/dev/null")}) {
    Loaded l = load({"--config", path});
    EXPECT_EQ(l.status, LoadStatus::kError) << path;
    EXPECT_NE(l.message.find("'" + path + "'"), std::string::npos) << l.message;
    l = load({}, {{"CONFLUX_CONFIG", path}});
    EXPECT_EQ(l.status, LoadStatus::kError) << path;
    EXPECT_NE(l.message.find("'" + path + "'"), std::string::npos) << l.message;
  }
  EXPECT_NE(load({"--config", dir}).message.find("not a regular file (a directory)"),
            std::string::npos);
  rmdir(dir);
}

TEST(ConfigTest, DataMacNeedsASecret) {
  Loaded l = load({"--data-mac"});
  EXPECT_EQ(l.status, LoadStatus::kError);
  EXPECT_NE(l.message.find("'data_mac'"), std::string::npos) << l.message;
  l = load({"--data-mac=true", "--secret", "s3cret"});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  EXPECT_TRUE(l.cfg.data_mac);
  l = load({}, {{"CONFLUX_DATA_MAC", "true"}, {"CONFLUX_SECRET", "s3cret"}});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  EXPECT_TRUE(l.cfg.data_mac);
  // A tree leaf signs its partial sums with the key its parent derives from the tree's shared
  // secret (SPEC.md §7): fine with a shared secret, refused at start with tenants alone.
  l = load({"--data-mac=true", "--secret", "s3cret", "--parent", "127.0.0.1:7470"});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  EXPECT_TRUE(l.cfg.data_mac);
  EXPECT_EQ(l.cfg.parent, "127.0.0.1:7470");
}

TEST(ConfigTest, SecretFileIsReadAndTrimmed) {
  const std::string file = temp_file("s3cret\n");
  const Loaded l = load({"--secret-file", file});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  EXPECT_EQ(l.cfg.secret, "s3cret");
  unlink(file.c_str());
}

// Tenants: [tenants.NAME] tables with one secret each and a weight; every mistake names the
// tenant's key; --print-config shows them with the secrets redacted and loads back.
TEST(ConfigTest, TenantsComeFromTheFileWithTheirWeights) {
  const std::string key_file = temp_file("batch-key\n");
  const std::string file = temp_file(
      "max_mbps = 1000\n[tenants.research]\nsecret = \"r-key\"\n"
      "weight = 3\n[tenants.batch]\nsecret_file = \"" +
      key_file + "\"\n");
  Loaded l = load({"--config", file});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  ASSERT_EQ(l.cfg.tenants.size(), 2u);
  std::map<std::string, const Tenant*> by_name;
  for (const Tenant& t : l.cfg.tenants) by_name[t.name] = &t;
  ASSERT_TRUE(by_name.contains("research") && by_name.contains("batch"));
  EXPECT_EQ(by_name["research"]->secret, "r-key");
  EXPECT_EQ(by_name["research"]->weight, 3);
  EXPECT_EQ(by_name["batch"]->secret, "batch-key");  // read from the file, newline trimmed
  EXPECT_EQ(by_name["batch"]->weight, 1);            // the default
  EXPECT_TRUE(l.cfg.auth_required()) << "tenants without a shared secret still authenticate";
  EXPECT_FALSE(Config{}.auth_required());

  l = load({"--config", file, "--print-config"});
  ASSERT_EQ(l.status, LoadStatus::kExitSuccess);
  EXPECT_NE(l.message.find("[tenants.research]\nsecret = \"<redacted>\"\nweight = 3"),
            std::string::npos)
      << l.message;
  EXPECT_EQ(l.message.find("r-key"), std::string::npos);
  EXPECT_EQ(l.message.find("batch-key"), std::string::npos);
  unlink(file.c_str());
  unlink(key_file.c_str());

  // data_mac is satisfied by a tenant's secret (each job is keyed by its tenant's).
  const std::string mac = temp_file("data_mac = true\n[tenants.a]\nsecret = \"k\"\n");
  l = load({"--config", mac});
  EXPECT_EQ(l.status, LoadStatus::kOk) << l.message;
  // Not on a tree leaf: its partial sums go up under the tree's shared secret, which is unset.
  l = load({"--config", mac, "--parent", "127.0.0.1:7470"});
  EXPECT_EQ(l.status, LoadStatus::kError);
  EXPECT_NE(l.message.find("'parent' and 'data_mac' need 'secret'"), std::string::npos)
      << l.message;
  unlink(mac.c_str());
}

TEST(ConfigTest, TenantMistakesNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[tenants.a]\nsecret = \"k\"\nweight = 0\n", "'tenants.a.weight'"},
      {"[tenants.a]\nsecret = \"k\"\nweight = 1001\n", "'tenants.a.weight'"},
      {"[tenants.a]\nsecret = \"k\"\nweight = \"3\"\n", "'tenants.a.weight'"},
      {"[tenants.a]\nsecret = \"k\"\nshare = 3\n", "unknown key 'tenants.a.share'"},
      {"[tenants.a]\nsecret = 7\n", "'tenants.a.secret'"},
      {"[tenants.a]\nweight = 2\n", "exactly one of 'tenants.a.secret'"},
      {"[tenants.a]\nsecret = \"k\"\nsecret_file = \"/etc/hostname\"\n",
       "exactly one of 'tenants.a.secret'"},
      {"[tenants.a]\nsecret_file = \"/nonexistent/key\"\n", "tenant 'a': cannot read"},
      {"[tenants.a]\nsecret = \"k\"\n[tenants.b]\nsecret = \"k\"\n",
       "tenants 'a' and 'b' have the same secret"},
      {"secret = \"k\"\n[tenants.a]\nsecret = \"k\"\n", "tenant 'a' has the shared 'secret'"},
      {"[tenants.\"bad name\"]\nsecret = \"k\"\n", "invalid tenant name 'bad name'"},
      {"tenants = 3\n", "'tenants'"},
      {"[tenants]\na = 3\n", "'tenants.a'"},
  };
  for (const auto& [text, want] : cases) {
    const std::string file = temp_file(text);
    const Loaded l = load({"--config", file});
    EXPECT_EQ(l.status, LoadStatus::kError) << text;
    EXPECT_NE(l.message.find(want), std::string::npos) << text << " -> " << l.message;
    unlink(file.c_str());
  }
}

TEST(ConfigTest, HelpAndPrintConfigExitSuccessfully) {
  Loaded l = load({"--help"});
  EXPECT_EQ(l.status, LoadStatus::kExitSuccess);
  EXPECT_NE(l.message.find("--worker-timeout-ms"), std::string::npos);
  l = load({"--print-config", "--secret", "x"});
  EXPECT_EQ(l.status, LoadStatus::kExitSuccess);
  EXPECT_NE(l.message.find("control_port = 7470"), std::string::npos);
  EXPECT_EQ(l.message.find("\"x\""), std::string::npos);  // redacted
}

TEST(ConfigTest, ExampleConfigLoadsAndDocumentsEveryKey) {
  const std::string path = std::string(CONFLUX_SOURCE_DIR) + "/deploy/confluxd.example.toml";
  const Loaded l = load({"--config", path});
  ASSERT_EQ(l.status, LoadStatus::kOk) << l.message;
  const std::string text = read_file(path);
  const std::string readme = read_file(std::string(CONFLUX_SOURCE_DIR) + "/aggregator/README.md");
  for (const ParamInfo& p : config_params()) {
    // The example is what the package installs: test hooks are documented in the README only.
    if (p.test_hook) {
      EXPECT_EQ(text.find(std::string(p.key) + " ="), std::string::npos) << p.key;
    } else {
      EXPECT_NE(text.find(std::string(p.key) + " ="), std::string::npos) << p.key;
    }
    EXPECT_NE(readme.find("`" + std::string(p.key) + "`"), std::string::npos) << p.key;
  }
}

}  // namespace
}  // namespace conflux::agg
