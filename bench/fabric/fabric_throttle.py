#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An aggregator throttled mid-run, and the throttle lifted (the split follows).

The fabric of conflux_fabric.py with --workers workers at --rate and one confluxd whose link is
--agg-factor times that (results by unicast, so the daemon's cap on its result bytes limits
what it can give the job). One CollNet job runs hybrid AllReduces (--ring-fraction auto, float
sum, --bytes each, every result verified) and records the end time and duration of each
(conflux-nccl-driver --timeline). Two runs:

1. the reference: the daemon capped at --throttle-to of its line rate from its start. The job's
   steady algbw (its iterations after --settle seconds) is the new optimum: what the auto split
   reaches when the slow aggregator is all it has ever known.
2. the throttle: the daemon uncapped; --throttle-at seconds after the job's first packet,
   `conflux throttle --max-mbps` caps it at that fraction; --lift-after seconds later
   `--max-mbps 0` lifts the cap.

Printed: each run's algbw per second; the steady algbw before the throttle, after it and
after the lift; how long after the throttle (and after the lift) the job ran at >= 0.95 of the
target (the reference's optimum, and the pre-throttle rate): the first iteration to start after
the event from which on both the next second and the rest of the phase run at >= 0.95 of it.
Root, like conflux_fabric.

    bench/fabric/fabric_throttle.py --build build [--workers 4] [--rate 1000] [--agg-factor 4]
                                    [--bytes 16M] [--throttle-to 0.25] [--throttle-at 5]
                                    [--lift-after 7] [--tail 6] [--json FILE]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_ns  # noqa: E402
import fabric_run  # noqa: E402

SECRET = "fabric-throttle-secret"  # admin commands from another host need one
TARGET = 0.95


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fabric_run.add_scenario_args(p, agg_factor=4.0, one_job=True)
    p.add_argument("--throttle-to", type=float, default=0.25,
                   help="the cap, as a fraction of the aggregator's line rate")
    p.add_argument("--throttle-at", type=float, default=5.0,
                   help="seconds after the job's first packet")
    p.add_argument("--lift-after", type=float, default=7.0,
                   help="seconds after the throttle (0: never lifted)")
    p.add_argument("--tail", type=float, default=6.0, help="seconds the job runs after the lift")
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds of the reference run left out of its optimum")
    p.add_argument("--json", help="write the throttle run as a conflux-timeline/1 report here "
                                  "(bench/plot_results.py plots it)")
    p.add_argument("--window", type=float, default=1.0,
                   help="--json: seconds of iterations behind each point of the algbw")
    p.add_argument("--skip-reference", action="store_true",
                   help="no reference run: targets from the throttle run alone (for the test)")
    return p.parse_args(argv)


def size_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1].upper()] if s[-1].upper() in units else int(s)


def print_series(name, points, t0, marks):
    """algbw per 1 s bin (bytes of the iterations ending in it; coarse, for the eye)."""
    print(f"# {name}: t(s) algbw(GB/s) per second, t from the first iteration's start")
    bins = {}
    for _, e, b in points:
        bins[int(e - t0)] = bins.get(int(e - t0), 0) + b
    for k in range(max(bins) + 1 if bins else 0):
        label = "".join(f"  <- {m} at {at - t0:.1f} s" for m, at in marks if k <= at - t0 < k + 1)
        print(f"{k:6d} {bins.get(k, 0) / 1e9:8.4f}{label}")


class Scenario:
    def __init__(self, a, fab, runner, workdir):
        self.a, self.fab, self.runner, self.workdir = a, fab, runner, workdir
        self.agg = fab.aggs["a0"]
        self.seq = 0

    def conflux(self, *args):
        r = subprocess.run(["ip", "netns", "exec", self.agg.ns, self.runner.bins["conflux"],
                            *args, "--secret", SECRET], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            raise fabric_run.RunError(f"conflux {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout.strip()

    def run(self, name, iters, cap_mbps, events):
        """One job of `iters` AllReduces against a fresh daemon started with --max-mbps
        cap_mbps; events: [(seconds after the first packet, new max_mbps)]. Returns the
        timeline and [(name, unix time)] of the events as applied."""
        self.seq += 1
        self.runner.agg_args = list(self.a.agg_arg) + ["--secret", SECRET,
                                                         "--max-mbps", str(cap_mbps)]
        eps = self.runner.start_aggregators(["a0"], 1)
        timeline = os.path.join(self.workdir, f"{name}-timeline.txt")
        ranks = self.runner.start_ranks(
            name, self.fab.workers, 29700 + self.seq, eps[0],
            ["--modes", "hybrid", "--ring-fraction", "auto", "--require-collnet", "-d", "float",
             "-o", "sum", "-b", self.a.bytes, "-e", self.a.bytes, "-n", str(iters), "-w", "1",
             "--idle-sleep-us", "50", "--timeout", "600", "--timeline", timeline],
            dict(kv.split("=", 1) for kv in self.a.env))
        applied = []
        first = fabric_run.wait_first_packet(self.agg, ranks[0][0], name)
        for at, mbps in events:
            time.sleep(max(0.0, first + at - time.monotonic()))
            if ranks[0][0].poll() is not None:
                raise fabric_run.RunError(f"{name}: the job ended before the event at {at} s; "
                                          "run more iterations")
            out = self.conflux("throttle", f"{self.agg.ip}:9470", "--max-mbps", str(mbps))
            applied.append((f"max_mbps {mbps}", time.time()))
            print(f"# {name}: {out}", flush=True)
        verified, text = fabric_run.finish_ranks(ranks)
        if not verified:
            raise fabric_run.RunError(f"{name}: not verified:\n{text[-3000:]}")
        self.runner.stop_aggregators()
        splits = [line for line in text.splitlines()
                  if "ring fraction" in line or "grant now" in line]
        heard = sum("grant now" in line for line in splits)
        if heard < len(events):
            raise fabric_run.RunError(f"{name}: rank 0 heard {heard} new grant(s) of "
                                      f"{len(events)}:\n{text[-3000:]}")
        for line in splits[:40]:
            print(f"#   r0: {line.strip()}")
        return fabric_run.read_timeline(timeline), applied


def main(argv):
    a = parse_args(argv)
    bins = fabric_run.preflight("fabric_throttle", a)
    if bins is None:
        return 77
    agg_mbit = int(a.rate * a.agg_factor)
    cap = max(1, int(agg_mbit * a.throttle_to))
    nbytes = size_bytes(a.bytes)
    # Enough AllReduces for the whole scenario at the link rate (the fastest it can go), plus
    # a margin; the job ends on its own after its last one.
    seconds = a.throttle_at + (a.lift_after + a.tail if a.lift_after > 0 else a.tail)
    iters = int(seconds * a.rate / 8 * 1e6 / nbytes * 1.1) + 2
    prefix = f"cfx{os.getpid()}"
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-throttle-")
    fab = fabric_ns.Fabric(prefix, a.workers, a.rate, [("a0", agg_mbit)])
    runner = fabric_run.Runner(fab, bins, workdir, driver_env={"CONFLUX_SECRET": SECRET,
                                                               "NCCL_DEBUG": "INFO"})
    print(f"# fabric_throttle: {a.workers} workers @ {a.rate} Mbit/s, 1 aggregator @ {agg_mbit} "
          f"Mbit/s, hybrid auto, {a.bytes} x {iters}; cap {cap} Mbit/s "
          f"({a.throttle_to:g} of its line); logs in {workdir}", flush=True)
    events = [(a.throttle_at, cap)] + ([(a.throttle_at + a.lift_after, 0)]
                                       if a.lift_after > 0 else [])
    try:
        fab.build()
        sc = Scenario(a, fab, runner, workdir)
        ref = None
        if not a.skip_reference:
            ref_iters = int((a.settle + 6) * a.rate / 8 * 1e6 / nbytes * a.throttle_to * 2) + 2
            pts, _ = sc.run("reference", ref_iters, cap, [])
            ref = fabric_run.algbw([p for p in pts if p[0] >= pts[0][0] + a.settle])
            print_series("reference (capped from the start)", pts, pts[0][0], [])
            print(f"# reference: optimum {ref:.4f} GB/s (the iterations after {a.settle:g} s)")
        pts, applied = sc.run("throttle", iters, 0, events)
    finally:
        runner.kill_all()
        fab.teardown()
    t0 = pts[0][0]
    print_series("throttle run", pts, t0, applied)
    throttle = applied[0][1]
    lift = applied[1][1] if len(applied) > 1 else pts[-1][1]
    # Steady rates leave out the first second of the run and the first 2 s after each event
    # (half of a shorter phase); a phase without a whole AllReduce in it reads 0.
    before = fabric_run.algbw(fabric_run.between(pts, t0 + min(1.0, (throttle - t0) / 2),
                                                 throttle))
    settle = min(2.0, (lift - throttle) / 2)
    after = fabric_run.algbw(fabric_run.between(pts, throttle + settle, lift))
    print(f"# before the throttle: {before:.4f} GB/s")
    print(f"# throttled (from {settle:.1f} s after): {after:.4f} GB/s"
          + (f" = {after / ref:.3f} of the reference's optimum {ref:.4f}" if ref else ""))
    target = ref if ref else after
    rec = fabric_run.recovery(pts, throttle, lift, TARGET * target)
    print(f"# after the throttle: >= {TARGET:g} x {target:.4f} GB/s "
          + (f"{rec:.2f} s later" if rec is not None else "never within the phase"))
    phases = [("before the throttle", before), ("throttled", after)]
    recoveries = [(f"at >= {TARGET:g} of the " + ("reference's optimum" if ref else
                                                 "throttled rate") + " after the throttle", rec)]
    if len(applied) > 1:
        settle = min(2.0, (pts[-1][1] - lift) / 2)
        lifted = fabric_run.algbw(fabric_run.between(pts, lift + settle, pts[-1][1]))
        rec2 = fabric_run.recovery(pts, lift, pts[-1][1], TARGET * before)
        print(f"# lifted (from {settle:.1f} s after): {lifted:.4f} GB/s"
              + (f" = {lifted / before:.3f} of before" if before > 0 else ""))
        print(f"# after the lift: >= {TARGET:g} x {before:.4f} GB/s "
              + (f"{rec2:.2f} s later" if rec2 is not None else "never within the run"))
        phases.append(("after the lift", lifted))
        recoveries.append((f"back at >= {TARGET:g} of before after the lift", rec2))
    if ref:
        phases.insert(1, ("reference: capped from the start", ref))
    if a.json:
        fabric_run.write_timeline_report(
            a.json, {"what": f"aggregator throttled to {a.throttle_to:g} of its line",
                     "workers": a.workers, "mbit": a.rate, "agg_mbit": agg_mbit,
                     "bytes": nbytes, "mode": "hybrid auto",
                     "command": "bench/fabric/fabric_throttle.py " + " ".join(argv)},
            {"job": pts}, dict(zip(("throttle", "lift"), (t for _, t in applied))), a.window,
            before,
            phases, recoveries)
    print("# every result verified")
    return 0


if __name__ == "__main__":
    fabric_run.run_scenario(main)
