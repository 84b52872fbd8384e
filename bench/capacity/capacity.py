#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""conflux-capacity: how many aggregator cores per 100 Gbit/s, and what a worker pays.

One command, both dataplanes, on this host (nothing leaves loopback):

  dpdk  confluxd's DPDK dataplane on a ring ethdev (build/bench/dpdk/dpdk_datapath_bench: the
        main thread plays the NIC and W workers and writes every 8 KiB float payload, so the lcore
        reads it cold, from another core's cache). Contribution Gbit/s per lcore at 100 % busy =
        payload bits x TSC Hz / busy TSC cycles per contribution (the lcore's own count: polls
        that found frames, from the rx burst to the tx flush). --dpdk-mode backlog (default)
        keeps the lcore's RX ring at least half full, so every poll finds a full burst: the
        saturated lcore, which is what capacity means; stream feeds frames as fast as they are
        made, and its figure moves with the bursts the lcore happens to find (the host's load).
  udp   confluxd with one kernel-UDP dataplane thread on 127.0.0.1 and W conflux-allreduce-worker
        processes doing float-sum AllReduces of --size bytes (results not checked: a benchmark).
        From /proc and /metrics over the timed run: the daemon's CPU-seconds per GB of
        contributions in, so Gbit/s per daemon core = 8 / (CPU-s per GB); and the workers' CPU-s
        per GB AllReduced (each worker's own bytes).

With perf (root, `perf` installed, not --no-perf), one more run of each is sampled and the
busy time is split by where it goes (reduce, copies, checksum, mbufs/syscalls, engine, ...) as
cycles per byte of payload. The figures of each dataplane are the median of --runs runs; the
spread is printed too. Run it on a quiet host: two busy cores shared with a build measure the
build. As root the DPDK bench runs under SCHED_FIFO (chrt) so that other processes cannot
preempt the lcore; the UDP run does not (its kernel work is spread over the senders' and the
daemon's time either way).

  bench/capacity/capacity.py --build build [--dataplanes dpdk,udp] [--runs 3] [--workers 4]
                             [--dpdk-mode backlog|stream] [--size 16M] [--iters 40]
                             [--no-perf] [--json out.json] [--sweep 1M,4M,16M,64M]

--sweep repeats the UDP measure (--runs runs each, without perf) at each AllReduce size and
puts the rows into the JSON report ("udp_by_size"), which bench/plot_results.py draws as the
capacity curve: Gbit/s per daemon core, and the daemon's and workers' CPU-s per GB, by size.

`conflux plan --core-gbit` takes the Gbit/s per core printed here (deploy/dpdk.md).
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "deploy"))
import procs  # noqa: E402  (confluxd on loopback, /metrics sums: shared with the deploy tests)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fabric"))
import fabric_ns  # noqa: E402  (free_page_reporting)

PAYLOAD = 8192  # bytes per contribution in dpdk_datapath_bench
FIFO = False  # the DPDK bench runs under chrt -f 50 (set in main)

# Where busy time goes: the first group whose pattern matches a symbol takes its samples.
GROUPS = [
    ("test tool", r"tools::|verify::"),  # the worker program's own inputs, not Conflux's cost
    ("checksum", r"sum_u32_words|csum|checksum"),
    ("reduce", r"SimdKernels|ScalarKernels|reduce::"),
    ("copy", r"memmove|memcpy|copy_user|copyout|copyin|_copy_to_iter|_copy_from_iter|"
             r"stream_to"),
    ("page faults", r"page_fault|clear_page|anonymous_page|handle_mm_fault|get_page_from|lruvec|"
                    r"folio|unmap_page|free_pages|free_frozen"),
    ("wake-ups", r"finish_task_switch|schedule|futex|try_to_wake_up|_raw_spin_unlock_irq"),
    ("mbuf / socket", r"rte_pktmbuf|rte_mempool|mempool|sendmmsg|recvmmsg|sys_|__sys|skb|udp_|"
                      r"ip_|sock|__x64|entry_SYSCALL|syscall"),
    ("engine", r"SlotEngine|RxPipeline|parse_|Job|ResultBatch|encode_data|decode"),
    ("poll / idle", r"DpdkQueue::run|0x0000|net_ring|rte_ring|epoll|poll|schedule|futex"),
]


def group_of(symbol):
    for name, pat in GROUPS:
        if re.search(pat, symbol):
            return name
    return "other"


def perf_shares(data, comm_re):
    """{group: fraction} of the samples of threads whose comm matches comm_re."""
    r = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm,symbol",
                        "--stdio"], capture_output=True, text=True)
    shares = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*?)\s{2,}", line + "  ")
        if not m or not re.search(comm_re, m.group(2)):
            continue
        g = group_of(m.group(3))
        shares[g] = shares.get(g, 0.0) + float(m.group(1))
    total = sum(shares.values())
    return {g: v / total for g, v in shares.items()} if total > 0 else {}


def spread(xs):
    return f"{min(xs):.1f}-{max(xs):.1f}" if xs else "-"


# ---------------------------------------------------------------------------------------- DPDK

def can_run_fifo():
    """Whether this process may start SCHED_FIFO children (root, and not denied by a container)."""
    if os.geteuid() != 0 or not shutil.which("chrt"):
        return False
    return subprocess.run(["chrt", "-f", "50", "true"], capture_output=True).returncode == 0


def dpdk_run(bench, workers, packets, mode, perf_data=None):
    cmd = [bench, str(workers), str(packets), mode]
    if FIFO:
        cmd = ["chrt", "-f", "50"] + cmd
    if perf_data:
        cmd = ["perf", "record", "-q", "-F", "4000", "-o", perf_data] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    m = re.search(r"([\d.]+) Gbit/s payload.*?(\d+) busy TSC cycles per contribution "
                  r"\(TSC ([\d.]+) GHz\), ([\d.]+) frames per busy poll", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"dpdk_datapath_bench failed: {r.stdout[-400:]} {r.stderr[-400:]}")
    busy, ghz = int(m.group(2)), float(m.group(3))
    return {"gbit_seen": float(m.group(1)), "busy_cycles": busy, "tsc_ghz": ghz,
            "gbit_per_core": PAYLOAD * 8 * ghz / busy, "burst": float(m.group(4))}


def measure_dpdk(a, work):
    bench = os.path.join(a.build, "bench/dpdk/dpdk_datapath_bench")
    if not os.path.exists(bench):
        print("# dpdk: skipped (no bench/dpdk/dpdk_datapath_bench: built without DPDK)")
        return None
    runs = [dpdk_run(bench, a.workers, a.packets, a.dpdk_mode) for _ in range(a.runs)]
    out = {"runs": runs, "mode": a.dpdk_mode,
           "burst": statistics.median(r["burst"] for r in runs),
           "gbit_per_core": statistics.median(r["gbit_per_core"] for r in runs),
           "busy_cycles": statistics.median(r["busy_cycles"] for r in runs),
           "tsc_ghz": runs[0]["tsc_ghz"]}
    out["cycles_per_byte"] = out["busy_cycles"] / PAYLOAD
    if a.perf:
        data = os.path.join(work, "dpdk.perf")
        dpdk_run(bench, a.workers, a.packets, a.dpdk_mode, data)
        shares = perf_shares(data, r"^cfx-dpdk")
        idle = shares.pop("poll / idle", 0.0)
        busy = sum(shares.values())
        # Busy cycles split in the proportions of the samples that were not empty polls.
        out["breakdown_cycles_per_byte"] = {
            g: out["cycles_per_byte"] * v / busy for g, v in sorted(shares.items())} if busy else {}
        out["idle_share_of_samples"] = idle
    return out


# ----------------------------------------------------------------------------------------- UDP

def cpu_seconds(pid):
    """Time on CPU of every live thread of pid, seconds: the scheduler's nanosecond count
    (/proc/PID/task/*/schedstat), not the tick-sampled utime + stime, which a short run can
    see as 0. Threads that exited are not counted (confluxd's dataplane threads live on)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended meanwhile
    return total / 1e9


def size_bytes(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not m:
        raise SystemExit(f"--size: a byte count with an optional K/M/G suffix, not {text!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def udp_run(a, perf_data=None):
    """One run; the workers' CPU time from the kernel's accounting of the reaped children
    (the daemon is still running then, so it is not in it)."""
    daemon = procs.Daemon(os.path.join(a.build, "aggregator/confluxd"), "--threads", "1")
    perf = None
    try:
        worker = os.path.join(a.build, "tools/conflux-allreduce-worker")

        def cmd(rank):
            return [worker, "--aggregators", f"127.0.0.1:{daemon.control_port}", "--nranks",
                    str(a.workers), "--rank", str(rank), "--dtype", "float", "--op", "sum",
                    "--sizes", a.size, "--iters", str(a.iters), "--warmup", "2", "--no-check"]
        if perf_data:
            perf = subprocess.Popen(["perf", "record", "-q", "-F", "4000", "-o", perf_data, "-p",
                                     str(daemon.proc.pid)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        m0 = daemon.metrics()
        bytes0 = procs.metric(m0, "conflux_dataplane_bytes_in_total")
        wakes0 = procs.metric(m0, "conflux_dataplane_sleeps_total")
        cpu0 = cpu_seconds(daemon.proc.pid)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        ranks = [subprocess.Popen(cmd(r), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for r in range(a.workers)]
        if perf_data:  # rank 0 too: where a worker's CPU goes
            wperf = subprocess.Popen(["perf", "record", "-q", "-F", "4000", "-o",
                                      perf_data + ".worker", "-p", str(ranks[0].pid)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in ranks:
            out, _ = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"worker failed: {out[-400:]}")
        secs = time.monotonic() - t0
        if perf_data:
            wperf.wait(timeout=60)  # ends with its process
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        m1 = daemon.metrics()
        bytes1 = procs.metric(m1, "conflux_dataplane_bytes_in_total")
        wakes1 = procs.metric(m1, "conflux_dataplane_sleeps_total")
        cpu1 = cpu_seconds(daemon.proc.pid)
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=60)
        daemon.stop()
        shutil.rmtree(daemon.dir, ignore_errors=True)
    gb_in = (bytes1 - bytes0) / 1e9
    if gb_in <= 0 or cpu1 <= cpu0:
        raise RuntimeError(f"nothing measured: {gb_in} GB in, {cpu1 - cpu0} daemon CPU-s")
    # Each worker AllReduces its own size x (iters + warmup) bytes.
    gb_allreduced = a.workers * size_bytes(a.size) * (a.iters + 2) / 1e9
    worker_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    wakes = wakes1 - wakes0
    return {"seconds": secs, "gb_in": gb_in, "daemon_cpu_s": cpu1 - cpu0,
            "daemon_wakeups": wakes,
            # Each sleep of the dataplane thread ends in a wake-up: the bytes it then reads.
            "kib_in_per_wakeup": gb_in * 1e9 / 1024 / wakes if wakes > 0 else None,
            "worker_cpu_s": worker_cpu, "daemon_cpu_s_per_gb": (cpu1 - cpu0) / gb_in,
            "gbit_per_core": 8 * gb_in / (cpu1 - cpu0),
            "worker_cpu_s_per_gb": worker_cpu / gb_allreduced,
            "gbit_in_per_s": gb_in * 8 / secs}


def measure_udp(a, work):
    runs = [udp_run(a) for _ in range(a.runs)]
    out = {"runs": runs,
           "gbit_per_core": statistics.median(r["gbit_per_core"] for r in runs),
           "daemon_cpu_s_per_gb": statistics.median(r["daemon_cpu_s_per_gb"] for r in runs),
           "worker_cpu_s_per_gb": statistics.median(r["worker_cpu_s_per_gb"] for r in runs),
           "gbit_in_per_s": statistics.median(r["gbit_in_per_s"] for r in runs)}
    per_wake = [r["kib_in_per_wakeup"] for r in runs if r["kib_in_per_wakeup"] is not None]
    out["kib_in_per_wakeup"] = statistics.median(per_wake) if per_wake else None
    if a.perf:
        data = os.path.join(work, "udp.perf")
        udp_run(a, data)
        shares = perf_shares(data, r"^cfx|^confluxd")
        shares.pop("poll / idle", None)
        total = sum(shares.values())
        # CPU-s per GB is ns per byte: split in the proportions of the daemon's busy samples.
        out["breakdown_ns_per_byte"] = {g: out["daemon_cpu_s_per_gb"] * v / total
                                        for g, v in sorted(shares.items())} if total else {}
        w = perf_shares(data + ".worker", r".")
        w.pop("poll / idle", None)
        wt = sum(w.values())
        # The worker program makes every input (and would check every result): its share is
        # not what a training job pays for its AllReduce.
        out["worker_cpu_s_per_gb_net"] = out["worker_cpu_s_per_gb"] * (
            1 - w.get("test tool", 0.0) / wt) if wt else None
        out["worker_breakdown_ns_per_byte"] = {g: out["worker_cpu_s_per_gb"] * v / wt
                                               for g, v in sorted(w.items())} if wt else {}
    return out


def udp_sweep(a, work):
    """The UDP measure at each --sweep size (perf off: the sweep is the curve, not the
    breakdown); one row per size."""
    rows = []
    for size in a.sweep.split(","):
        sized = argparse.Namespace(**dict(vars(a), size=size, perf=False))
        u = measure_udp(sized, work)
        rows.append({"bytes": size_bytes(size), "gbit_per_core": u["gbit_per_core"],
                     "daemon_cpu_s_per_gb": u["daemon_cpu_s_per_gb"],
                     "worker_cpu_s_per_gb": u["worker_cpu_s_per_gb"]})
        print(f"udp   {size:>5}: {u['gbit_per_core']:.1f} Gbit/s per daemon core; daemon "
              f"{u['daemon_cpu_s_per_gb']:.3f}, workers {u['worker_cpu_s_per_gb']:.3f} CPU-s "
              f"per GB (median of {a.runs})", flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--dataplanes", default="dpdk,udp")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--packets", type=int, default=400000, help="dpdk: contributions per run")
    p.add_argument("--dpdk-mode", choices=("backlog", "stream"), default="backlog",
                   help="dpdk: a saturated lcore (backlog) or frames fed as made (stream)")
    p.add_argument("--size", default="16M", help="udp: AllReduce bytes")
    p.add_argument("--iters", type=int, default=40, help="udp: timed AllReduces per run")
    p.add_argument("--no-perf", dest="perf", action="store_false")
    p.add_argument("--json", default=None)
    p.add_argument("--sweep", default=None, metavar="SIZES",
                   help="udp: also measure at each of these AllReduce sizes (comma-separated)")
    a = p.parse_args()
    a.perf = a.perf and os.geteuid() == 0 and shutil.which("perf") is not None
    global FIFO
    FIFO = can_run_fifo()
    if not FIFO:
        print("# note: not under SCHED_FIFO (not root, or not allowed): the DPDK lcore's busy "
              "cycles include whatever preempts it")
    balloon = fabric_ns.free_page_reporting()
    if balloon:
        print(f"# note: free-page reporting is on ({balloon} bound to virtio_balloon): the UDP "
              "runs' kernel copies may run at half speed in some runs; read the spread, or unbind "
              "it (bench/fabric/README.md, 'On a VM')")
    work = tempfile.mkdtemp(prefix="cfx-capacity-")
    report = {"format": "conflux-capacity/1", "host": os.uname().nodename,
              "cpus": os.cpu_count(), "workers": a.workers, "free_page_reporting": balloon,
              "command": "bench/capacity/capacity.py " + " ".join(sys.argv[1:]),
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    planes = a.dataplanes.split(",")
    if "dpdk" in planes:
        d = measure_dpdk(a, work)
        if d:
            report["dpdk"] = d
            print(f"dpdk  {d['gbit_per_core']:.1f} Gbit/s of contributions per lcore "
                  f"(runs {spread([r['gbit_per_core'] for r in d['runs']])}); "
                  f"{d['busy_cycles']:.0f} TSC cycles per 8 KiB contribution = "
                  f"{d['cycles_per_byte']:.2f} cycles/byte at {d['tsc_ghz']:.2f} GHz; "
                  f"{d['mode']}, {d['burst']:.1f} frames per busy poll")
            for g, v in d.get("breakdown_cycles_per_byte", {}).items():
                print(f"      {g:<14} {v:.3f} cycles/byte")
    if "udp" in planes:
        u = measure_udp(a, work)
        report["udp"] = u
        print(f"udp   {u['gbit_per_core']:.1f} Gbit/s of contributions per daemon core "
              f"(runs {spread([r['gbit_per_core'] for r in u['runs']])}); daemon "
              f"{u['daemon_cpu_s_per_gb']:.3f} CPU-s per GB in; workers "
              f"{u['worker_cpu_s_per_gb']:.3f} CPU-s per GB AllReduced "
              f"({a.workers} workers, {a.size} float sums, loopback, fan-out)")
        if u["kib_in_per_wakeup"] is not None:
            print(f"      daemon reads {u['kib_in_per_wakeup']:.0f} KiB of contributions per "
                  f"wake-up (runs {spread([r['kib_in_per_wakeup'] or 0 for r in u['runs']])})")
        for g, v in u.get("breakdown_ns_per_byte", {}).items():
            print(f"      daemon {g:<14} {v:.3f} ns/byte")
        if u.get("worker_cpu_s_per_gb_net") is not None:
            print(f"      workers without the test tool's own input generation: "
                  f"{u['worker_cpu_s_per_gb_net']:.3f} CPU-s per GB AllReduced")
        for g, v in u.get("worker_breakdown_ns_per_byte", {}).items():
            print(f"      worker {g:<14} {v:.3f} ns/byte")
    if a.sweep and "udp" in planes:
        report["udp_by_size"] = udp_sweep(a, work)
    for plane in ("dpdk", "udp"):
        if plane in report:
            cores = 100 / report[plane]["gbit_per_core"]
            print(f"# {plane}: {cores:.1f} cores per 100 Gbit/s of contributions "
                  f"(conflux plan --dataplane {plane} --core-gbit "
                  f"{report[plane]['gbit_per_core']:.1f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    # Every dataplane asked for (DPDK only where it is built) measured something sensible.
    bad = [p for p in planes if p in report and not 0 < report[p]["gbit_per_core"] < 10000]
    bad += [p for p in planes if p == "udp" and "udp" not in report]
    # The daemon slept at least once in each run (conflux_dataplane_sleeps_total is counted).
    bad += ["udp (no wake-ups counted)" for p in planes
            if p == "udp" and "udp" in report and not report["udp"]["kib_in_per_wakeup"]]
    if bad:
        print(f"# error: no sensible figure for {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
