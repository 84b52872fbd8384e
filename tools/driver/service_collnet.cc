// SPDX-License-Identifier: Apache-2.0
// The service thread's CollNet comms (see service_collnet.h).
#include "driver/service_collnet.h"

#include "driver/data.h"

namespace conflux::driver {
namespace {

// The AllReduces each of the thread's comms runs, in elements of float: 4 B (one request,
// which the plugin may complete inline in test()), 64 KiB and 1 MiB (several requests).
constexpr size_t kServiceCounts[] = {1, 16 << 10, 256 << 10};
constexpr int kServiceRounds = 2;  // each size this many times
constexpr size_t kServiceChunkBytes = 256 << 10;
constexpr int kServiceInflight = 8;

}  // namespace

Status ServiceCollNet::start(const nccl::ncclCollNet_v11_t* cn, const CollNetSession* streaming,
                             uint64_t comm_id, Bootstrap* bs, int k, uint64_t seed,
                             const Deadline* dl) {
  if (k <= 0) return Status();
  cn_ = cn;
  streaming_ = streaming;
  comm_id_ = comm_id;
  seed_ = seed;
  k_ = k;
  dl_ = dl;
  CFX_TRY(bs->open_channel(&channel_));
  CFX_TRY(bufs_.alloc(kServiceCounts[2] * sizeof(float), kServiceChunkBytes));
  thread_ = std::thread([this] { run(); });
  return Status();
}

Status ServiceCollNet::join() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

void ServiceCollNet::run() {
  for (int i = 0; i < k_ && result_.ok(); ++i) result_ = one_comm(i);
  done_.store(true, std::memory_order_release);
}

Status ServiceCollNet::one_comm(int i) {
  const int rank = channel_.rank();
  const std::string which =
      "service thread's CollNet comm " + std::to_string(i + 1) + " of " + std::to_string(k_) + ": ";
  CollNetSession cs;
  const uint64_t before = streaming_->posted();
  Status st =
      cs.open(cn_, comm_id_, &channel_, &bufs_, dl_, std::optional<void*>(streaming_->context()));
  posted_during_ += streaming_->posted() - before;
  if (!st.ok()) return internal_error(which + st.message());
  if (!cs.available()) return internal_error(which + "declined: " + cs.reason());
  for (int round = 0; round < kServiceRounds && st.ok(); ++round) {
    for (size_t n : kServiceCounts) {
      const InputSpec spec{DType::kFloat32, Op::kSum, channel_.nranks(),
                           seed_ + 7919 * static_cast<uint64_t>(i + 1) + round, InputKind::kExact};
      fill_input(spec, rank, 0, n, bufs_.send);
      poison(DType::kFloat32, bufs_.recv, n);
      st = cs.allreduce(bufs_.send, bufs_.recv, n, DType::kFloat32, Op::kSum, kServiceChunkBytes,
                        kServiceInflight);
      if (!st.ok()) break;
      const uint64_t wrong = count_wrong(spec, bufs_.recv, n);
      if (wrong != 0) {
        st = internal_error("rank " + std::to_string(rank) + ": " + std::to_string(wrong) +
                            " wrong elements in an AllReduce of " + std::to_string(n) + " floats");
        break;
      }
      ++allreduces_;
    }
  }
  const Status closed = cs.close();  // deregMr x2, closeColl (the context stays)
  if (!st.ok()) return internal_error(which + st.message());
  if (!closed.ok()) return internal_error(which + closed.message());
  ++comms_;
  return Status();
}

}  // namespace conflux::driver
