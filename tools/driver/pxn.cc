// PXN-shared connections with grouped receives (see pxn.h).
#include "driver/pxn.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "driver/idle.h"
#include "util/proc.h"

namespace conflux::driver {
namespace {

using Clock = std::chrono::steady_clock;

// The content of message `step` of sender `tag` in iteration `iter`: every 8-byte word a mix of
// its index and the three keys, so a message delivered to the wrong part, step or iteration
// (or shifted) fails the check.
uint64_t word_of(int tag, int step, int iter, size_t w) {
  uint64_t x = (uint64_t(uint32_t(tag)) << 40) ^ (uint64_t(uint32_t(iter)) << 20) ^
               uint64_t(uint32_t(step)) ^ (uint64_t(w) * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 29;
  return x;
}

void fill_message(char* p, size_t bytes, int tag, int step, int iter) {
  const size_t words = bytes / 8;
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = word_of(tag, step, iter, w);
    std::memcpy(p + 8 * w, &v, 8);
  }
  if (bytes % 8 != 0) {
    const uint64_t v = word_of(tag, step, iter, words);
    std::memcpy(p + 8 * words, &v, bytes % 8);
  }
}

// Bytes of `p` that differ from the expected message.
uint64_t wrong_bytes(const char* p, size_t bytes, int tag, int step, int iter) {
  uint64_t wrong = 0;
  const size_t words = (bytes + 7) / 8;
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = word_of(tag, step, iter, w);
    const size_t n = w + 1 < words || bytes % 8 == 0 ? 8 : bytes % 8;
    if (n == 8 && std::memcmp(p + 8 * w, &v, 8) == 0) continue;
    const auto* want = reinterpret_cast<const unsigned char*>(&v);
    const auto* got = reinterpret_cast<const unsigned char*>(p + 8 * w);
    for (size_t i = 0; i < n; ++i) wrong += got[i] != want[i];
  }
  return wrong;
}

struct Sender {
  int posted = 0, done = 0;
  bool started = false;
  Clock::time_point start{};
  std::vector<void*> reqs;
};

class PxnExchange {
 public:
  PxnExchange(const PxnShape& s, NetRing* ring, int rank, int nranks)
      : s_(s),
        net_(ring->net()),
        send_comm_(ring->send_comm()),
        recv_comm_(ring->recv_comm()),
        dl_(ring->deadline()),
        rank_(rank),
        prev_((rank + nranks - 1) % nranks) {}
  ~PxnExchange() {
    std::free(sbuf_);
    std::free(rbuf_);
  }

  Status setup(size_t max_bytes) {
    max_bytes_ = max_bytes;
    const size_t slots = size_t(s_.senders) * size_t(s_.inflight);
    if (posix_memalign(&sbuf_, 4096, slots * max_bytes) != 0 ||
        posix_memalign(&rbuf_, 4096, slots * max_bytes) != 0) {
      return Status::Error("out of memory for the PXN exchange's buffers");
    }
    // NCCL registers each connection's buffers once, on the comm that uses them.
    DRV_CALL(rank_, "net.regMr(send comm, PXN send slots, NCCL_PTR_HOST)",
             net_->regMr(send_comm_, sbuf_, slots * max_bytes, nccl::NCCL_PTR_HOST, &smh_));
    DRV_CALL(rank_, "net.regMr(recv comm, PXN recv slots, NCCL_PTR_HOST)",
             net_->regMr(recv_comm_, rbuf_, slots * max_bytes, nccl::NCCL_PTR_HOST, &rmh_));
    phandles_.assign(slots * 2, nullptr);
    return Status::Ok();
  }

  Status teardown() {
    if (smh_ != nullptr) DRV_CALL(rank_, "net.deregMr(send comm)", net_->deregMr(send_comm_, smh_));
    if (rmh_ != nullptr) DRV_CALL(rank_, "net.deregMr(recv comm)", net_->deregMr(recv_comm_, rmh_));
    smh_ = rmh_ = nullptr;
    return Status::Ok();
  }

  // One iteration: every sender sends s_.steps messages of `bytes`; *wrong gets the bytes
  // received wrong.
  Status once(size_t bytes, int iter, uint64_t* wrong);

 private:
  char* send_slot(int j, int step) const {
    return static_cast<char*>(sbuf_) + (size_t(j) * s_.inflight + step % s_.inflight) * max_bytes_;
  }
  char* recv_slot(int j, int step) const {
    return static_cast<char*>(rbuf_) + (size_t(step % s_.inflight) * s_.senders + j) * max_bytes_;
  }
  Status hang(const std::vector<Sender>& snd, int r_done) const;

  const PxnShape s_;
  const nccl::ncclNet_v11_t* net_;
  void* send_comm_;
  void* recv_comm_;
  const Deadline* dl_;
  const int rank_, prev_;
  size_t max_bytes_ = 0;
  void* sbuf_ = nullptr;
  void* rbuf_ = nullptr;
  void* smh_ = nullptr;
  void* rmh_ = nullptr;
  std::vector<void*> phandles_;
};

Status PxnExchange::hang(const std::vector<Sender>& snd, int r_done) const {
  std::string sent;
  for (size_t j = 0; j < snd.size(); ++j) {
    sent += (j ? ", " : "") + std::to_string(snd[j].done) + "/" + std::to_string(s_.steps);
  }
  return Status::Error("NCCL would hang: --timeout reached in the PXN exchange with " +
                       std::to_string(r_done) + "/" + std::to_string(s_.steps) +
                       " grouped receives complete (sends complete per sender: " + sent + ")");
}

Status PxnExchange::once(size_t bytes, int iter, uint64_t* wrong) {
  const int n = s_.senders, w = s_.inflight;
  std::vector<Sender> snd(static_cast<size_t>(n));
  for (Sender& x : snd) x.reqs.assign(size_t(w), nullptr);
  std::vector<void*> rreq(size_t(w), nullptr);
  int r_posted = 0, r_done = 0;
  // One grouped receive's arguments; only the parts' buffers change from step to step.
  std::vector<void*> data(static_cast<size_t>(n)), mh(static_cast<size_t>(n), rmh_);
  std::vector<size_t> sizes(static_cast<size_t>(n), bytes);
  std::vector<int> tags(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) tags[size_t(j)] = prev_ * n + j;
  PollPass pass;
  auto all_done = [&] {
    for (const Sender& x : snd)
      if (x.done < s_.steps) return false;
    return r_done == s_.steps;
  };
  while (!all_done()) {
    bool progress = false;
    const Clock::time_point now = Clock::now();
    for (int j = 0; j < n; ++j) {
      Sender& x = snd[size_t(j)];
      if (!x.started) {
        const Sender* before = j == 0 ? nullptr : &snd[size_t(j - 1)];
        if (before == nullptr ||
            (before->started && (before->posted >= std::min(s_.lag, s_.steps) ||
                                 now - before->start >= std::chrono::milliseconds(100)))) {
          x.started = true;
          x.start = now;
        }
      }
      // This sender's isends, up to its window (NULL request: the plugin is busy, retry).
      while (x.started && x.posted < s_.steps && x.posted - x.done < w) {
        char* p = send_slot(j, x.posted);
        fill_message(p, bytes, rank_ * n + j, x.posted, iter);
        void* req = nullptr;
        DRV_CALL(rank_, "net.isend(PXN-shared)",
                 net_->isend(send_comm_, p, bytes, rank_ * n + j, smh_,
                             &phandles_[size_t(j) * w + x.posted % w], &req));
        if (req == nullptr) break;
        x.reqs[size_t(x.posted % w)] = req;
        ++x.posted;
        progress = true;
      }
      while (x.done < x.posted) {
        int done = 0, size = 0;
        DRV_CALL(rank_, "net.test(PXN send)", net_->test(x.reqs[size_t(x.done % w)], &done, &size));
        if (!done) break;
        ++x.done;
        progress = true;
      }
    }
    // Grouped receives: one part per sender of rank-1, tag = that sender's rank.
    while (r_posted < s_.steps && r_posted - r_done < w) {
      for (int j = 0; j < n; ++j) data[size_t(j)] = recv_slot(j, r_posted);
      void* req = nullptr;
      // n profiler handle slots per grouped receive, as NCCL passes one per part.
      DRV_CALL(rank_, "net.irecv(grouped)",
               net_->irecv(recv_comm_, n, data.data(), sizes.data(), tags.data(), mh.data(),
                           &phandles_[size_t(n) * (w + r_posted % w)], &req));
      if (req == nullptr) break;
      rreq[size_t(r_posted % w)] = req;
      ++r_posted;
      progress = true;
    }
    while (r_done < r_posted) {
      int done = 0;
      std::fill(got.begin(), got.end(), -1);
      void* req = rreq[size_t(r_done % w)];
      DRV_CALL(rank_, "net.test(grouped recv)", net_->test(req, &done, got.data()));
      if (!done) break;
      for (int j = 0; j < n; ++j) {
        if (got[size_t(j)] != static_cast<int>(bytes)) {
          return Status::Error("net.test(grouped recv) reported " + std::to_string(got[size_t(j)]) +
                               " bytes for part " + std::to_string(j) + ", the sender sent " +
                               std::to_string(bytes));
        }
        *wrong += wrong_bytes(recv_slot(j, r_done), bytes, prev_ * n + j, r_done, iter);
      }
      if (net_->irecvConsumed != nullptr) {
        DRV_CALL(rank_, "net.irecvConsumed", net_->irecvConsumed(recv_comm_, n, req));
      }
      ++r_done;
      progress = true;
    }
    if (pass.expired(progress, *dl_)) return hang(snd, r_done);
  }
  return Status::Ok();
}

}  // namespace

Status run_pxn(const Options& o, const PxnShape& shape, NetRing* ring, Bootstrap* bs,
               std::vector<Row>* rows) {
  const int rank = bs->rank(), nranks = bs->nranks();
  if (nranks < 2) return Status::Error("--modes pxn needs at least 2 ranks");
  const std::vector<size_t> sizes = size_list(o);
  PxnExchange x(shape, ring, rank, nranks);
  DRV_TRY(x.setup(sizes.back()));
  int iter = 0;
  for (size_t bytes : sizes) {
    uint64_t wrong = 0;
    for (int i = 0; i < o.warmup; ++i) DRV_TRY(x.once(bytes, iter++, &wrong));
    DRV_TRY(bs->barrier());
    tools::HostCpuWindow cpu;
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < o.iters; ++i) DRV_TRY(x.once(bytes, iter++, &wrong));
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / std::max(1, o.iters);
    DRV_TRY(bs->barrier());  // every rank's timed iterations are in rank 0's CPU window
    cpu.stop();
    std::vector<std::string> all;
    DRV_TRY(bs->allgather(std::to_string(us) + " " + std::to_string(wrong), &all));
    Row row{Mode::kPxn, bytes, bytes, DType::kUint8, Op::kSum, false, 0, 0, 0, 0};
    for (const std::string& a : all) {
      row.time_us = std::max(row.time_us, std::strtod(a.c_str(), nullptr));
      row.wrong += std::strtoull(a.c_str() + a.find(' ') + 1, nullptr, 10);
    }
    // Per iteration each rank receives senders x steps messages of `bytes`.
    const double moved = double(bytes) * shape.senders * shape.steps;
    row.algbw = row.time_us > 0 ? moved / row.time_us / 1e3 : 0;
    row.busbw = row.algbw;
    row.host_cpu_window_s = cpu.seconds();
    row.host_cpu_s_per_gb = cpu.per_gb(moved * o.iters / 1e9);
    if (rank == 0) print_row(row);
    rows->push_back(row);
  }
  return x.teardown();
}

}  // namespace conflux::driver
