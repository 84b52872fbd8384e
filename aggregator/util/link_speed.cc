// SPDX-License-Identifier: Apache-2.0
#include "aggregator/util/link_speed.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <fstream>

namespace conflux::agg {

std::vector<std::pair<std::string, in_addr_t>> ipv4_interfaces() {
  std::vector<std::pair<std::string, in_addr_t>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    out.emplace_back(i->ifa_name,
                     reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
  }
  freeifaddrs(list);
  return out;
}

int64_t interface_speed_mbps(const std::string& ipv4) {
  in_addr want{};
  if (inet_pton(AF_INET, ipv4.c_str(), &want) != 1 || want.s_addr == INADDR_ANY) return 0;
  std::string name;
  for (const auto& [ifname, addr] : ipv4_interfaces()) {
    if (addr == want.s_addr) {
      name = ifname;
      break;
    }
  }
  if (name.empty()) return 0;
  std::ifstream f("/sys/class/net/" + name + "/speed");
  int64_t mbps = 0;
  if (!(f >> mbps) || mbps < 0) return 0;  // reading fails (EINVAL) where there is no speed
  return mbps;
}

int64_t advertised_line_mbps(int64_t configured, const std::string& listen) {
  return configured > 0 ? configured : interface_speed_mbps(listen);
}

}  // namespace conflux::agg
