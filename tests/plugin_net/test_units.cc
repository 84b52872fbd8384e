// SPDX-License-Identifier: Apache-2.0
// Unit tests of the plugin internals, linked statically (not through the .so).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "core/params.h"
#include "net/interfaces.h"
#include "net/request.h"
#include "net/wire.h"

namespace conflux {
namespace {

TEST(IfnameFilter, PrefixExcludeAndExactSyntax) {
  auto f = net::IfnameFilter::parse("eth,ib");
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("ib1"));
  EXPECT_FALSE(f.matches("lo"));
  auto x = net::IfnameFilter::parse("^docker,lo");
  EXPECT_TRUE(x.matches("eth0"));
  EXPECT_FALSE(x.matches("docker0"));
  EXPECT_FALSE(x.matches("lo"));
  auto e = net::IfnameFilter::parse("=eth0");
  EXPECT_TRUE(e.matches("eth0"));
  EXPECT_FALSE(e.matches("eth01"));
  auto xe = net::IfnameFilter::parse("^=eth0");
  EXPECT_FALSE(xe.matches("eth0"));
  EXPECT_TRUE(xe.matches("eth01"));
}

std::vector<std::string> names(const std::vector<net::NetInterface>& v) {
  std::vector<std::string> out;
  for (const auto& i : v) out.push_back(i.name);
  return out;
}

TEST(SelectInterfaces, DefaultPrefersRealInterfacesThenDockerThenLoopback) {
  net::NetInterface lo{"lo", {}}, eth{"eth0", {}}, dock{"docker0", {}};
  using V = std::vector<std::string>;
  EXPECT_EQ(names(net::selectInterfaces({lo, dock, eth}, "")), V{"eth0"});
  EXPECT_EQ(names(net::selectInterfaces({lo, dock}, "")), V{"docker0"});
  EXPECT_EQ(names(net::selectInterfaces({lo}, "")), V{"lo"});
  EXPECT_EQ(names(net::selectInterfaces({lo, dock, eth}, "lo")), V{"lo"});
  EXPECT_TRUE(net::selectInterfaces({lo}, "=eth0").empty());
}

TEST(Wire, HandleHelloAndHeaderRoundTripAndRejectGarbage) {
  net::wire::Handle h;
  h.addr.u.in4.sin_family = AF_INET;
  h.addr.u.in4.sin_addr.s_addr = htonl(0x7f000001);
  h.addr.setPort(4242);
  h.nonce = 0x1122334455667788ULL;
  uint8_t buf[net::wire::kHandleBytes];
  net::wire::encodeHandle(h, buf);
  net::wire::Handle back;
  ASSERT_TRUE(net::wire::decodeHandle(buf, &back));
  EXPECT_EQ(back.addr.toString(), "127.0.0.1:4242");
  EXPECT_EQ(back.nonce, h.nonce);
  buf[0] ^= 1;
  EXPECT_FALSE(net::wire::decodeHandle(buf, &back));

  net::wire::Hello hello{net::wire::SocketRole::kData, 3, 4, 9, 77, 65536};
  uint8_t hb[net::wire::kHelloBytes];
  net::wire::encodeHello(hello, hb);
  net::wire::Hello hb2;
  ASSERT_TRUE(net::wire::decodeHello(hb, &hb2));
  EXPECT_EQ(hb2.index, 3);
  EXPECT_EQ(hb2.connId, 77u);
  hello.index = 4;  // out of range for 4 data sockets
  net::wire::encodeHello(hello, hb);
  EXPECT_FALSE(net::wire::decodeHello(hb, &hb2));

  uint8_t mb[net::wire::kMsgHeaderBytes];
  net::wire::encodeMsgHeader({-5, 1ULL << 33, 12, net::wire::kMsgInline}, mb);
  net::wire::MsgHeader m;
  ASSERT_TRUE(net::wire::decodeMsgHeader(mb, &m));
  EXPECT_EQ(m.tag, -5);
  EXPECT_EQ(m.size, 1ULL << 33);
  EXPECT_EQ(m.seq, 12u);
}

TEST(SplitMessage, CoversTheMessageContiguouslyOnDistinctSockets) {
  net::Chunk c[64];
  for (size_t size : {size_t{1}, size_t{65535}, size_t{65537}, size_t{1} << 20, size_t{64} << 20,
                      (size_t{64} << 20) + 3}) {
    for (int nsocks : {1, 2, 3, 8}) {
      int n = net::splitMessage(size, nsocks, 65536, 5, c);
      ASSERT_GE(n, 1);
      ASSERT_LE(n, nsocks);
      size_t off = 0;
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(c[i].offset, off);
        EXPECT_GT(c[i].len, 0u);
        EXPECT_EQ(c[i].socket, (5 + i) % nsocks);
        off += c[i].len;
      }
      EXPECT_EQ(off, size);
    }
  }
  EXPECT_EQ(net::splitMessage(0, 4, 65536, 0, c), 0);
}

TEST(Params, DefaultsOverridesAndErrors) {
  auto envOf = [](std::map<std::string, std::string> m) {
    return [m](const char* n) -> const char* {
      auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    };
  };
  plugin::Config c;
  std::string err;
  ASSERT_EQ(plugin::loadConfig(&c, &err, envOf({})), net::Status::kOk) << err;
  EXPECT_EQ(c.minChunkBytes, 65536u);
  EXPECT_EQ(c.nthreads, 0);
  EXPECT_EQ(c.netMaxRecvs, 1);
  ASSERT_EQ(plugin::loadConfig(&c, &err,
                               envOf({{"CONFLUX_MIN_CHUNKSIZE", "1M"}, {"CONFLUX_NTHREADS", "4"}})),
            net::Status::kOk);
  EXPECT_EQ(c.minChunkBytes, 1u << 20);
  EXPECT_EQ(c.nthreads, 4);
  EXPECT_EQ(plugin::loadConfig(&c, &err, envOf({{"CONFLUX_INLINE_BYTES", "513K"}})),
            net::Status::kInvalidArgument);
  EXPECT_NE(err.find("CONFLUX_INLINE_BYTES"), std::string::npos);
  for (const char* bad : {"0", "9", "x"}) {
    EXPECT_EQ(plugin::loadConfig(&c, &err, envOf({{"CONFLUX_NET_MAX_RECVS", bad}})),
              net::Status::kInvalidArgument)
        << bad;
    EXPECT_NE(err.find("CONFLUX_NET_MAX_RECVS"), std::string::npos) << err;
  }
  ASSERT_EQ(plugin::loadConfig(&c, &err, envOf({{"CONFLUX_NET_MAX_RECVS", "8"}})),
            net::Status::kOk);
  EXPECT_EQ(c.netMaxRecvs, 8);
  EXPECT_EQ(plugin::loadConfig(
                &c, &err, envOf({{"CONFLUX_NTHREADS", "16"}, {"CONFLUX_NSOCKS_PERTHREAD", "16"}})),
            net::Status::kInvalidArgument);
  long long v = 0;
  EXPECT_TRUE(plugin::parseSize("64K", &v));
  EXPECT_EQ(v, 65536);
  EXPECT_FALSE(plugin::parseSize("64KB", &v));
  EXPECT_FALSE(plugin::parseSize("-1", &v));
}

// Both READMEs document every parameter exactly as the table declares it.
TEST(Params, ReadmeListsEveryParameter) {
  for (const char* path : {CONFLUX_PLUGIN_README, CONFLUX_TOP_README}) {
    std::ifstream f(path);
    ASSERT_TRUE(f.good()) << path;
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string readme = ss.str();
    for (const plugin::ParamSpec& p : plugin::paramTable()) {
      EXPECT_NE(readme.find(plugin::formatParamRow(p)), std::string::npos)
          << path << ": row missing or stale; expected:\n"
          << plugin::formatParamRow(p);
    }
  }
}

}  // namespace
}  // namespace conflux
