// CollComm: one CollNet communicator on one rank — two worker rings over the p2p transport
// (the main ring for ring shares, the failover ring), the aggregator client engine, and the
// two threads that complete requests.
//
// Each AllReduce of `count` elements is split once, identically on every rank:
//   [0, agg_count)      through the aggregators (client engine), striped over them;
//   [agg_count, count)  over the worker ring (reduce-scatter + all-gather), at the same time.
// agg_count = count * (1 - ring_fraction), rounded down; requests with an (dtype, op) the
// aggregators do not take, or issued after the aggregators failed, put everything on the ring.
//
// Failover: when its engine fails (aggregator dead, shut down, silent) a rank sends a notice
// around the failover ring; a rank that receives one fails over too, even if its own engine
// still looks healthy (it may be waiting for results that the first rank will never help
// complete). Every rank then runs one agreement over the failover ring: each says the first
// request whose aggregator share it has not completed (fi). With
// lo = min fi and hi = max fi:
//   requests in [lo, hi) were completed by some rank but not by all: the rank with fi = hi
//     sends the end of each result it kept (ResultTails; only ends can be missing) around
//     the ring, and the ranks still waiting for it take it (or all fail it, if not kept);
//   requests from hi on: their aggregator share is redone over the failover ring from the
//     send buffer (a staging copy for in-place requests), in request order on every rank.
// One warning is logged. Nothing hangs: every wait is bounded by ring_timeout.
// Re-striping: each rank also says which aggregator its engine saw fail and how many
// requests it has been given. If the engine had several aggregators and some were seen by
// no rank to fail, every rank joins a new job on those survivors; once all joined, requests
// from S = max(hi, most requests given to any rank) on send their aggregator share there
// (requests in [hi, S) are redone over the ring as above). A later failure of the new
// engine fails over the same way.
//
// ReduceScatter and AllGather (CollNetDirect) work on a window [offset, offset + bytes) of
// the nranks * bytes_per_rank buffer; rank k owns the part of the window inside
// [k * bytes_per_rank, (k + 1) * bytes_per_rank). ReduceScatter splits the window as above;
// its aggregator share goes to the engine as one Reduce per owner (the aggregators send
// each rank only its own shard and acknowledgements for the rest), its ring share runs the
// reduce-scatter phase only. Since no rank holds another's shard, a failover hands over
// input ends instead of result ends: for a ReduceScatter in [lo, hi) every rank
// reduce-scatters the end of its input (kept, or still queued) over the failover ring.
// AllGather runs over the ring.
//
// Threads: iallreduce() and test() are called by NCCL's proxy thread and never block. The
// ring thread runs the ring shares on the main ring's lanes, up to one per lane at a time,
// started in request order; the completion thread
// waits for the aggregator shares (and runs failover on the failover ring), waits for the
// ring share, delivers and completes each request in order. Destruction joins both.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collnet/result_tails.h"
#include "collnet/ring_allreduce.h"
#include "collnet/ring_exchange.h"
#include "collnet/split_controller.h"
#include "conflux/client/engine.h"
#include "conflux/common/dtype.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"

namespace conflux::collnet {

struct CollOptions {
  double ring_fraction = 0.0;  // share of every AllReduce that goes over the ring, 0..1
  // CONFLUX_RING_FRACTION=auto: the ranks measure both paths and move the split while the job
  // runs (split_controller.h; ring_fraction is then its starting point). Empty: it stays.
  std::optional<SplitController> controller;
  size_t ring_min_bytes = 0;  // a smaller ring share goes through the aggregators (split.h)
  size_t ring_block_bytes = 1 << 20;
  int ring_inflight = 8;
  // Ring shares of consecutive requests run at the same time, one per lane (CollRings::next
  // and prev hold one connection per lane); 1 = one at a time.
  std::chrono::milliseconds ring_timeout{30000};  // no ring progress this long = error
  uint32_t fault_abort_at = 0;  // tests: > 0, abort the engine at this request (a local failure)
  // Joins a new job on the aggregators of the original list at `survivors` (indices into it);
  // `epoch` (1, 2, ...) makes the job distinct from the earlier ones. Blocks up to the join
  // timeout. Empty: a failover never re-stripes.
  std::function<std::unique_ptr<client::Engine>(const std::vector<size_t>& survivors,
                                                uint32_t epoch, std::string* why)>
      rejoin;
};

// A window of a ReduceScatter / AllGather (CollNetDirect), in bytes.
struct CollWindow {
  size_t bytes_per_rank = 0;
  size_t offset = 0;
  size_t bytes = 0;
};

// One piece of a scatter/gather list (NCCL's ncclNetSGE_*, without the handle).
struct CollPart {
  uint8_t* address = nullptr;
  size_t size = 0;
};

enum class CollKind : uint8_t { kAllReduce, kReduceScatter, kAllGather };

// Element ranges, relative to the window, that each of `nranks` ranks owns; empty where a
// rank's block lies outside the window. Window bytes must be a multiple of esize.
std::vector<std::pair<size_t, size_t>> owned_ranges(const CollWindow& w, int nranks, size_t esize);
// The ranges clipped to [lo, hi) and made relative to lo; empty where nothing is left.
std::vector<std::pair<size_t, size_t>> clip_ranges(
    const std::vector<std::pair<size_t, size_t>>& ranges, size_t lo, size_t hi);

// A request as NCCL sees it (void*). Completed and freed through CollComm::test.
struct CollRequest {
  static constexpr uint32_t kMagic = 0x43524551;
  uint32_t magic = kMagic;
  std::atomic<int> state{0};  // 0 pending, 1 done, 2 failed
  std::string error;          // written before state becomes 2
  size_t bytes = 0;

  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  Op op = Op::kSum;
  uint32_t seq = 0;
  size_t agg_count = 0;
  bool split_exchange = false;  // ends a split period: the ring thread starts its exchange
  // Engine requests of the aggregator part (empty: not in the engine): one AllReduce, or for
  // a ReduceScatter one Reduce per owner; agg_waited of them have completed.
  std::vector<uint64_t> agg_handles;
  size_t agg_waited = 0;
  uint32_t agg_epoch = 0;        // the engine generation agg_handles belong to
  std::vector<uint8_t> staging;  // in-place requests: copy of the aggregator part's input

  // ReduceScatter / AllGather: `recv` is `work` (or the only receive part); per-rank owned
  // element ranges; where the result goes when the request completes.
  CollKind kind = CollKind::kAllReduce;
  std::vector<uint8_t> work;
  std::vector<std::pair<size_t, size_t>> owned;
  uint8_t* own_out = nullptr;       // ReduceScatter: this rank's part of the result
  std::vector<CollPart> out_parts;  // AllGather with several receive parts: scattered at end

  // Ring share outcome, set by the ring thread: 0 pending, 1 done, 2 failed (ring_error).
  std::atomic<int> ring_state{0};
  std::string ring_error;
  // Failover: 0 not resolved by a hand-over, 1 resolved, 2 failed (resolve_error).
  int resolved = 0;
  std::string resolve_error;
};

// The rings a CollComm owns (each: send to rank + 1, receive from rank - 1): the main ring,
// one connection per lane (the i-th request with a ring share uses lane i mod lanes on every
// rank, so each lane carries its requests in the same order everywhere), and the failover
// ring.
struct CollRings {
  std::vector<std::unique_ptr<net::SendComm>> next;
  std::vector<std::unique_ptr<net::RecvComm>> prev;
  std::unique_ptr<net::SendComm> failover_next;
  std::unique_ptr<net::RecvComm> failover_prev;
  // The measured split's exchanges (ring thread), so they never wait behind ring shares.
  std::unique_ptr<net::SendComm> split_next;
  std::unique_ptr<net::RecvComm> split_prev;
};

class CollComm {
 public:
  // Takes ownership of the rings and the engine (engine may be null: ring only).
  CollComm(int rank, int nranks, CollRings rings, std::unique_ptr<client::Engine> engine,
           const CollOptions& opts);
  ~CollComm();
  CollComm(const CollComm&) = delete;
  CollComm& operator=(const CollComm&) = delete;

  // Starts an AllReduce; never blocks. *out gets the request.
  net::Status iallreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                         CollRequest** out);
  // CollNetDirect collectives on a window (see above); never block. The parts' sizes must
  // add up to the window's bytes (checked by the caller).
  net::Status ireducescatter(const std::vector<CollPart>& send_parts, void* recv,
                             const CollWindow& w, DType dtype, Op op, CollRequest** out);
  net::Status iallgather(const void* send, const std::vector<CollPart>& recv_parts,
                         const CollWindow& w, CollRequest** out);
  // Non-blocking. On done (or error) the request is released.
  static net::Status test(CollRequest* req, bool* done, size_t* bytes);

  // Connected CollNet communicators in this process (the tuner steers only when > 0), and
  // those of them whose aggregators still take a share (not failed over, ring fraction < 1).
  static int live_count();
  static int usable_count();

  bool degraded() const { return degraded_.load(std::memory_order_acquire); }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  static constexpr uint32_t kMagic = 0x43434f4d;
  bool valid() const { return magic_ == kMagic; }

 private:
  void run_ring();
  void run_completion();
  // Sets r's split and hands the aggregator share to the engine, then queues r. False (r not
  // taken) while the measured split for r's sequence number is not decided yet.
  bool submit(CollRequest* r, bool agg_capable);
  // The ring fraction of the next request from the measured split (split_mu_ held); false if
  // it is not decided yet. Marks r when it ends a period.
  bool measured_fraction(CollRequest& r, bool agg_ok, double* fraction);
  // Ring thread, when the request `seq` that ends a period is next to start: this rank's
  // sample of the period goes into an allgather around the split ring, which run_ring
  // advances (advance_split) while the ring shares run; its decision applies from `seq` +
  // kSplitLag on.
  void start_split_exchange(uint32_t seq);
  // Advances the exchange; once every rank's sample is in, decides and publishes. True if
  // anything moved.
  bool advance_split();
  void publish_split(uint32_t seq, const SplitDecision& d);
  // Ring thread: the ring path's busy time (some lane running) and the aggregator bytes sent
  // meanwhile; `running`: whether a lane runs now.
  void track_ring_busy(bool running);
  uint64_t engine_bytes_sent();  // 0 without an engine
  // The ring plan for r's elements [lo, hi): AllReduce, or the phase r's kind needs with
  // the owned ranges clipped to [lo, hi).
  RingPlan ring_plan(const CollRequest& r, size_t lo, size_t hi) const;
  // Runs one ring operation on r's elements [lo, hi) over the failover ring to completion on
  // the calling thread; false on error.
  bool failover_ring(CollRequest& r, const uint8_t* send, size_t lo, size_t hi, int tag,
                     std::string* error);
  // One ring operation and its watchdog (no progress for ring_timeout = error).
  struct RingRun;
  std::unique_ptr<RingRun> start_ring(CollRequest& r, const RingLinks& links, const uint8_t* send,
                                      size_t lo, size_t hi, int tag, uint8_t* scratch,
                                      const char* what) const;
  // Advances `run`; true once it ended (*ok says how, *error why not).
  bool step_ring(RingRun& run, bool* ok, std::string* error);
  // The ring thread: its share done (or failed), r may be freed by the completion thread.
  void ring_share_done(CollRequest* r, bool ok, const std::string& error);
  // ReduceScatter / AllGather: moves the result where NCCL wants it.
  void deliver(CollRequest& r) const;
  // Waits for the request's aggregator part; false if it failed (error in *why).
  bool wait_aggregators(CollRequest& r, std::string* why);
  // The aggregator share of r, on the completion thread: engine, hand-over or redo.
  bool aggregator_share(CollRequest& r, std::string* error);
  // Failover agreement and hand-overs (see the file comment); `first_incomplete` is this
  // rank's fi. False if the failover ring failed (every later request then fails).
  bool fail_over(uint32_t first_incomplete, const std::string& why, std::string* error);
  // After a failover's hand-overs: joins a new job on the aggregators no rank saw fail, if
  // any are left, and (when every rank joined) carries aggregator shares from request
  // `from` on through it. False if the failover ring failed.
  bool rejoin_survivors(uint64_t dead_mask, uint32_t from, std::string* error);
  // Hands every queued request from restripe_next_ on to the re-joined engine, in order.
  void feed_engine();
  // Submits r's aggregator share to engine_ (the caller holds engine_mu_ or is the completion
  // thread after a re-join).
  void hand_to_engine(CollRequest& r);
  // Failover hand-over of ReduceScatter request q (an input end, see the file comment):
  // every rank reduce-scatters its kept or queued input end [offset, total) over the
  // failover ring. False if the failover ring failed.
  bool reduce_input_tails(uint32_t q, size_t total, size_t offset, std::string* error);
  // Posts the receive for the previous rank's next failover notice.
  void arm_notice();
  // True once the previous rank's failover notice has arrived (or its link failed).
  bool notice_arrived();
  // Idle (no request queued): whether to fail over now, on a notice or a failed engine.
  bool idle_failover_due();
  // The queued request with this sequence number, or nullptr (completed here, or none).
  CollRequest* queued(uint32_t seq);
  // Waits until the ring thread is done with r; false if its ring share failed.
  bool wait_ring_share(CollRequest& r, std::string* error);
  void finish(CollRequest& r, bool ok, const std::string& error);
  bool stopped();

  uint32_t magic_ = kMagic;
  const int rank_, nranks_;
  CollRings rings_;
  std::unique_ptr<client::Engine> engine_;
  const CollOptions opts_;
  uint64_t support_mask_ = 0;  // bit dtype * kNumOps + op: the first engine reduces it
  std::vector<std::vector<uint8_t>> scratch_;  // ring thread, one per lane
  std::vector<uint8_t> failover_scratch_;      // completion thread

  std::mutex engine_mu_;  // engine_ swaps (completion thread) against submit() (proxy thread)
  std::mutex mu_;
  std::condition_variable cv_;         // queue_ or stop_ changed: the completion thread
  std::condition_variable ring_wake_;  // ring_queue_ or stop_ changed: the ring thread
  std::mutex ring_mu_;                 // ring shares completing: CollRequest::ring_state
  std::condition_variable ring_cv_;
  std::deque<CollRequest*> queue_;       // submission order; popped by the completion thread
  std::deque<CollRequest*> ring_queue_;  // submission order; popped by the ring thread
  bool stop_ = false;
  std::atomic<uint32_t> next_seq_{0};  // written by the proxy thread only
  std::atomic<bool> degraded_{false};
  std::atomic<bool> ring_failed_{false};
  std::atomic<bool> stopping_{false};  // set by the destructor; ends waits on the rings

  // Completion thread only.
  ResultTails tails_;
  bool failed_over_ = false;  // at least once
  // The engine carries the aggregator shares of requests from engine_from_ on while
  // engine_live_; epoch_ counts re-joins. After a re-join the completion thread submits
  // (restripe_next_: the next request to hand it). aggs_: original indices of engine_'s
  // aggregators; dead_mask_: original indices seen failing so far.
  bool engine_live_ = false;
  uint32_t engine_from_ = 0;
  uint32_t epoch_ = 0;
  uint32_t restripe_next_ = 0;
  std::vector<size_t> aggs_;
  uint64_t dead_mask_ = 0;
  std::atomic<bool> counted_usable_{false};  // included in usable_count()
  bool failover_broken_ = false;
  uint32_t handover_end_ = 0;     // requests below it (and >= the agreed lo) were handed over
  uint32_t next_unfinished_ = 0;  // seq of the oldest request not yet completed here
  uint64_t notice_buf_ = 0;
  net::Request* notice_req_ = nullptr;  // posted at start on the failover ring
  bool notice_done_ = false;
  bool notice_closed_ = false;  // the notice receive failed: the previous rank closed

  // The measured split (opts_.controller). submit() (proxy thread) takes each request's
  // fraction from split_changes_ and marks every request that ends a period (kSplitPeriod*);
  // at each mark the ring thread exchanges the period's samples, decides, and publishes the
  // fraction for requests from the mark + kSplitLag on. A request that would need a decision
  // still pending is refused (NCCL retries), so every rank splits every request alike.
  // The exchange runs on a connection of its own (CollRings::split_*), never waiting on or
  // delaying a ring share.
  std::mutex split_mu_;
  double split_now_ = 0;                                   // split_mu_
  std::deque<std::pair<uint32_t, double>> split_changes_;  // split_mu_: (from seq, fraction)
  std::deque<uint32_t> split_pending_;                     // split_mu_: marks not decided
  uint64_t period_bytes_ = 0;                              // split_mu_
  uint32_t period_requests_ = 0;                           // split_mu_
  std::optional<SplitController> controller_;              // ring thread
  std::unique_ptr<AsyncRingAllgather> split_round_;        // ring thread
  bool split_running_ = false;                             // ring thread: a round in flight
  bool split_broken_ = false;  // ring thread: the split ring failed; the split stays
  uint32_t split_seq_ = 0;     // ring thread: the period end of the running round
  // Ring thread: the period's measurements, and the engine counters they start from.
  double ring_bytes_ = 0, ring_busy_s_ = 0, agg_sent_with_ring_ = 0;
  bool ring_running_ = false;
  std::chrono::steady_clock::time_point ring_since_;
  uint64_t sent_at_ring_start_ = 0;
  const client::Engine* sample_engine_ = nullptr;
  uint64_t sample_sent_ = 0, sample_busy_ns_ = 0;
  std::atomic<uint32_t> epoch_seen_{0};     // epoch_, for the ring thread's samples
  std::atomic<uint32_t> aggs_in_epoch_{0};  // aggs_.size() of that epoch

  std::thread ring_thread_;
  std::thread thread_;
};

}  // namespace conflux::collnet
