// SPDX-License-Identifier: Apache-2.0
// run_allreduce: the windowed, retransmitting AllReduce of the test client.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "test_client.h"

namespace conflux::agg::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Packet {
  uint32_t slot;
  uint32_t gen;
  uint64_t offset;  // elements
  uint32_t count;
};

}  // namespace

bool run_allreduce(std::vector<Worker*>& workers, DType dt, Op op, uint64_t count,
                   const std::vector<std::vector<uint8_t>>& inputs, uint64_t* seq,
                   std::vector<std::vector<uint8_t>>* results, uint64_t* retransmits,
                   const RunOptions& opt) {
  const size_t n = workers.size();
  const size_t esize = dtype_size(dt);
  const uint32_t w_slots = workers[0]->ack.granted_slots;
  const uint64_t per_packet = workers[0]->ack.payload_bytes / esize;
  const uint64_t n_packets = (count + per_packet - 1) / per_packet;
  results->assign(n, std::vector<uint8_t>(count * esize));
  const auto give_up = Clock::now() + std::chrono::milliseconds(opt.give_up_ms);

  for (uint64_t k0 = 0; k0 < n_packets; k0 += w_slots) {
    const uint64_t k1 = std::min<uint64_t>(k0 + w_slots, n_packets);
    std::vector<Packet> pk;
    for (uint64_t k = k0; k < k1; ++k) {
      const uint64_t s = *seq + k;
      const uint64_t off = k * per_packet;
      pk.push_back({static_cast<uint32_t>(s % w_slots), static_cast<uint32_t>(s / w_slots), off,
                    static_cast<uint32_t>(std::min(per_packet, count - off))});
    }
    std::vector<std::set<size_t>> outstanding(n);
    auto send_all = [&](size_t r, bool re) {
      for (size_t i : outstanding[r]) {
        const Packet& p = pk[i];
        workers[r]->send_contrib(p.slot, p.gen, p.offset, dt, op,
                                 {inputs[r].data() + p.offset * esize, p.count * esize}, re);
        if (re) ++*retransmits;
      }
    };
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = 0; i < pk.size(); ++i) outstanding[r].insert(i);
    }
    for (size_t j = 0; j < n; ++j) send_all(opt.reverse_rank_order ? n - 1 - j : j, false);
    auto last_send = Clock::now();
    while (true) {
      bool done = true;
      for (size_t r = 0; r < n; ++r) {
        while (auto d = workers[r]->udp.recv(0)) {
          proto::DataHeader h;
          const uint8_t* payload = nullptr;
          if (proto::parse_data(*d, proto::kMaxPayloadBytes, &h, &payload) !=
                  proto::DropReason::kOk ||
              h.type != proto::PacketType::kResult) {
            continue;
          }
          for (size_t i : outstanding[r]) {
            const Packet& p = pk[i];
            if (h.slot == p.slot && h.generation == p.gen && h.offset == p.offset &&
                h.count == p.count && h.dtype == dt && h.op == op) {
              std::memcpy((*results)[r].data() + p.offset * esize, payload, p.count * esize);
              outstanding[r].erase(i);
              break;
            }
          }
        }
        done = done && outstanding[r].empty();
      }
      if (done) break;
      if (Clock::now() > give_up) return false;
      if (Clock::now() - last_send > std::chrono::milliseconds(opt.rto_ms)) {
        for (size_t r = 0; r < n; ++r) send_all(r, true);
        last_send = Clock::now();
      }
      std::vector<pollfd> fds;
      for (Worker* w : workers) fds.push_back({w->udp.fd(), POLLIN, 0});
      poll(fds.data(), fds.size(), 10);
    }
  }
  *seq += n_packets;
  return true;
}

}  // namespace conflux::agg::testing
