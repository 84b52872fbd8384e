// SPDX-License-Identifier: Apache-2.0
// PXN-shared connections with grouped receives (see pxn.h).
#include "driver/pxn.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "driver/idle.h"
#include "driver/pxn_conns.h"
#include "driver/rank_setup.h"
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

// One receive group's window of irecvs (oldest first).
struct Group {
  int posted = 0, done = 0;
  std::vector<void*> reqs;
};

class PxnExchange {
 public:
  PxnExchange(const PxnShape& s, const PxnLayout& l, const PxnConns& conns,
              const nccl::ncclNet_v11_t* net, const Deadline* dl, int rank, int nranks)
      : s_(s),
        l_(l),
        conns_(conns),
        net_(net),
        dl_(dl),
        rank_(rank),
        prev_((rank + nranks - 1) % nranks),
        carried_(size_t(l.conns), 0) {}
  ~PxnExchange() {
    std::free(sbuf_);
    std::free(rbuf_);
  }

  Status setup(size_t max_bytes) {
    max_bytes_ = max_bytes;
    const size_t slots = size_t(s_.senders) * size_t(s_.inflight);
    if (posix_memalign(&sbuf_, 4096, slots * max_bytes) != 0 ||
        posix_memalign(&rbuf_, 4096, slots * max_bytes) != 0) {
      return internal_error("out of memory for the PXN exchange's buffers");
    }
    // NCCL registers each connection's buffers once, on the comm that uses them.
    smh_.assign(size_t(l_.conns), nullptr);
    rmh_.assign(size_t(l_.conns), nullptr);
    for (int c = 0; c < l_.conns; ++c) {
      DRV_CALL(rank_, "net.regMr(send comm, PXN send slots, NCCL_PTR_HOST)",
               net_->regMr(conns_.send(c), sbuf_, slots * max_bytes, nccl::NCCL_PTR_HOST,
                           &smh_[size_t(c)]));
      DRV_CALL(rank_, "net.regMr(recv comm, PXN recv slots, NCCL_PTR_HOST)",
               net_->regMr(conns_.recv(c), rbuf_, slots * max_bytes, nccl::NCCL_PTR_HOST,
                           &rmh_[size_t(c)]));
    }
    phandles_.assign(slots * 2, nullptr);
    return Status();
  }

  Status teardown() {
    for (size_t c = 0; c < smh_.size(); ++c) {
      if (smh_[c] != nullptr)
        DRV_CALL(rank_, "net.deregMr(send comm)", net_->deregMr(conns_.send(int(c)), smh_[c]));
      if (rmh_[c] != nullptr)
        DRV_CALL(rank_, "net.deregMr(recv comm)", net_->deregMr(conns_.recv(int(c)), rmh_[c]));
    }
    smh_.clear();
    rmh_.clear();
    return Status();
  }

  // One iteration: every sender sends s_.steps messages of `bytes`; *wrong gets the bytes
  // received wrong.
  Status once(size_t bytes, int iter, uint64_t* wrong);

  // Messages each receive comm carried so far (index: connection).
  const std::vector<uint64_t>& carried() const { return carried_; }

 private:
  char* send_slot(int j, int step) const {
    return static_cast<char*>(sbuf_) + (size_t(j) * s_.inflight + step % s_.inflight) * max_bytes_;
  }
  char* recv_slot(int j, int step) const {
    return static_cast<char*>(rbuf_) + (size_t(step % s_.inflight) * s_.senders + j) * max_bytes_;
  }
  Status post_recvs(int g, Group* grp, size_t bytes, bool* progress);
  Status complete_recvs(int g, Group* grp, size_t bytes, int iter, uint64_t* wrong, bool* progress);
  Status hang(const std::vector<Sender>& snd, const std::vector<Group>& grp) const;

  const PxnShape s_;
  const PxnLayout& l_;
  const PxnConns& conns_;
  const nccl::ncclNet_v11_t* net_;
  const Deadline* dl_;
  const int rank_, prev_;
  size_t max_bytes_ = 0;
  void* sbuf_ = nullptr;
  void* rbuf_ = nullptr;
  std::vector<void*> smh_, rmh_;  // per connection
  std::vector<void*> phandles_;
  std::vector<uint64_t> carried_;
};

Status PxnExchange::hang(const std::vector<Sender>& snd, const std::vector<Group>& grp) const {
  std::string sent, got;
  for (size_t j = 0; j < snd.size(); ++j) {
    sent += (j ? ", " : "") + std::to_string(snd[j].done) + "/" + std::to_string(s_.steps);
  }
  for (size_t g = 0; g < grp.size(); ++g) {
    got += (g ? ", " : "") + std::to_string(grp[g].done) + "/" + std::to_string(s_.steps);
  }
  return timed_out("NCCL would hang: --timeout reached in the PXN exchange with irecvs " + got +
                   " complete per receive group of " + std::to_string(l_.groups()) +
                   " (sends complete per sender: " + sent + ")");
}

// Group g's irecvs, up to the window: one part per sender of the group, tag = that sender's
// rank; n profiler handle slots per irecv, as NCCL passes one per part.
Status PxnExchange::post_recvs(int g, Group* grp, size_t bytes, bool* progress) {
  const int first = l_.group_first[size_t(g)], parts = l_.group_parts[size_t(g)];
  const int c = l_.group_conn[size_t(g)], n = s_.senders, w = s_.inflight;
  void* data[kMaxPxnSenders];
  void* mh[kMaxPxnSenders];
  size_t sizes[kMaxPxnSenders];
  int tags[kMaxPxnSenders];
  while (grp->posted < s_.steps && grp->posted - grp->done < w) {
    for (int i = 0; i < parts; ++i) {
      data[i] = recv_slot(first + i, grp->posted);
      mh[i] = rmh_[size_t(c)];
      sizes[i] = bytes;
      tags[i] = prev_ * n + first + i;
    }
    void* req = nullptr;
    DRV_CALL(rank_, parts > 1 ? "net.irecv(grouped)" : "net.irecv",
             net_->irecv(conns_.recv(c), parts, data, sizes, tags, mh,
                         &phandles_[size_t(n) * (w + grp->posted % w) + size_t(first)], &req));
    if (req == nullptr) break;
    grp->reqs[size_t(grp->posted % w)] = req;
    ++grp->posted;
    *progress = true;
  }
  return Status();
}

Status PxnExchange::complete_recvs(int g, Group* grp, size_t bytes, int iter, uint64_t* wrong,
                                   bool* progress) {
  const int first = l_.group_first[size_t(g)], parts = l_.group_parts[size_t(g)];
  const int c = l_.group_conn[size_t(g)], n = s_.senders;
  int got[kMaxPxnSenders];
  while (grp->done < grp->posted) {
    int done = 0;
    std::fill(got, got + parts, -1);
    void* req = grp->reqs[size_t(grp->done % s_.inflight)];
    DRV_CALL(rank_, parts > 1 ? "net.test(grouped recv)" : "net.test(recv)",
             net_->test(req, &done, got));
    if (!done) break;
    for (int i = 0; i < parts; ++i) {
      if (got[i] != static_cast<int>(bytes)) {
        return internal_error("net.test(PXN recv) reported " + std::to_string(got[i]) +
                              " bytes for part " + std::to_string(i) + " of group " +
                              std::to_string(g) + ", the sender sent " + std::to_string(bytes));
      }
      *wrong += wrong_bytes(recv_slot(first + i, grp->done), bytes, prev_ * n + first + i,
                            grp->done, iter);
    }
    carried_[size_t(c)] += uint64_t(parts);
    if (net_->irecvConsumed != nullptr) {
      DRV_CALL(rank_, "net.irecvConsumed", net_->irecvConsumed(conns_.recv(c), parts, req));
    }
    ++grp->done;
    *progress = true;
  }
  return Status();
}

Status PxnExchange::once(size_t bytes, int iter, uint64_t* wrong) {
  const int n = s_.senders, w = s_.inflight;
  std::vector<Sender> snd(static_cast<size_t>(n));
  for (Sender& x : snd) x.reqs.assign(size_t(w), nullptr);
  std::vector<Group> grp(static_cast<size_t>(l_.groups()));
  for (Group& gr : grp) gr.reqs.assign(size_t(w), nullptr);
  PollPass pass;
  auto all_done = [&] {
    for (const Sender& x : snd)
      if (x.done < s_.steps) return false;
    for (const Group& gr : grp)
      if (gr.done < s_.steps) return false;
    return true;
  };
  while (!all_done()) {
    bool progress = false;
    const Clock::time_point now = Clock::now();
    for (int j = 0; j < n; ++j) {
      Sender& x = snd[size_t(j)];
      const int c = l_.sender_conn[size_t(j)];
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
        DRV_CALL(rank_, l_.conns == 1 ? "net.isend(PXN-shared)" : "net.isend(PXN, own connection)",
                 net_->isend(conns_.send(c), p, bytes, rank_ * n + j, smh_[size_t(c)],
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
    // Each receive group posts and completes its own irecvs, as recvProxyProgress does.
    for (int g = 0; g < l_.groups(); ++g) {
      CFX_TRY(post_recvs(g, &grp[size_t(g)], bytes, &progress));
      CFX_TRY(complete_recvs(g, &grp[size_t(g)], bytes, iter, wrong, &progress));
    }
    if (pass.expired(progress, *dl_)) return hang(snd, grp);
  }
  return Status();
}

}  // namespace

PxnLayout pxn_layout(int senders, int max_recvs) {
  PxnLayout l;
  const bool shared = max_recvs > 1;  // NCCL_NET_SHARED_COMMS on, as by default
  l.conns = shared ? 1 : senders;
  for (int j = 0; j < senders; ++j) l.sender_conn.push_back(shared ? 0 : j);
  const int per_group = shared ? max_recvs : 1;
  for (int first = 0; first < senders; first += per_group) {
    l.group_first.push_back(first);
    l.group_parts.push_back(std::min(per_group, senders - first));
    l.group_conn.push_back(shared ? 0 : first);
  }
  return l;
}

std::string describe_pxn_layout(const PxnLayout& l, int max_recvs) {
  const int senders = int(l.sender_conn.size());
  std::string parts;
  for (int g = 0; g < l.groups(); ++g) {
    if (g > 0 && l.group_parts[size_t(g)] == l.group_parts[size_t(g - 1)]) continue;
    parts += (parts.empty() ? "" : "/") + std::to_string(l.group_parts[size_t(g)]);
  }
  return "maxRecvs " + std::to_string(max_recvs) + ": " + std::to_string(senders) +
         " senders per peer over " + std::to_string(l.conns) +
         (l.conns == 1 ? " shared connection" : " connections (one per sender)") + ", " +
         std::to_string(l.groups()) + " receive group(s) of " + parts + " part(s) per irecv";
}

Status run_pxn(const Options& o, const PxnShape& shape, const PxnLayout& layout, void* ctx,
               NetRing* ring, Bootstrap* bs, std::vector<Row>* rows,
               const std::function<void(const std::string&)>& note) {
  const int rank = bs->rank(), nranks = bs->nranks();
  if (nranks < 2) return internal_error("--modes pxn needs at least 2 ranks");
  if (shape.senders > kMaxPxnSenders) {
    return internal_error("--pxn-senders " + std::to_string(shape.senders) + " is above " +
                          std::to_string(kMaxPxnSenders));
  }
  const std::vector<size_t> sizes = size_list(o);
  PxnConns conns;
  CFX_TRY(conns.open(ring->net(), ctx, ring, bs, layout.conns));
  std::string res;
  CFX_TRY(gather_threads_and_fds(bs, &res));
  note("pxn: " + std::to_string(layout.conns) + " send + " + std::to_string(layout.conns) +
       " receive comms per rank for the exchange; per rank process with them open: " + res);
  PxnExchange x(shape, layout, conns, ring->net(), ring->deadline(), rank, nranks);
  CFX_TRY(x.setup(sizes.back()));
  int iter = 0;
  for (size_t bytes : sizes) {
    uint64_t wrong = 0;
    for (int i = 0; i < o.warmup; ++i) CFX_TRY(x.once(bytes, iter++, &wrong));
    CFX_TRY(bs->barrier());
    tools::HostCpuWindow cpu;
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < o.iters; ++i) CFX_TRY(x.once(bytes, iter++, &wrong));
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / std::max(1, o.iters);
    CFX_TRY(bs->barrier());  // every rank's timed iterations are in rank 0's CPU window
    cpu.stop();
    std::vector<std::string> all;
    CFX_TRY(bs->allgather(std::to_string(us) + " " + std::to_string(wrong), &all));
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
  std::string carried;
  for (uint64_t m : x.carried()) carried += (carried.empty() ? "" : " ") + std::to_string(m);
  note("pxn: messages carried per receive comm on rank " + std::to_string(rank) + ": " + carried);
  CFX_TRY(x.teardown());
  return conns.close();
}

}  // namespace conflux::driver
