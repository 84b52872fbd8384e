// SPDX-License-Identifier: Apache-2.0
// The built .so loads with RTLD_NOW and exports exactly the plugin symbols.
#include <cstdio>
#include <set>
#include <sstream>

#include "plugin_harness.h"

namespace cfxtest {
namespace {

std::set<std::string> definedDynamicSymbols() {
  std::set<std::string> out;
  std::string cmd = std::string("nm -D --defined-only '") + CONFLUX_PLUGIN_PATH + "' 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char line[1024];
  while (fgets(line, sizeof line, f) != nullptr) {
    std::istringstream in(line);
    std::string addr, type, name;
    if (in >> addr >> type >> name) out.insert(name);
  }
  pclose(f);
  return out;
}

TEST(PluginExports, LoadsWithRtldNowAndFindsEveryNetVersion) {
  Plugin& p = Plugin::get();
  ASSERT_NE(p.lib, nullptr) << dlerror();
  EXPECT_NE(p.v11, nullptr);
  EXPECT_NE(p.v8, nullptr);
  EXPECT_NE(dlsym(p.lib, "ncclNetPlugin_v9"), nullptr);
  EXPECT_NE(dlsym(p.lib, "ncclNetPlugin_v10"), nullptr);
  EXPECT_STREQ(p.v11->name, "Conflux");
  EXPECT_STREQ(p.v8->name, "Conflux");
}

TEST(PluginExports, DynamicSymbolTableHoldsOnlyPluginSymbols) {
  std::set<std::string> got = definedDynamicSymbols();
  ASSERT_FALSE(got.empty()) << "nm -D produced nothing for " << CONFLUX_PLUGIN_PATH;
  const std::set<std::string> required = {"ncclNetPlugin_v8", "ncclNetPlugin_v9",
                                          "ncclNetPlugin_v10", "ncclNetPlugin_v11",
                                          "ncclNetPlugin_v12"};
  const std::set<std::string> allowed = {
      "ncclNetPlugin_v8",      "ncclNetPlugin_v9",      "ncclNetPlugin_v10",
      "ncclNetPlugin_v11",     "ncclNetPlugin_v12",     "ncclCollNetPlugin_v8",
      "ncclCollNetPlugin_v9",  "ncclCollNetPlugin_v10", "ncclCollNetPlugin_v11",
      "ncclCollNetPlugin_v12", "ncclTunerPlugin_v5",    "ncclTunerPlugin_v6"};
  for (const std::string& s : required) EXPECT_TRUE(got.count(s)) << "missing export " << s;
  for (const std::string& s : got) EXPECT_TRUE(allowed.count(s)) << "unexpected export " << s;
}

TEST(PluginExports, V11TableIsComplete) {
  ncclNet_v11_t* n = Plugin::get().v11;
  ASSERT_NE(n, nullptr);
  for (auto fn : {(void*)n->init, (void*)n->devices, (void*)n->getProperties, (void*)n->listen,
                  (void*)n->connect, (void*)n->accept, (void*)n->regMr, (void*)n->regMrDmaBuf,
                  (void*)n->deregMr, (void*)n->isend, (void*)n->irecv, (void*)n->iflush,
                  (void*)n->test, (void*)n->closeSend, (void*)n->closeRecv, (void*)n->closeListen,
                  (void*)n->getDeviceMr, (void*)n->irecvConsumed, (void*)n->finalize}) {
    EXPECT_NE(fn, nullptr);
  }
}

}  // namespace
}  // namespace cfxtest
