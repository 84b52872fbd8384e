// SPDX-License-Identifier: Apache-2.0
#include "net/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <climits>
#include <cstdlib>
#include <fstream>

namespace conflux::net {

IfnameFilter IfnameFilter::parse(std::string_view spec) {
  IfnameFilter f;
  if (!spec.empty() && spec.front() == '^') {
    f.exclude_ = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec.front() == '=') {
    f.exact_ = true;
    spec.remove_prefix(1);
  }
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    if (!item.empty()) f.names_.emplace_back(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return f;
}

bool IfnameFilter::matches(std::string_view ifname) const {
  bool found = false;
  for (const std::string& n : names_) {
    if (exact_ ? ifname == n : ifname.substr(0, n.size()) == n) {
      found = true;
      break;
    }
  }
  return exclude_ ? !found : found;
}

std::vector<NetInterface> listInterfaces() {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0: IPv4, pass 1: IPv6 for names without IPv4
    for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
      if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
      int want = pass == 0 ? AF_INET : AF_INET6;
      if (it->ifa_addr->sa_family != want) continue;
      SockAddr a;
      if (!SockAddr::fromSockaddr(it->ifa_addr, &a)) continue;
      if (want == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&a.u.in6.sin6_addr)) continue;
      bool dup = false;
      for (const NetInterface& e : out) dup = dup || e.name == it->ifa_name;
      if (!dup) out.push_back({it->ifa_name, a});
    }
  }
  ::freeifaddrs(list);
  return out;
}

std::vector<NetInterface> selectInterfaces(const std::vector<NetInterface>& all,
                                           std::string_view spec) {
  auto apply = [&all](std::string_view s) {
    IfnameFilter f = IfnameFilter::parse(s);
    std::vector<NetInterface> out;
    for (const NetInterface& i : all) {
      if (f.matches(i.name)) out.push_back(i);
    }
    return out;
  };
  if (!spec.empty()) return apply(spec);
  for (std::string_view fallback : {"^docker,lo,virbr", "docker", "lo"}) {
    std::vector<NetInterface> out = apply(fallback);
    if (!out.empty()) return out;
  }
  return {};
}

NetDevice describeInterface(const NetInterface& itf) {
  NetDevice d;
  d.name = itf.name;
  d.addr = itf.addr;
  d.loopback = itf.addr.isLoopback();
  d.speedMbps = 10000;
  std::string base = "/sys/class/net/" + itf.name;
  std::ifstream speed(base + "/speed");
  int mbps = 0;
  if (speed >> mbps && mbps > 0) d.speedMbps = mbps;
  char resolved[PATH_MAX];
  if (::realpath((base + "/device").c_str(), resolved) != nullptr) d.pciPath = resolved;
  return d;
}

}  // namespace conflux::net
