// SPDX-License-Identifier: Apache-2.0
// aggregator_loadgen: measures the packets/s one confluxd dataplane thread sustains on
// loopback. Starts an in-process daemon, joins `workers` raw test workers, then runs
// generations of `slots` packets per worker (each worker sends its whole window with
// sendmmsg, then collects every result with recvmmsg) for `seconds`.
// Not a test; numbers from a shared 2-core machine are indicative only.
//   aggregator_loadgen [workers=2] [payload_bytes=1024] [slots=256] [seconds=3] [threads=1]
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "aggregator/daemon/daemon.h"
#include "test_client.h"

using namespace conflux;
using namespace conflux::agg;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const uint32_t n = argc > 1 ? std::atoi(argv[1]) : 2;
  const uint32_t payload = argc > 2 ? std::atoi(argv[2]) : 1024;
  const uint32_t slots = argc > 3 ? std::atoi(argv[3]) : 256;
  const double seconds = argc > 4 ? std::atof(argv[4]) : 3.0;
  const int threads = argc > 5 ? std::atoi(argv[5]) : 1;

  Config cfg;
  cfg.listen = "127.0.0.1";
  cfg.control_port = cfg.data_port = cfg.metrics_port = 0;
  cfg.threads = threads;
  cfg.log_level = "warn";
  cfg.max_payload_bytes = payload;
  cfg.max_slots_per_job = slots;
  setup_logging(cfg.log_level);
  std::string err;
  auto d = Daemon::create(cfg, &err);
  if (d == nullptr) {
    std::fprintf(stderr, "daemon: %s\n", err.c_str());
    return 1;
  }
  if (const Status st = d->start(); !st.ok()) {
    std::fprintf(stderr, "daemon: %s\n", st.message().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<testing::Worker>> w;
  for (uint32_t r = 0; r < n; ++r) {
    w.push_back(std::make_unique<testing::Worker>());
    testing::JoinSpec spec;
    spec.n_workers = n;
    spec.rank = r;
    spec.requested_slots = slots;
    spec.payload_bytes = payload;
    w.back()->start_join(d->control_port(), spec);
  }
  for (auto& x : w) {
    if (x->finish_join(3000) != proto::Status::kOk) return 1;
  }
  const uint32_t count = payload / 4;
  std::vector<std::vector<uint8_t>> dg(n * slots);
  std::vector<mmsghdr> msgs(slots);
  std::vector<iovec> iov(slots);
  std::vector<sockaddr_in> to(slots);
  std::vector<uint8_t> rx(size_t{slots} * 65536);
  std::vector<mmsghdr> rx_msgs(slots);
  std::vector<iovec> rx_iov(slots);
  for (auto& x : w) {  // results must not block on a missing one forever
    timeval tv{2, 0};
    setsockopt(x->udp.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  uint64_t generations = 0;
  const auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
    for (uint32_t r = 0; r < n; ++r) {
      for (uint32_t s = 0; s < slots; ++s) {
        proto::DataHeader h;
        h.job_id = w[r]->ack.job_id;
        h.job_token = w[r]->ack.job_token;
        h.contributor = static_cast<uint16_t>(r);
        h.slot = s;
        h.generation = static_cast<uint32_t>(generations);
        h.count = count;
        h.dtype = DType::kFloat32;
        auto& b = dg[r * slots + s];
        b.resize(48 + payload);
        proto::encode_data_header(h, b.data());
        iov[s] = {b.data(), b.size()};
        to[s] = {};
        to[s].sin_family = AF_INET;
        to[s].sin_port = htons(w[r]->port_for(s));
        to[s].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        msgs[s] = {};
        msgs[s].msg_hdr.msg_name = &to[s];
        msgs[s].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs[s].msg_hdr.msg_iov = &iov[s];
        msgs[s].msg_hdr.msg_iovlen = 1;
      }
      for (uint32_t done = 0; done < slots;) {
        const int k = sendmmsg(w[r]->udp.fd(), msgs.data() + done, slots - done, 0);
        if (k <= 0) return 1;
        done += static_cast<uint32_t>(k);
      }
    }
    for (uint32_t r = 0; r < n; ++r) {
      for (uint32_t got = 0; got < slots;) {
        for (uint32_t i = 0; i < slots; ++i) {
          rx_iov[i] = {rx.data() + size_t{i} * 65536, 65536};
          rx_msgs[i] = {};
          rx_msgs[i].msg_hdr.msg_iov = &rx_iov[i];
          rx_msgs[i].msg_hdr.msg_iovlen = 1;
        }
        timespec timeout{2, 0};
        const int k =
            recvmmsg(w[r]->udp.fd(), rx_msgs.data(), slots - got, MSG_WAITFORONE, &timeout);
        if (k <= 0) {
          std::fprintf(stderr, "result lost (gen %llu): increase socket buffers\n",
                       static_cast<unsigned long long>(generations));
          return 1;
        }
        got += static_cast<uint32_t>(k);
      }
    }
    ++generations;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  uint64_t in = 0, out = 0;
  for (unsigned q = 0; q < d->dataplane().n_queues(); ++q) {
    in += d->dataplane().counters(q).packets_in.get();
    out += d->dataplane().counters(q).packets_out.get();
  }
  std::printf(
      "workers=%u payload=%u slots=%u threads=%d: %.0f contributions/s in "
      "(%.0f per thread), %.0f results/s out, %.2f Gbit/s payload in, %llu generations\n",
      n, payload, slots, threads, in / secs, in / secs / threads, out / secs,
      in * payload * 8.0 / secs / 1e9, static_cast<unsigned long long>(generations));
  return 0;
}
