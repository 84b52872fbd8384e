// SPDX-License-Identifier: Apache-2.0
// End to end, the forger attack: a real confluxd and three real worker processes on
// 127.0.0.1, and an on-path forger that sniffs the loopback (AF_PACKET, root), learns the job
// id, token, slot and generation from every CONTRIB it sees and races CONTRIBs for the other
// ranks, and for every rank on the slot's next generation, with garbage payloads from its own
// UDP port. Here the sniffer lags the ranks on loopback, so most forgeries would come late even
// without source binding; what this test pins down is that every one of them is counted as
// wrong_source with real processes. (DataplaneDrops.ForgerWithTheTokenCannotPoisonARun forges
// in step with the run and fails without source binding.) Source binding (SPEC.md §4)
// drops every forgery as wrong_source; the workers verify every element of every result.
// The second test's forger also spoofs the source: raw IP packets carrying the sniffed rank's
// own address and port, the sniffed flags and the sniffed MAC trailer over a poisoned payload.
// Source binding cannot tell those apart; with data_mac on (SPEC.md §6) each is bad_mac.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "conflux/protocol/data.h"
#include "e2e_harness.h"
#include "tests/common/ci_skip.h"
#include "tests/common/wait_until.h"
#include "util/proc.h"

namespace conflux::client::e2e {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kRanks = 3;

class Forger {
 public:
  // kOwnPort: forgeries leave from the forger's own UDP port. kSpoofSource: each leaves as a
  // raw IPv4 packet with the source address and port of the rank it speaks for.
  enum class Mode { kOwnPort, kSpoofSource };
  explicit Forger(Mode mode = Mode::kOwnPort) : mode_(mode) {}

  // Listens on lo for CONTRIBs to `ports`; "" or why it cannot (then the test skips).
  std::string open(const std::set<uint16_t>& ports) {
    ports_ = ports;
    if (mode_ == Mode::kSpoofSource) {
      raw_ = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);  // implies IP_HDRINCL
      if (raw_ < 0) return std::string("raw IP socket: ") + std::strerror(errno);
    }
    sniff_ = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
    if (sniff_ < 0) return std::string("AF_PACKET socket: ") + std::strerror(errno);
    sockaddr_ll ll{};
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_IP);
    ll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
    if (bind(sniff_, reinterpret_cast<sockaddr*>(&ll), sizeof(ll)) != 0) {
      return std::string("bind lo: ") + std::strerror(errno);
    }
    timeval tv{0, 50000};
    setsockopt(sniff_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    udp_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(udp_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(udp_, reinterpret_cast<sockaddr*>(&a), &len);
    own_port_ = ntohs(a.sin_port);
    return "";
  }
  ~Forger() {
    stop();
    if (sniff_ >= 0) close(sniff_);
    if (udp_ >= 0) close(udp_);
    if (raw_ >= 0) close(raw_);
  }

  // Sniffs and forges until stop() or `limit` forgeries; `counted()` paces it (returns the
  // daemon's wrong_source count) so that no forgery is lost in a socket buffer.
  void start(uint64_t limit, std::function<double()> counted) {
    thread_ = std::thread([this, limit, counted] {
      std::vector<uint8_t> pkt(70000);
      while (!stop_ && forged_ < limit) {
        const ssize_t n = recv(sniff_, pkt.data(), pkt.size(), 0);
        if (n < 28) continue;
        const uint8_t* ip = pkt.data();
        const size_t ihl = size_t{ip[0] & 0x0fu} * 4;
        if ((ip[0] >> 4) != 4 || ip[9] != IPPROTO_UDP || size_t(n) < ihl + 8) continue;
        const uint8_t* udp = ip + ihl;
        const uint16_t sport = uint16_t(udp[0] << 8 | udp[1]);
        const uint16_t dport = uint16_t(udp[2] << 8 | udp[3]);
        if (sport == own_port_ || ports_.count(dport) == 0) continue;
        proto::DataHeader h;
        const uint8_t* payload = nullptr;
        const std::span<const uint8_t> dg(udp + 8, size_t(n) - ihl - 8);
        if (proto::parse_data(dg, 61440, &h, &payload) != proto::DropReason::kOk) continue;
        if (h.type != proto::PacketType::kContrib) continue;
        ++sniffed_;
        std::memcpy(&sources_[h.contributor].ip, ip + 12, 4);  // where each rank sends from
        sources_[h.contributor].port = sport;
        if (h.mac()) sniffed_trailer_.assign(dg.end() - proto::kMacTrailerSize, dg.end());
        // Race the other ranks for this (slot, generation), and get ahead of every rank on
        // the slot's next generation (which would open the bank with garbage).
        const proto::DataHeader seen = h;
        for (uint32_t ahead = 0; ahead < 2; ++ahead) {
          for (uint16_t c = 0; c < kRanks && forged_ < limit; ++c) {
            if (ahead == 0 && c == seen.contributor) continue;
            if (mode_ == Mode::kSpoofSource && sources_.count(c) == 0) continue;
            proto::DataHeader fh = seen;
            fh.contributor = c;  // speak for a rank, with a poisoned payload
            fh.generation = seen.generation + ahead;
            forge(fh, dport);
            if (forged_ % 50 == 0) pace(counted);
          }
        }
      }
    });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t forged() const { return forged_; }
  uint64_t sniffed() const { return sniffed_; }

 private:
  void forge(const proto::DataHeader& h, uint16_t dport) {
    std::vector<uint8_t> out(proto::kDataHeaderSize + h.wire_payload_bytes(), 0x7f);
    proto::encode_data_header(h, out.data());
    if (h.mac()) out.insert(out.end(), sniffed_trailer_.begin(), sniffed_trailer_.end());
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(dport);
    if (mode_ == Mode::kSpoofSource) out = spoofed(out, sources_.at(h.contributor), dport);
    const int fd = mode_ == Mode::kSpoofSource ? raw_ : udp_;
    if (sendto(fd, out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) ==
        static_cast<ssize_t>(out.size())) {
      ++forged_;
    }
  }

  struct Endpoint {
    uint32_t ip = 0;  // network order
    uint16_t port = 0;
  };
  // `datagram` inside IPv4 and UDP headers from `from` to 127.0.0.1:dport. The kernel fills
  // the IP checksum; a UDP checksum of 0 means none (IPv4).
  static std::vector<uint8_t> spoofed(const std::vector<uint8_t>& datagram, Endpoint from,
                                      uint16_t dport) {
    std::vector<uint8_t> p(sizeof(iphdr) + 8 + datagram.size());
    auto* iph = reinterpret_cast<iphdr*>(p.data());
    iph->version = 4;
    iph->ihl = 5;
    iph->tot_len = htons(static_cast<uint16_t>(p.size()));
    iph->frag_off = htons(IP_DF);
    iph->ttl = 64;
    iph->protocol = IPPROTO_UDP;
    iph->saddr = from.ip;
    iph->daddr = htonl(INADDR_LOOPBACK);
    uint8_t* udp = p.data() + sizeof(iphdr);
    const uint16_t len = static_cast<uint16_t>(8 + datagram.size());
    const uint16_t be[4] = {htons(from.port), htons(dport), htons(len), 0};
    std::memcpy(udp, be, sizeof be);
    std::memcpy(udp + 8, datagram.data(), datagram.size());
    return p;
  }

  // At most kInFlight forgeries not yet counted by the daemon (400 x 8 KiB fit its 8 MiB
  // socket buffers), so that none is lost and the count can be exact.
  void pace(const std::function<double()>& counted) {
    constexpr double kInFlight = 400;
    const auto until = std::chrono::steady_clock::now() + 100ms;
    while (counted() + kInFlight < double(forged_) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(2ms);
    }
  }

  Mode mode_;
  int sniff_ = -1, udp_ = -1, raw_ = -1;
  uint16_t own_port_ = 0;
  std::map<uint16_t, Endpoint> sources_;  // by contributor, as sniffed
  std::vector<uint8_t> sniffed_trailer_;
  std::set<uint16_t> ports_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> forged_{0}, sniffed_{0};
};

// Runs kRanks workers through a daemon started with `daemon_args` while `mode`'s forger
// attacks; every forgery must be counted under drop `reason` and every result exact.
void attack(Forger::Mode mode, const std::vector<std::string>& daemon_args,
            const std::vector<std::string>& worker_args, const std::string& reason) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  DaemonProcess d;
  ASSERT_EQ(d.start(dir, daemon_args), "");
  auto dropped = [&d, &reason] {
    std::string err;
    const std::string m = tools::http_get(d.metrics_port, "/metrics", &err);
    return m.empty() ? -1.0
                     : tools::prometheus_sum(m, "conflux_dataplane_drops_total",
                                             "reason=\"" + reason + "\"");
  };
  const std::set<uint16_t> ports(d.data_ports.begin(), d.data_ports.end());
  ASSERT_FALSE(ports.empty());
  Forger f(mode);
  if (const std::string why = f.open(ports); !why.empty()) {
    CONFLUX_SKIP_UNLESS_CI() << why;
  }
  constexpr uint64_t kLimit = 3000;
  f.start(kLimit, dropped);
  std::vector<std::string> args = {"--spin-us", "0",     "--warmup", "0",   "--iters", "200",
                                   "--dtype",   "float", "--op",     "sum", "--count", "65536"};
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  auto rs = run_workers(dir, d.endpoint(), kRanks, args, 60s);
  f.stop();
  for (const WorkerResult& w : rs) ASSERT_TRUE(w.exited_ok) << w.out << w.err;
  EXPECT_NE(rs[0].out.find("verified: all"), std::string::npos) << rs[0].out;
  EXPECT_GT(f.forged(), 0u);
  test::wait_until([&] { return dropped() >= double(f.forged()); }, 3s);
  EXPECT_EQ(dropped(), double(f.forged()));
  std::printf("sniffed %llu CONTRIBs, forged %llu, all dropped as %s\n",
              static_cast<unsigned long long>(f.sniffed()),
              static_cast<unsigned long long>(f.forged()), reason.c_str());
  EXPECT_EQ(d.stop(), "exit 0");
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

TEST(E2EForger, SniffedTokenCannotPoisonResults) {
  attack(Forger::Mode::kOwnPort, {}, {}, "wrong_source");
}

TEST(E2EForger, SourceSpoofingForgerIsStoppedByTheDataMac) {
  attack(Forger::Mode::kSpoofSource, {"--secret", "e2e-secret", "--data-mac=true"},
         {"--secret", "e2e-secret"}, "bad_mac");
}

}  // namespace
}  // namespace conflux::client::e2e
