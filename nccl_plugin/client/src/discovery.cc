// SPDX-License-Identifier: Apache-2.0
#include "conflux/client/discovery.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace conflux::client {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One lookup, shared with its thread so that a lookup that outlives its caller's timeout
// finishes into memory nobody else holds any more.
struct Lookup {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  std::vector<uint32_t> addresses;  // host order
};

}  // namespace

bool has_dns_entries(std::string_view list) {
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    if (trim(list.substr(pos, comma - pos)).starts_with(kDnsPrefix)) return true;
    pos = comma + 1;
  }
  return false;
}

bool resolve_ipv4(const std::string& name, std::chrono::milliseconds timeout,
                  std::vector<std::string>* addresses, std::string* error) {
  auto lookup = std::make_shared<Lookup>();
  std::thread([lookup, name] {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
    std::vector<uint32_t> found;
    for (addrinfo* a = res; rc == 0 && a != nullptr; a = a->ai_next) {
      found.push_back(ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr));
    }
    if (res != nullptr) freeaddrinfo(res);
    std::lock_guard<std::mutex> lk(lookup->mu);
    lookup->rc = rc;
    lookup->addresses = std::move(found);
    lookup->done = true;
    lookup->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lk(lookup->mu);
  if (!lookup->cv.wait_for(lk, timeout, [&] { return lookup->done; })) {
    *error = "resolving " + name + " took over " + std::to_string(timeout.count()) + " ms";
    return false;
  }
  if (lookup->rc != 0) {
    *error = "resolving " + name + ": " + gai_strerror(lookup->rc);
    return false;
  }
  std::vector<uint32_t> ips = lookup->addresses;
  std::sort(ips.begin(), ips.end());
  ips.erase(std::unique(ips.begin(), ips.end()), ips.end());
  if (ips.empty()) {
    *error = "resolving " + name + ": no IPv4 address";
    return false;
  }
  addresses->clear();
  for (uint32_t ip : ips) {
    in_addr a{htonl(ip)};
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &a, text, sizeof text);
    addresses->push_back(text);
  }
  return true;
}

bool expand_dns(std::string_view list, std::chrono::milliseconds timeout, std::string* out,
                std::string* error) {
  std::string expanded;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string_view item = trim(list.substr(pos, comma - pos));
    pos = comma + 1;
    std::string piece(item);
    if (item.starts_with(kDnsPrefix)) {
      const std::string_view rest = item.substr(kDnsPrefix.size());
      const size_t colon = rest.rfind(':');
      unsigned port = 0;
      const std::string_view port_s = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
      const auto [p, ec] = std::from_chars(port_s.data(), port_s.data() + port_s.size(), port);
      if (colon == std::string_view::npos || colon == 0 || ec != std::errc() ||
          p != port_s.data() + port_s.size() || port == 0 || port > 65535 ||
          rest.find('>') != std::string_view::npos) {
        *error = "aggregator entry '" + std::string(item) + "' is not dns:NAME:PORT";
        return false;
      }
      std::vector<std::string> ips;
      if (!resolve_ipv4(std::string(rest.substr(0, colon)), timeout, &ips, error)) {
        *error = "aggregator entry '" + std::string(item) + "': " + *error;
        return false;
      }
      piece.clear();
      for (const std::string& ip : ips) {
        piece += (piece.empty() ? "" : ",") + ip + ":" + std::to_string(port);
      }
    }
    expanded += (expanded.empty() ? "" : ",") + piece;
  }
  *out = std::move(expanded);
  return true;
}

}  // namespace conflux::client
