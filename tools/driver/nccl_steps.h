// SPDX-License-Identifier: Apache-2.0
// --nccl-steps (ring mode): NCCL 2.28's proxy driving a ring AllReduce over the p2p net, step
// by step, as nccl-tests' warm-up runs it: every size of the sweep, --iters AllReduces each,
// then a barrier. Nothing is reduced: what is emulated is the order, sizes and timing of the
// plugin calls, and every received step is checked to be the one rank-1 sent for it (its size,
// and each 8-byte word tagged with the step, the sender and the channel):
//   - C = --nccl-channels channels, each with its own send comm (to rank+1) and recv comm
//     (from rank-1), both over their own listen handle, as NCCL connects every channel;
//   - per size: the protocol (LL up to 256 KiB, LL128 up to 4 MiB, Simple above), the channels
//     used (NCCL's thread threshold), and per channel the steps of the RingTwice pattern
//     (src/enqueue.cc calcCollChunking, src/device/all_reduce.h runRing): LL steps of 64 KiB
//     (32 KiB of data, sent as 16-byte lines with 8 data bytes), LL128 steps of 600 KiB,
//     Simple slices of 1 MiB (2 slices per 2 MiB chunk, 0-byte slices included);
//   - one proxy thread (the rank's main thread) calling recvProxyProgress then
//     sendProxyProgress for all channels in turn (src/transport/net.cc): irecv of the whole
//     step buffer (stepSize * sliceSteps) with tag = rank-1, up to NCCL_STEPS steps posted per
//     connection as the GPU frees them; isend of the step's size with tag = rank as soon as the
//     GPU produced it; test() on the oldest request of each connection only, and only in a call
//     that posted nothing (recv side); irecvConsumed once the GPU consumed a step;
//   - a GPU per channel: the ring's units in order (send, recv+send, ..., recv), a send waiting
//     for a free FIFO slot (done + NCCL_STEPS), a receive for the proxy's recvTail; the next
//     AllReduce's kernel starts after every channel finished the previous one; proxy ops on a
//     connection run one after the other (NCCL chains them).
// A pass without progress for CONFLUX_DRIVER_STALL_S seconds (default 10) prints the state of
// every connection to stderr once; the run then goes on until --timeout.
#pragma once

#include "driver/bootstrap.h"
#include "driver/options.h"
#include "driver/status.h"
#include "nccl/net_v11.h"

namespace conflux::driver {

// After net.init of `ctx`: connects, runs the sweep, closes. Prints a line per size on rank 0.
Status run_nccl_steps(const Options& o, const nccl::ncclNet_v11_t* net, void* ctx, Bootstrap* bs,
                      const Deadline* dl);

}  // namespace conflux::driver
