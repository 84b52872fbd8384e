// SPDX-License-Identifier: Apache-2.0
// --nccl-steps: NCCL 2.28's proxy over the p2p net, step by step (see nccl_steps.h).
#include "driver/nccl_steps.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "driver/net_ring.h"
#include "driver/plugin.h"

namespace conflux::driver {
namespace {

constexpr int kSteps = 8;         // NCCL_STEPS
constexpr int kSharedSteps = 16;  // NCCL_SHARED_STEPS
constexpr size_t kElt = 4;        // float

enum Proto { kLL = 0, kLL128 = 1, kSimple = 2 };
const char* proto_name(Proto p) { return p == kLL ? "LL" : p == kLL128 ? "LL128" : "Simple"; }

struct ProtoInfo {
  size_t step_size;     // buffSizes[p] / NCCL_STEPS
  int chunk_steps;      // ring Simple: ALLREDUCE_CHUNKSTEPS, else 1
  int slice_steps;      // ring Simple: ALLREDUCE_SLICESTEPS, else 1
  size_t chunk_data;    // data bytes per chunk (calcCollChunking)
  size_t thread_bytes;  // nt * threadThreshold: fewer channels below nc * this
};
// DEFAULT_LL_BUFFSIZE 512 KiB, DEFAULT_LL128_BUFFSIZE 120*640*8*8, DEFAULT_BUFFSIZE 4 MiB.
const ProtoInfo kProto[3] = {
    {65536, 1, 1, 32768, 512 * 8},
    {614400, 1, 1, 614400 / 16 * 15, 640 * 8},
    {524288, 4, 2, 4 * 524288, 512 * 64},
};
constexpr size_t kBufBytes = 8 * 614400;  // the largest protocol buffer

size_t divup(size_t a, size_t b) { return (a + b - 1) / b; }
size_t alignup(size_t a, size_t b) { return divup(a, b) * b; }

size_t wire_bytes(Proto p, size_t data) {
  if (p == kLL) return divup(data, 8) * 16;        // 16-byte lines with 8 data bytes
  if (p == kLL128) return divup(data, 120) * 128;  // 128-byte lines with 120 data bytes
  return data;
}

// One AllReduce on one channel.
struct ChanOp {
  bool used = false;
  int msgs = 0;  // messages per direction
  int nsteps = 0;
  std::vector<size_t> send_sizes;
  std::vector<size_t> recv_sizes;          // what rank-1 sends (same channel split)
  std::vector<size_t> got_sizes;           // what test() reported
  std::vector<std::pair<int, int>> units;  // GPU: (recv msg, send msg), -1 = none
  uint64_t sbase = 0, rbase = 0;
  // send proxy sub
  uint64_t sposted = 0, stransmitted = 0, sdone = 0;
  void* sreq[kSteps] = {};
  // recv proxy sub
  uint64_t rposted = 0, rreceived = 0, rtransmitted = 0, rdone = 0;
  void* rreq[kSteps] = {};
  void* rcache[kSteps] = {};
  // GPU
  size_t gpu_unit = 0;
  int gpu_sent = 0;  // messages produced into the send FIFO
};

struct Op {
  Proto p = kLL;
  int nsubs = 0;
  std::vector<ChanOp> ch;
};

struct Conn {
  void* send = nullptr;
  void* recv = nullptr;
  void* smh = nullptr;
  void* rmh = nullptr;
  std::vector<char> sbuf, rbuf;
  uint64_t sstep = 0, rstep = 0;  // resources->step of each direction
  uint64_t send_head = 0;         // send side: written by the proxy (base + done)
  uint64_t recv_tail = 0;         // recv side: written by the proxy (base + transmitted)
  uint64_t recv_head = 0;         // recv side: written by the GPU (consumed)
  void* phandles[2 * kSteps] = {};
};

class Emu {
 public:
  Emu(const Options& o, const nccl::ncclNet_v11_t* net, void* ctx, Bootstrap* bs,
      const Deadline* dl)
      : o_(o), net_(net), ctx_(ctx), bs_(bs), dl_(dl) {
    rank_ = bs->rank();
    n_ = bs->nranks();
    nch_ = o.nccl_channels;
    if (const char* s = std::getenv("CONFLUX_DRIVER_STALL_S")) stall_s_ = std::atof(s);
    if (const char* s = std::getenv("CONFLUX_DRIVER_GPU_JITTER_US")) gpu_jitter_us_ = std::atoi(s);
    // ... on one rank only (the others then run ahead of it and fill its sockets)
    if (const char* s = std::getenv("CONFLUX_DRIVER_GPU_JITTER_RANK")) {
      if (*s != '\0' && std::atoi(s) != rank_) gpu_jitter_us_ = 0;
    }
    if (const char* s = std::getenv("CONFLUX_DRIVER_PROXY_JITTER_US"))
      proxy_jitter_us_ = std::atoi(s);
    rng_ = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(rank_ + 1) ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }

  Status setup();
  Status sweep();
  Status teardown();
  uint64_t wrong() const { return wrong_; }

 private:
  void build(size_t bytes, int iters);
  Status recv_progress(Op& op, bool* progress);
  Status send_progress(Op& op, bool* progress);
  void gpu_advance(bool* progress);
  bool landed(const ChanOp& co, const Conn& k, const ProtoInfo& pi, int r, size_t c) const;
  void dump(size_t bytes);

  const Options& o_;
  const nccl::ncclNet_v11_t* net_;
  void* ctx_;
  Bootstrap* bs_;
  const Deadline* dl_;
  int rank_ = 0, n_ = 1, nch_ = 1;
  double stall_s_ = 10.0;
  // Test hooks (environment): the GPU stops for up to N us after a unit (a kernel held up by
  // the other ranks' kernels on a shared GPU); the proxy sleeps up to N us now and then.
  int gpu_jitter_us_ = 0, proxy_jitter_us_ = 0;
  uint64_t rng_ = 1;
  std::chrono::steady_clock::time_point gpu_resume_{};
  uint64_t rand() {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }
  std::vector<Conn> conns_;
  std::vector<Op> ops_;
  size_t kernel_ = 0, active_send_ = 0, active_recv_ = 0;
  uint64_t wrong_ = 0;  // received steps whose size or data was not rank-1's
  int mod_prev() const { return (rank_ + n_ - 1) % n_; }
};

Status Emu::setup() {
  conns_.resize(static_cast<size_t>(nch_));
  std::vector<void*> listens;
  std::string peer;
  CFX_TRY(listen_to_next(net_, ctx_, bs_, nch_, "channel", &listens, &peer));
  for (int c = 0; c < nch_; ++c) {
    CFX_TRY(connect_pair(net_, ctx_, rank_, listens[c], &peer[c * nccl::NCCL_NET_HANDLE_MAXSIZE],
                         dl_, "channel " + std::to_string(c), &conns_[c].send, &conns_[c].recv));
  }
  for (int c = 0; c < nch_; ++c) {
    Conn& k = conns_[c];
    k.sbuf.assign(kBufBytes, 0);
    k.rbuf.assign(kBufBytes, 0);
    DRV_CALL(rank_, "net.regMr(send)",
             net_->regMr(k.send, k.sbuf.data(), k.sbuf.size(), nccl::NCCL_PTR_HOST, &k.smh));
    DRV_CALL(rank_, "net.regMr(recv)",
             net_->regMr(k.recv, k.rbuf.data(), k.rbuf.size(), nccl::NCCL_PTR_HOST, &k.rmh));
  }
  return Status();
}

Status Emu::teardown() {
  CFX_TRY(bs_->barrier());  // every rank's requests are complete
  for (Conn& k : conns_) {
    DRV_CALL(rank_, "net.deregMr", net_->deregMr(k.send, k.smh));
    DRV_CALL(rank_, "net.deregMr", net_->deregMr(k.recv, k.rmh));
    DRV_CALL(rank_, "net.closeSend", net_->closeSend(k.send));
    DRV_CALL(rank_, "net.closeRecv", net_->closeRecv(k.recv));
  }
  return Status();
}

// The ops of one size: the protocol, the channels, and per channel the RingTwice steps.
void Emu::build(size_t bytes, int iters) {
  ops_.clear();
  kernel_ = active_send_ = active_recv_ = 0;
  const size_t count = std::max<size_t>(bytes / kElt, 1);
  const size_t nbytes = count * kElt;
  const Proto p = nbytes <= (size_t{256} << 10) ? kLL
                  : nbytes <= (size_t{4} << 20) ? kLL128
                                                : kSimple;
  const ProtoInfo& pi = kProto[p];
  int nc = nch_;
  while (nc > 1 && nbytes < static_cast<size_t>(nc) * pi.thread_bytes) --nc;
  const size_t n = static_cast<size_t>(n_);
  const size_t chunk_count = pi.chunk_data / kElt;
  const size_t loop_count = n * chunk_count;
  const size_t nloops = divup(nbytes, static_cast<size_t>(nc) * n * pi.chunk_data);
  const int k = pi.chunk_steps / pi.slice_steps;  // messages per ring step
  const size_t S = 2 * (n - 1);
  // The chunks rank r sends at ring steps 0..S-1 (all_reduce.h runRing).
  // (also for rank-1, whose sizes this rank receives and checks).
  auto mod = [this](long v) { return static_cast<size_t>(((v % n_) + n_) % n_); };
  auto chunks_of = [&](int r) {
    std::vector<size_t> q;
    for (size_t j = 1; j <= n - 1; ++j) q.push_back(mod(r - static_cast<long>(j)));
    q.push_back(static_cast<size_t>(r));
    for (size_t j = 1; j + 1 <= n - 1; ++j) q.push_back(mod(r - static_cast<long>(j)));
    return q;
  };
  const std::vector<size_t> seq = chunks_of(rank_);
  const std::vector<size_t> pseq = chunks_of(static_cast<int>(mod(rank_ - 1)));
  const size_t per_ch = alignup(divup(count, static_cast<size_t>(nc)), 16 / kElt);
  for (int it = 0; it < iters; ++it) {
    Op op;
    op.p = p;
    op.nsubs = nc;
    op.ch.resize(conns_.size());
    for (int c = 0; c < nc; ++c) {
      ChanOp& co = op.ch[c];
      Conn& kc = conns_[c];
      co.used = true;
      const size_t first = std::min(count, per_ch * c);
      const size_t ch_count = std::min(per_ch, count - first);
      co.msgs = static_cast<int>(nloops * S * k);
      co.nsteps = static_cast<int>(nloops * S * pi.chunk_steps);
      for (size_t l = 0; l < nloops; ++l) {
        const long rem = static_cast<long>(ch_count) - static_cast<long>(l * loop_count);
        const size_t cc = rem < static_cast<long>(loop_count)
                              ? alignup(divup(static_cast<size_t>(std::max(rem, 0L)), n), 16 / kElt)
                              : chunk_count;
        const size_t slice = alignup(divup(cc, static_cast<size_t>(k)), 16 / kElt);
        for (size_t j = 0; j < S; ++j) {
          for (int who = 0; who < 2; ++who) {
            const size_t chunk = who == 0 ? seq[j] : pseq[j];
            const long nelem =
                std::clamp<long>(rem - static_cast<long>(chunk * cc), 0, static_cast<long>(cc));
            for (int i = 0; i < k; ++i) {
              const long e = std::clamp<long>(nelem - static_cast<long>(i * slice), 0,
                                              static_cast<long>(slice));
              (who == 0 ? co.send_sizes : co.recv_sizes)
                  .push_back(wire_bytes(p, static_cast<size_t>(e) * kElt));
            }
          }
        }
        const int mb = static_cast<int>(l * S * k);
        for (int i = 0; i < k; ++i) co.units.push_back({-1, mb + i});
        for (size_t j = 1; j < S; ++j)
          for (int i = 0; i < k; ++i)
            co.units.push_back(
                {mb + static_cast<int>((j - 1) * k) + i, mb + static_cast<int>(j * k) + i});
        for (int i = 0; i < k; ++i)
          co.units.push_back({mb + static_cast<int>((S - 1) * k) + i, -1});
      }
      co.sbase = alignup(kc.sstep, pi.chunk_steps);
      kc.sstep = co.sbase + co.nsteps;
      co.rbase = alignup(kc.rstep, pi.chunk_steps);
      kc.rstep = co.rbase + co.nsteps;
    }
    ops_.push_back(std::move(op));
  }
}

// LL/LL128: every 8-byte word of recv message r carries its step's tag (the flags are in).
bool Emu::landed(const ChanOp& co, const Conn& k, const ProtoInfo& pi, int r, size_t c) const {
  const uint64_t step = co.rbase + static_cast<uint64_t>(r) * static_cast<uint64_t>(pi.slice_steps);
  const uint64_t want = (step << 16) | (static_cast<uint64_t>(mod_prev()) << 8) | c;
  const auto* w =
      reinterpret_cast<const volatile uint64_t*>(k.rbuf.data() + (step % kSteps) * pi.step_size);
  for (size_t i = 0; i < co.recv_sizes[r] / 8; ++i) {
    if (w[i] != want) return false;
  }
  return true;
}

// The GPU of each channel: runs the current kernel's units in order as far as it can.
void Emu::gpu_advance(bool* progress) {
  if (gpu_jitter_us_ > 0 && std::chrono::steady_clock::now() < gpu_resume_) return;
  while (kernel_ < ops_.size()) {
    Op& op = ops_[kernel_];
    const ProtoInfo& pi = kProto[op.p];
    const uint64_t sl = static_cast<uint64_t>(pi.slice_steps);
    bool finished = true;
    for (size_t c = 0; c < op.ch.size(); ++c) {
      ChanOp& co = op.ch[c];
      if (!co.used) continue;
      Conn& k = conns_[c];
      while (co.gpu_unit < co.units.size()) {
        const auto [r, s] = co.units[co.gpu_unit];
        // Simple waits for the proxy's recvTail; LL/LL128 read the buffer as it lands, until
        // every line carries the step's flag (a 0-byte step at once), before any test().
        const bool ll = op.p != kSimple;
        if (r >= 0 && !ll && k.recv_tail < co.rbase + (r + 1) * sl) break;  // data not in
        if (r >= 0 && ll && !landed(co, k, pi, r, c)) break;
        if (s >= 0 && co.sbase + (s + 1) * sl > k.send_head + kSteps) break;  // FIFO full
        if (r >= 0) {
          // The data of step rbase + r*sl from rank-1: every 8-byte word tagged with it.
          const uint64_t step = co.rbase + static_cast<uint64_t>(r) * sl;
          const uint64_t want = (step << 16) | (static_cast<uint64_t>(mod_prev()) << 8) | c;
          const size_t got = ll ? co.recv_sizes[r] : co.got_sizes[r];
          const char* b = k.rbuf.data() + (step % kSteps) * pi.step_size;
          size_t bad = got != co.recv_sizes[r] ? 1 : 0;
          for (size_t w = 0; bad == 0 && w + 8 <= got; w += 8) {
            uint64_t v;
            std::memcpy(&v, b + w, 8);
            if (v != want) bad = w + 8;
          }
          if (bad != 0 && wrong_++ < 10) {
            uint64_t v = 0;
            if (bad >= 8) std::memcpy(&v, b + bad - 8, 8);
            std::fprintf(stderr,
                         "[rank %d] nccl-steps: WRONG DATA ch %zu recv msg %d (step %llu): got %zu "
                         "B (want %zu), word at %zu = %#llx want %#llx\n",
                         rank_, c, r, (unsigned long long)step, got, co.recv_sizes[r],
                         bad >= 8 ? bad - 8 : 0, (unsigned long long)v, (unsigned long long)want);
          }
          k.recv_head = co.rbase + (r + 1) * sl;
        }
        if (s >= 0) {
          const uint64_t step = co.sbase + static_cast<uint64_t>(s) * sl;
          const uint64_t tagv = (step << 16) | (static_cast<uint64_t>(rank_) << 8) | c;
          char* b = k.sbuf.data() + (step % kSteps) * pi.step_size;
          for (size_t w = 0; w + 8 <= co.send_sizes[s]; w += 8) std::memcpy(b + w, &tagv, 8);
          co.gpu_sent = s + 1;
        }
        ++co.gpu_unit;
        *progress = true;
        if (gpu_jitter_us_ > 0 && rand() % 4 == 0) {
          gpu_resume_ = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(rand() % static_cast<uint64_t>(gpu_jitter_us_));
          return;
        }
      }
      if (co.gpu_unit < co.units.size()) finished = false;
    }
    if (!finished) return;
    ++kernel_;  // the next AllReduce's kernel starts once every channel is through
  }
}

// recvProxyProgress (net.cc): post, else test the oldest, else hand to the GPU, else done.
Status Emu::recv_progress(Op& op, bool* progress) {
  const ProtoInfo& pi = kProto[op.p];
  const int sl = pi.slice_steps;
  const int max_depth = std::min(kSteps, kSharedSteps / op.nsubs);
  const int prev = (rank_ + n_ - 1) % n_;
  bool idle = true;
  for (size_t c = 0; c < op.ch.size(); ++c) {
    ChanOp& co = op.ch[c];
    if (!co.used || co.rposted >= static_cast<uint64_t>(co.nsteps)) continue;
    if (co.rposted >= co.rdone + max_depth) continue;
    Conn& k = conns_[c];
    const uint64_t slot = (co.rbase + co.rposted) % kSteps;
    void* ptr = k.rbuf.data() + slot * pi.step_size;
    size_t size = pi.step_size * sl;
    int tag = prev;
    void* mh = k.rmh;
    void* ph = &k.phandles[kSteps + (co.rposted / sl) % kSteps];
    void** req = &co.rreq[co.rposted % kSteps];
    // NCCL_NET_OPTIONAL_RECV_COMPLETION (default on) for LL/LL128 single receives.
    *req = op.p != kSimple ? reinterpret_cast<void*>(uintptr_t{1}) : nullptr;
    DRV_CALL(rank_, "net.irecv", net_->irecv(k.recv, 1, &ptr, &size, &tag, &mh, &ph, req));
    if (*req != nullptr) {
      co.rcache[co.rposted % kSteps] = *req;
      co.rposted += sl;
      idle = false;
    }
  }
  if (!idle) {
    *progress = true;
    return Status();
  }
  for (size_t c = 0; c < op.ch.size(); ++c) {
    ChanOp& co = op.ch[c];
    if (!co.used || co.rposted <= co.rreceived) continue;
    int done = 0;
    int sizes[8] = {};
    DRV_CALL(rank_, "net.test(recv)", net_->test(co.rreq[co.rreceived % kSteps], &done, sizes));
    if (done) {
      if (static_cast<size_t>(sizes[0]) > pi.step_size * sl)
        return internal_error("net.test(recv) reported more bytes than posted");
      co.rreq[co.rreceived % kSteps] = nullptr;
      co.got_sizes.push_back(static_cast<size_t>(sizes[0]));
      co.rreceived += sl;
      idle = false;
    }
  }
  if (!idle) {
    *progress = true;
    return Status();
  }
  for (size_t c = 0; c < op.ch.size(); ++c) {
    ChanOp& co = op.ch[c];
    if (!co.used || co.rreceived <= co.rtransmitted) continue;
    co.rtransmitted += sl;  // no flush for host memory: request NULL, done
    conns_[c].recv_tail = co.rbase + co.rtransmitted;
    idle = false;
  }
  if (!idle) {
    *progress = true;
    return Status();
  }
  for (size_t c = 0; c < op.ch.size(); ++c) {
    ChanOp& co = op.ch[c];
    Conn& k = conns_[c];
    if (!co.used || co.rdone >= static_cast<uint64_t>(co.nsteps)) continue;
    while (k.recv_head > co.rbase + co.rdone && co.rtransmitted > co.rdone) {
      void*& cached = co.rcache[co.rdone % kSteps];
      if (cached != nullptr) {
        if (net_->irecvConsumed != nullptr)
          DRV_CALL(rank_, "net.irecvConsumed", net_->irecvConsumed(k.recv, 1, cached));
        cached = nullptr;
      }
      co.rdone += sl;
      *progress = true;
      if (co.rdone >= static_cast<uint64_t>(co.nsteps)) break;
    }
  }
  return Status();
}

// sendProxyProgress (net.cc): per sub one of: post to the GPU, isend, test the oldest.
Status Emu::send_progress(Op& op, bool* progress) {
  const ProtoInfo& pi = kProto[op.p];
  const int sl = pi.slice_steps;
  const int max_depth = std::min(kSteps, kSharedSteps / op.nsubs);
  for (size_t c = 0; c < op.ch.size(); ++c) {
    ChanOp& co = op.ch[c];
    if (!co.used || co.sdone >= static_cast<uint64_t>(co.nsteps)) continue;
    Conn& k = conns_[c];
    if (co.sposted < static_cast<uint64_t>(co.nsteps) && co.sposted < co.sdone + max_depth) {
      co.sposted += sl;
      *progress = true;
      continue;
    }
    if (co.stransmitted < co.sposted && co.stransmitted < co.sdone + kSteps) {
      const int m = static_cast<int>(co.stransmitted / sl);
      if (co.gpu_sent > m) {  // connFifo[slot].size set and (LL) the flags are in
        const uint64_t slot = (co.sbase + co.stransmitted) % kSteps;
        void* ph = &k.phandles[(co.stransmitted / sl) % kSteps];
        void** req = &co.sreq[slot];
        DRV_CALL(rank_, "net.isend",
                 net_->isend(k.send, k.sbuf.data() + slot * pi.step_size, co.send_sizes[m], rank_,
                             k.smh, ph, req));
        if (*req != nullptr) {
          co.stransmitted += sl;
          *progress = true;
          continue;
        }
      }
    }
    if (co.sdone < co.stransmitted) {
      int done = 0, size = 0;
      const uint64_t slot = (co.sbase + co.sdone) % kSteps;
      DRV_CALL(rank_, "net.test(send)", net_->test(co.sreq[slot], &done, &size));
      if (done) {
        co.sdone += sl;
        k.send_head = co.sbase + co.sdone;
        *progress = true;
      }
    }
  }
  return Status();
}

void Emu::dump(size_t bytes) {
  std::string s = "[rank " + std::to_string(rank_) + "] nccl-steps: no progress for " +
                  std::to_string(stall_s_) + " s at " + std::to_string(bytes) + " B: kernel " +
                  std::to_string(kernel_) + "/" + std::to_string(ops_.size()) + ", send op " +
                  std::to_string(active_send_) + ", recv op " + std::to_string(active_recv_) + "\n";
  char buf[512];
  for (size_t o = 0; o < ops_.size(); ++o) {
    for (size_t c = 0; c < ops_[o].ch.size(); ++c) {
      const ChanOp& co = ops_[o].ch[c];
      if (!co.used) continue;
      std::snprintf(buf, sizeof buf,
                    "  op %zu %s ch %zu: nsteps %d sbase %llu send posted/transmitted/done "
                    "%llu/%llu/%llu gpu_sent %d; rbase %llu recv posted/received/transmitted/done "
                    "%llu/%llu/%llu/%llu; gpu unit %zu/%zu; conn send_head %llu recv_tail %llu "
                    "recv_head %llu; oldest sreq %p rreq %p\n",
                    o, proto_name(ops_[o].p), c, co.nsteps, (unsigned long long)co.sbase,
                    (unsigned long long)co.sposted, (unsigned long long)co.stransmitted,
                    (unsigned long long)co.sdone, co.gpu_sent, (unsigned long long)co.rbase,
                    (unsigned long long)co.rposted, (unsigned long long)co.rreceived,
                    (unsigned long long)co.rtransmitted, (unsigned long long)co.rdone, co.gpu_unit,
                    co.units.size(), (unsigned long long)conns_[c].send_head,
                    (unsigned long long)conns_[c].recv_tail,
                    (unsigned long long)conns_[c].recv_head,
                    co.sreq[(co.sbase + co.sdone) % kSteps], co.rreq[co.rreceived % kSteps]);
      s += buf;
    }
  }
  for (size_t c = 0; c < conns_.size(); ++c) {
    std::snprintf(buf, sizeof buf, "  conn %zu: send comm %p recv comm %p\n", c, conns_[c].send,
                  conns_[c].recv);
    s += buf;
  }
  std::fputs(s.c_str(), stderr);
  std::fflush(stderr);
}

Status Emu::sweep() {
  const std::vector<size_t> sizes = size_list(o_);
  const int iters = o_.iters;
  for (size_t bytes : sizes) {
    build(bytes, iters);
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    bool dumped = false;
    uint64_t idle = 0;
    for (;;) {
      bool progress = false;
      if (proxy_jitter_us_ > 0 && rand() % 64 == 0)
        usleep(static_cast<useconds_t>(rand() % static_cast<uint64_t>(proxy_jitter_us_)));
      gpu_advance(&progress);
      if (active_recv_ < ops_.size()) CFX_TRY(recv_progress(ops_[active_recv_], &progress));
      gpu_advance(&progress);
      if (active_send_ < ops_.size()) CFX_TRY(send_progress(ops_[active_send_], &progress));
      // A proxy op ends when all its subs are done; the next on the connections starts.
      auto all_done = [](const Op& op, bool send) {
        for (const ChanOp& co : op.ch) {
          if (!co.used) continue;
          if ((send ? co.sdone : co.rdone) < static_cast<uint64_t>(co.nsteps)) return false;
        }
        return true;
      };
      if (active_recv_ < ops_.size() && all_done(ops_[active_recv_], false)) {
        ++active_recv_;
        progress = true;
      }
      if (active_send_ < ops_.size() && all_done(ops_[active_send_], true)) {
        ++active_send_;
        progress = true;
      }
      if (active_recv_ == ops_.size() && active_send_ == ops_.size() && kernel_ == ops_.size())
        break;
      if (progress) {
        idle = 0;
        last = std::chrono::steady_clock::now();
        continue;
      }
      if ((++idle & 1023) == 0) {
        const auto now = std::chrono::steady_clock::now();
        if (!dumped && std::chrono::duration<double>(now - last).count() > stall_s_) {
          dumped = true;
          dump(bytes);
        }
        if (dl_->passed()) {
          dump(bytes);
          return timed_out("--timeout reached in the --nccl-steps AllReduce of " +
                           std::to_string(bytes) + " B");
        }
      }
      sched_yield();
    }
    CFX_TRY(bs_->barrier());  // nccl-tests: every rank's AllReduces of this size completed
    if (rank_ == 0) {
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      const Op& op = ops_.front();
      std::printf("%12zu  %-6s  %d ch  %5d msgs/ch  %10.1f us\n", bytes, proto_name(op.p), op.nsubs,
                  op.ch[0].msgs, us / iters);
      std::fflush(stdout);
    }
  }
  return Status();
}

}  // namespace

Status run_nccl_steps(const Options& o, const nccl::ncclNet_v11_t* net, void* ctx, Bootstrap* bs,
                      const Deadline* dl) {
  if (bs->nranks() < 2) return internal_error("--nccl-steps needs at least 2 ranks");
  Emu e(o, net, ctx, bs, dl);
  CFX_TRY(e.setup());
  CFX_TRY(e.sweep());
  CFX_TRY(e.teardown());
  return e.wrong() == 0 ? Status()
                        : internal_error(std::to_string(e.wrong()) + " received steps wrong");
}

}  // namespace conflux::driver
