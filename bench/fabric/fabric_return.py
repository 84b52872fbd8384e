#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A job comes back to its aggregator after the daemon restarts, on the emulated fabric.

The fabric of conflux_fabric.py with --workers workers at --rate and one confluxd at
--agg-factor times that. One CollNet job runs hybrid AllReduces (--ring-fraction auto, the
setting under which a job returns; float sum, --bytes each; the last result verified, every one
with --check-iters, which adds each rank's check to every iteration's time) and records
the end time and duration of each (conflux-nccl-driver --timeline). --kill-at seconds after the
job's first packet the daemon is killed (SIGKILL); --down-for seconds later it starts again on
the same address and ports. The job fails over to the ring, keeps asking for the daemon, and
re-joins it.

Printed: the job's algbw per --bin seconds with the events marked; the steady algbw before the
kill, on the ring, and after the return; and how long after the daemon answered again (its
ready file, written once it listens) the job ran at >= 0.95 of its pre-kill algbw: the first
iteration to start after that from which both the next second and the rest of the run do.
--json writes all of it as a "conflux-timeline/1" report (bench/plot_results.py plots it).
Root, like conflux_fabric.

    bench/fabric/fabric_return.py --build build [--workers 4] [--rate 1000] [--agg-factor 4]
                                  [--bytes 16M] [--kill-at 6] [--down-for 5] [--tail 12]
                                  [--window 1] [--json FILE] [--goal 10]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_ns  # noqa: E402
import fabric_run  # noqa: E402

TARGET = 0.95


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fabric_run.add_scenario_args(p, agg_factor=4.0, one_job=True)
    p.add_argument("--kill-at", type=float, default=6.0,
                   help="seconds after the job's first packet")
    p.add_argument("--down-for", type=float, default=5.0,
                   help="seconds between the kill and the restart")
    p.add_argument("--tail", type=float, default=12.0,
                   help="seconds the job runs after the restart (at the link rate)")
    p.add_argument("--window", type=float, default=1.0,
                   help="seconds of iterations behind each point of the printed/plotted algbw")
    p.add_argument("--goal", type=float,
                   help="exit 1 unless the job is back at >= 0.95 of its pre-kill algbw within "
                        "this many seconds of the daemon answering")
    p.add_argument("--check-iters", action="store_true",
                   help="verify every iteration's result (the test does; slower iterations)")
    p.add_argument("--json", help="write the conflux-timeline/1 report here")
    return p.parse_args(argv)


def size_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def run(a, fab, runner, workdir):
    """The job with the daemon killed and restarted under it: (timeline, {event: unix time})."""
    nbytes = size_bytes(a.bytes)
    agg = fab.aggs["a0"]
    # Enough AllReduces for the whole scenario at the link rate (the fastest it can go); the
    # job ends on its own after its last one.
    seconds = a.kill_at + a.down_for + a.tail
    iters = int(seconds * a.rate / 8 * 1e6 / nbytes) + 2
    eps = runner.start_aggregators(["a0"], 1)
    timeline = os.path.join(workdir, "timeline.txt")
    env = {"CONFLUX_AGGREGATOR_TIMEOUT_MS": "1000"}
    env.update(dict(kv.split("=", 1) for kv in a.env))
    ranks = runner.start_ranks(
        "job", fab.workers, 29650, eps[0],
        ["--modes", "hybrid", "--ring-fraction", "auto", "--require-collnet", "-d", "float",
         "-o", "sum", "-b", a.bytes, "-e", a.bytes, "-n", str(iters), "-w", "1",
         *(["--check-iters"] if a.check_iters else []), "--idle-sleep-us", "50", "--timeout",
         "600", "--timeline", timeline],
        env)
    first = fabric_run.wait_first_packet(agg, ranks[0][0], "return")
    events = {}
    time.sleep(max(0.0, first + a.kill_at - time.monotonic()))
    if ranks[0][0].poll() is not None:
        raise fabric_run.RunError("the job ended before the kill; run more iterations")
    runner.kill_aggregator("a0")
    events["kill"] = time.time()
    print("# daemon killed (SIGKILL)", flush=True)
    time.sleep(a.down_for)
    for f in os.listdir(workdir):  # the old ready file would read as the new daemon's
        if f.startswith("ready-a0-"):
            os.unlink(os.path.join(workdir, f))
    events["restart"] = time.time()
    runner.start_aggregators(["a0"], 1)
    events["answer"] = time.time()
    print(f"# daemon answering {events['answer'] - events['restart']:.2f} s after its start",
          flush=True)
    while ranks[0][0].poll() is None and "back" not in events:
        if fabric_run.job_packets(agg) > 0:  # the restarted daemon's first packet of the job
            events["back"] = time.time()
            print(f"# the job's packets reach the daemon {events['back'] - events['answer']:.2f}"
                  " s after it answered", flush=True)
        time.sleep(0.05)
    verified, text = fabric_run.finish_ranks(ranks)
    if not verified:
        raise fabric_run.RunError(f"the job was not verified:\n{text[-3000:]}")
    runner.stop_aggregators()
    if "back" not in events:
        raise fabric_run.RunError(f"the job never came back to the daemon:\n{text[-3000:]}")
    for line in text.splitlines():
        if "return" in line.lower() or "fail" in line.lower() or "ring fraction" in line:
            print(f"#   r0: {line.strip()}")
    return fabric_run.read_timeline(timeline), events


def main(argv):
    a = parse_args(argv)
    bins = fabric_run.preflight("fabric_return", a)
    if bins is None:
        return 77
    agg_mbit = int(a.rate * a.agg_factor)
    prefix = f"cfx{os.getpid()}"
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-return-")
    fab = fabric_ns.Fabric(prefix, a.workers, a.rate, [("a0", agg_mbit)])
    runner = fabric_run.Runner(fab, bins, workdir, driver_env={"NCCL_DEBUG": "INFO"},
                               agg_args=a.agg_arg)
    print(f"# fabric_return: {a.workers} workers @ {a.rate} Mbit/s, 1 aggregator @ {agg_mbit} "
          f"Mbit/s, hybrid auto, {a.bytes} per AllReduce; killed at {a.kill_at:g} s, down "
          f"{a.down_for:g} s; logs in {workdir}", flush=True)
    try:
        fab.build()
        pts, ev = run(a, fab, runner, workdir)
    finally:
        runner.kill_all()
        fab.teardown()
    t0 = pts[0][0]
    end = pts[-1][1]
    before = fabric_run.algbw(fabric_run.between(pts, t0 + min(1.0, (ev["kill"] - t0) / 2),
                                                 ev["kill"]))
    ring = fabric_run.algbw(fabric_run.between(pts, ev["kill"] + 2.0, ev["restart"]))
    rec = fabric_run.recovery(pts, ev["answer"], end, TARGET * before)
    after = fabric_run.algbw(fabric_run.between(pts, ev["answer"] + (rec or 0) + 1.0, end))
    series = fabric_run.rolling(pts, t0, a.window)
    marks = {k: round(v - t0, 4) for k, v in ev.items()}
    print(f"# t(s) algbw(GB/s) of the iterations in the {a.window:g} s before t, every 0.5 s; "
          "t from the first iteration's start")
    shown = -1.0
    for i, (t, v) in enumerate(series):
        label = "".join(f"  <- {k} at {at:.2f} s" for k, at in marks.items()
                        if (series[i - 1][0] if i else 0.0) < at <= t)
        if t - shown >= 0.5 or label:
            print(f"{t:7.2f} {v:8.4f}{label}")
            shown = t
    print(f"# before the kill: {before:.4f} GB/s")
    print(f"# on the ring (from 2 s after the kill): {ring:.4f} GB/s"
          + (f" = {ring / before:.3f} of before" if before else ""))
    print(f"# back at >= {TARGET:g} x {before:.4f} GB/s "
          + (f"{rec:.2f} s after the daemon answered" if rec is not None else "never"))
    print(f"# after the return: {after:.4f} GB/s"
          + (f" = {after / before:.3f} of before" if before else ""))
    print("# every result verified" if a.check_iters else "# the last result verified")
    if a.json:
        fabric_run.write_timeline_report(
            a.json, {"what": "daemon restart under a running job", "workers": a.workers,
                     "mbit": a.rate, "agg_mbit": agg_mbit, "bytes": size_bytes(a.bytes),
                     "mode": "hybrid auto",
                     "command": "bench/fabric/fabric_return.py " + " ".join(argv)},
            {"job": pts}, ev, a.window, before,
            [("before the kill", before), ("on the ring", ring), ("after the return", after)],
            [(f"back at >= {TARGET:g} of before, after the daemon answered", rec)])
    if a.goal is not None and (rec is None or rec > a.goal):
        print(f"# goal: back within {a.goal:g} s: NOT MET")
        return 1
    return 0


if __name__ == "__main__":
    fabric_run.run_scenario(main)
