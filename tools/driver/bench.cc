// SPDX-License-Identifier: Apache-2.0
// Measurement and verification loop (see bench.h).
#include "driver/bench.h"

#include <chrono>
#include <cstring>

#include "util/proc.h"

namespace conflux::driver {
namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Wall-clock time, comparable across the processes of one host (a timeline's timestamps).
double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Cell {
  const Options& o;
  const ModeRun& m;
  Bootstrap* bs;
  HostBuffers* bufs;
  DeviceBuffers* dev;  // --device-buffers: the collectives run on the device twins
  InputSpec spec;
  size_t count;
  void* send;
  void* recv;

  size_t in_count() const { return m.mode == Mode::kReduceScatter ? count * spec.nranks : count; }
  size_t out_count() const { return m.mode == Mode::kAllGather ? count * spec.nranks : count; }
  size_t in_bytes() const { return in_count() * dtype_size(spec.dtype); }
  size_t out_bytes() const { return out_count() * dtype_size(spec.dtype); }
  Status fill() {
    fill_input(spec, bs->rank(), 0, in_count(), send);
    return dev != nullptr ? dev->upload(send, in_bytes()) : Status();
  }
  uint64_t wrong_in_output() const {
    switch (m.mode) {
      case Mode::kReduceScatter:
        return count_wrong(spec, recv, count, count * static_cast<size_t>(bs->rank()));
      case Mode::kAllGather:
        return count_wrong_gather(spec, recv, count);
      default:
        return count_wrong(spec, recv, count);
    }
  }
  // Makes the next run verifiable: fresh inputs in place, or a poisoned receive buffer.
  Status prepare() {
    if (o.inplace) return fill();
    poison(spec.dtype, recv, out_count());
    return dev != nullptr ? dev->upload(recv, out_bytes()) : Status();
  }
  // One collective; *us (if given) is set to its time, without the preparation and check.
  Status once(uint64_t* wrong, double* us) {
    if (wrong != nullptr) CFX_TRY(prepare());
    void* s = dev != nullptr ? dev->twin(send) : send;
    void* r = dev != nullptr ? dev->twin(recv) : recv;
    auto t0 = Clock::now();
    CFX_TRY(m.run(s, r, count, spec.dtype, spec.op));
    if (us != nullptr) *us = us_since(t0);
    if (dev != nullptr) CFX_TRY(dev->context_unchanged(mode_name(m.mode)));
    if (wrong != nullptr && dev != nullptr) CFX_TRY(dev->download(recv, out_bytes()));
    if (wrong != nullptr) *wrong += wrong_in_output();
    return Status();
  }
};

}  // namespace

Status run_mode(const Options& o, const ModeRun& m, Bootstrap* bs, HostBuffers* bufs,
                std::vector<Row>* rows, std::vector<std::string>* notes, DeviceBuffers* dev) {
  const int n = bs->nranks();
  for (DType t : o.dtypes) {
    for (Op op : o.ops) {
      if (!m.supported(t, op)) {
        std::string note = std::string(mode_name(m.mode)) + ": " + std::string(dtype_name(t)) +
                           "/" + std::string(op_name(op)) +
                           " skipped: not supported by CollNet on every rank (NCCL would use "
                           "its ring for it)";
        if (bs->rank() == 0) print_note(note);
        notes->push_back(note);
        continue;
      }
      for (size_t size : size_list(o)) {
        const size_t es = dtype_size(t);
        // ReduceScatter / AllGather: the size is the whole nranks-block buffer, as in
        // nccl-tests; each rank's block holds count elements.
        const size_t count = is_direct(m.mode) ? size / es / static_cast<size_t>(n) : size / es;
        if (count == 0) continue;
        Cell c{o,     m,          bs,
               bufs,  dev,        InputSpec{t, op, n, o.seed, m.inputs, o.tree_leaves},
               count, bufs->send, o.inplace ? bufs->send : bufs->recv};
        CFX_TRY(c.fill());
        uint64_t wrong = 0;
        uint64_t* check = o.check_iters ? &wrong : nullptr;
        for (int i = 0; i < o.warmup; ++i) CFX_TRY(c.once(check, nullptr));
        CFX_TRY(bs->barrier());
        tools::HostCpuWindow cpu;
        std::vector<TimelinePoint> points;  // rank 0's timed iterations, for --timeline
        const bool keep_points = bs->rank() == 0 && !o.timeline_path.empty();
        if (keep_points) points.reserve(static_cast<size_t>(o.iters));
        double total_us = 0;
        const auto t0 = Clock::now();
        for (int i = 0; i < o.iters; ++i) {
          double us = 0;
          CFX_TRY(c.once(check, &us));
          total_us += us;
          if (keep_points) points.push_back({unix_seconds(), us});
        }
        if (!o.check_iters) total_us = us_since(t0);  // the loop's own time counts too
        CFX_TRY(bs->barrier());  // every rank's timed iterations are in rank 0's CPU window
        cpu.stop();
        CFX_TRY(c.once(&wrong, nullptr));  // the check run

        double mine[2] = {total_us / o.iters, static_cast<double>(wrong)};
        std::vector<std::string> all;
        CFX_TRY(bs->allgather(std::string(reinterpret_cast<char*>(mine), sizeof mine), &all));
        const size_t bytes = is_direct(m.mode) ? count * es * static_cast<size_t>(n) : count * es;
        Row row{m.mode, bytes, count, t, op, o.inplace, 0, 0, 0, 0};
        for (const std::string& a : all) {
          double v[2];
          if (a.size() != sizeof v) return internal_error("bootstrap: malformed row result");
          std::memcpy(v, a.data(), sizeof v);
          if (v[0] > row.time_us) row.time_us = v[0];
          row.wrong += static_cast<uint64_t>(v[1]);
        }
        row.algbw = row.time_us > 0 ? static_cast<double>(row.bytes) / row.time_us / 1e3 : 0;
        // nccl-tests' bus bandwidth: 2(n-1)/n for AllReduce, (n-1)/n for the other two.
        row.busbw = row.algbw * (is_direct(m.mode) ? 1.0 : 2.0) * (n - 1) / n;
        row.host_cpu_window_s = cpu.seconds();
        row.host_cpu_s_per_gb = cpu.per_gb(static_cast<double>(bytes) * o.iters / 1e9);
        if (bs->rank() == 0) print_row(row);
        if (keep_points) CFX_TRY(append_timeline(o.timeline_path, row, points));
        rows->push_back(row);
      }
    }
  }
  return Status();
}

}  // namespace conflux::driver
