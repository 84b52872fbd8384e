#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two CollNet jobs sharing one aggregator on the emulated fabric (fair sharing).

The fabric of conflux_fabric.py with 2 x J workers at --rate and one confluxd whose link is
--agg-factor times that. Job A (the first J workers) starts alone; job B (the other J) joins
--stagger seconds later with fewer requests and ends first. Each job is a
conflux-nccl-driver run (--modes collnet, 1 MiB float sums, every result verified). Every
--sample seconds the daemon's /metrics give each job's grant and achieved result rate
(conflux_job_grant_mbps, conflux_job_result_mbps, sampled by the daemon about once a second).

Printed: the samples; A's mean rate alone before B came; each job's mean rate while both ran,
against A's alone rate (the aggregator's capacity for one job) and against its weighted
share; how long after B left A took to be back at >= 95 % of its alone rate. The same three
again from the jobs' own timelines (conflux-nccl-driver --timeline: every AllReduce's end and
duration), which have no sampling delay. With --weights, whether every pair of grants the
daemon showed while both ran stands in the weights' ratio (the exit status says so too).
Root, like conflux_fabric.

    bench/fabric/fabric_share.py --build build [--workers-per-job 2] [--rate 1000]
                                 [--agg-factor 1] [--requests-a 600] [--requests-b 200]
                                 [--weights 3,1]
"""
import argparse
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_ns  # noqa: E402
import fabric_run  # noqa: E402

SAMPLE_RE = re.compile(r'^conflux_job_(grant|result)_mbps\{conflux_job="(\d+)"\} ([\d.eE+-]+)$', re.M)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fabric_run.add_scenario_args(p, agg_factor=1.0)
    p.add_argument("--workers-per-job", type=int, default=2)
    p.add_argument("--json", help="write both jobs' timelines as a conflux-timeline/1 report "
                                  "here (bench/plot_results.py plots it)")
    p.add_argument("--window", type=float, default=1.0,
                   help="--json: seconds of iterations behind each point of the algbw")
    p.add_argument("--requests-a", type=int, default=600, help="job A's 1 MiB AllReduces")
    p.add_argument("--requests-b", type=int, default=200, help="job B's 1 MiB AllReduces")
    p.add_argument("--stagger", type=float, default=4.0, help="seconds before B starts")
    p.add_argument("--sample", type=float, default=0.5, help="seconds between samples")
    p.add_argument("--weights", default=None, metavar="WA,WB",
                   help="put A and B in tenants of these weights (a tenants file for confluxd, "
                        "each job with its tenant's CONFLUX_SECRET); default: no tenants, 1,1")
    a = p.parse_args(argv)
    a.tenants = a.weights is not None
    try:
        a.weights = [int(w) for w in (a.weights or "1,1").split(",")]
    except ValueError:
        a.weights = []
    if len(a.weights) != 2 or min(a.weights) < 1:
        p.error("--weights: two positive integers, WA,WB")
    return a


def write_tenants(workdir, weights):
    """A confluxd config with tenants A and B of these weights; their test secrets."""
    path = os.path.join(workdir, "tenants.toml")
    with open(path, "w") as f:
        for name, w in zip("ab", weights):
            f.write(f'[tenants.job_{name}]\nsecret = "fabric-share-tenant-{name}"\n'
                    f"weight = {w}\n\n")
    return path


def timeline_path(runner, name):
    return os.path.join(runner.workdir, f"job-{name}-timeline.txt")


def start_job(runner, name, workers, port, aggs, requests, env_extra):
    return runner.start_ranks(
        f"job-{name}", workers, port, aggs,
        ["--modes", "collnet", "--require-collnet", "-d", "float", "-o", "sum", "-b", "1M", "-e",
         "1M", "-n", str(requests), "-w", "1", "--idle-sleep-us", "50", "--timeout", "600",
         "--timeline", timeline_path(runner, name)], env_extra)


def sample(agg):
    got = {}
    for kind, job, v in SAMPLE_RE.findall(fabric_run.scrape(agg)):
        got.setdefault(int(job), {})[kind] = float(v)
    return got


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def main(argv):
    a = parse_args(argv)
    bins = fabric_run.preflight("fabric_share", a)
    if bins is None:
        return 77
    j = a.workers_per_job
    agg_mbit = int(a.rate * a.agg_factor)
    prefix = f"cfx{os.getpid()}"
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-share-")
    fab = fabric_ns.Fabric(prefix, 2 * j, a.rate, [("a0", agg_mbit)])
    agg_args = list(a.agg_arg)
    env = dict(kv.split("=", 1) for kv in a.env)
    env_a, env_b = dict(env), dict(env)
    if a.tenants:
        agg_args.append(f"--config={write_tenants(workdir, a.weights)}")
        env_a["CONFLUX_SECRET"] = "fabric-share-tenant-a"
        env_b["CONFLUX_SECRET"] = "fabric-share-tenant-b"
    runner = fabric_run.Runner(fab, bins, workdir, agg_args=agg_args)
    wa, wb = a.weights[0] / sum(a.weights), a.weights[1] / sum(a.weights)
    print(f"# fabric_share: 2 jobs x {j} workers @ {a.rate} Mbit/s, 1 aggregator @ {agg_mbit} "
          f"Mbit/s, A {a.requests_a} x 1 MiB, B {a.requests_b} x 1 MiB {a.stagger:g} s later, "
          f"weights {a.weights[0]}:{a.weights[1]}{' (tenants)' if a.tenants else ''}, "
          f"logs in {workdir}", flush=True)
    samples = []  # (t, {job: {grant, result}})
    try:
        fab.build()
        eps = runner.start_aggregators(["a0"], 1)
        t0 = time.monotonic()
        job_a = start_job(runner, "a", fab.workers[:j], 29601, eps[0], a.requests_a, env_a)
        job_b = None
        print("# t(s) job:grant=Mbit/s,result=Mbit/s ...", flush=True)
        while any(p.poll() is None for p, _ in job_a):
            t = time.monotonic() - t0
            if job_b is None and t >= a.stagger:
                job_b = start_job(runner, "b", fab.workers[j:], 29602, eps[0], a.requests_b, env_b)
            s = sample(fab.aggs["a0"])
            samples.append((t, s))
            print(f"{t:6.1f} " + " ".join(f"{k}:{v.get('grant', 0):.0f},{v.get('result', 0):.0f}"
                                        for k, v in sorted(s.items())), flush=True)
            time.sleep(a.sample)
        ok_a = fabric_run.finish_ranks(job_a)[0]
        ok_b = job_b is not None and fabric_run.finish_ranks(job_b)[0]
    finally:
        runner.kill_all()
        fab.teardown()
    jobs = sorted({k for _, s in samples for k in s})
    if len(jobs) < 2:
        print("# error: the daemon never showed two jobs")
        return 1
    ja, jb = jobs[0], jobs[1]  # job ids are handed out in order of joining

    def rate(s, k):
        return s.get(k, {}).get("result", 0.0)
    # The daemon's rate trails by up to a second: leave out a second at each edge.
    both = [s for t, s in samples if rate(s, ja) > 0 and rate(s, jb) > 0]
    both = both[2:-2] if len(both) > 6 else both
    alone = [rate(s, ja) for t, s in samples if t < a.stagger and jb not in s and rate(s, ja) > 0]
    b_gone = [t for t, s in samples if jb in s]
    last_b = b_gone[-1] if b_gone else None
    cap = mean(alone)
    print(f"# job A alone: {cap:.0f} Mbit/s of results (the aggregator's capacity for one job)")
    for name, k, w in (("A", ja, wa), ("B", jb, wb)):
        m = mean([rate(s, k) for s in both])
        print(f"# job {name} while both ran: {m:.0f} Mbit/s = {m / cap:.2f} of A alone, "
              f"{m / cap / w:.2f} of its weighted share {w:.2f} ({len(both)} samples)"
              if cap > 0 else f"# job {name}: {m:.0f} Mbit/s")
    if last_b is not None and cap > 0:
        back = next((t for t, s in samples if t > last_b and rate(s, ja) >= 0.95 * cap), None)
        print(f"# after B left (last seen at {last_b:.1f} s): A at >= 95 % of its alone rate "
              + (f"{back - last_b:.1f} s later" if back else "not within the run"))
    # The same from the jobs' own timelines (each AllReduce's end and duration, rank 0): no
    # sampling delay. Shares: each job's algbw while both ran (from B's first AllReduce to
    # its last) against A's alone before B; the return: the first AllReduce of A after B's
    # last from which the next second and the rest of A run at >= 95 % of its alone rate.
    if ok_a and ok_b:
        ta = fabric_run.read_timeline(timeline_path(runner, "a"))
        tb = fabric_run.read_timeline(timeline_path(runner, "b"))
        b0, b1 = tb[0][0], tb[-1][1]
        alone = fabric_run.algbw(fabric_run.between(ta, ta[0][0] + 1.0, b0))
        a_both = fabric_run.algbw(fabric_run.between(ta, b0 + 1.0, b1 - 1.0))
        b_both = fabric_run.algbw(fabric_run.between(tb, b0 + 1.0, b1 - 1.0))
        if alone > 0 and b0 - ta[0][0] >= 2.0:  # a second of A alone after its first
            back = fabric_run.recovery(ta, b1, ta[-1][1], 0.95 * alone)
            print(f"# timelines: A alone {alone:.4f} GB/s; while both ran (1 s in from each "
                  f"edge): A {a_both / alone:.2f}, B {b_both / alone:.2f} of it (weighted "
                  f"shares {wa:.2f}, {wb:.2f}); A at >= 95 % "
                  "of its alone rate " + (f"{back:.2f} s after B's last AllReduce"
                                          if back is not None else "not within the run"))
            if a.json:
                fabric_run.write_timeline_report(
                    a.json, {"what": f"two jobs on one aggregator at {a.agg_factor:g}x, weights "
                                     f"{a.weights[0]}:{a.weights[1]}", "workers": 2 * j,
                             "mbit": a.rate, "agg_mbit": agg_mbit, "bytes": 1 << 20,
                             "mode": "CollNet", "reference": "A alone",
                             "command": "bench/fabric/fabric_share.py " + " ".join(argv)},
                    {"job A": ta, "job B": tb}, {"B starts": b0, "B ends": b1}, a.window, alone,
                    [("A alone", alone), ("A while both ran", a_both),
                     ("B while both ran", b_both)],
                    [("A at >= 0.95 of alone after B's last AllReduce", back)])
        else:  # B came too soon after A's start (the ctest's short stagger)
            print(f"# timelines: A's rate alone not measured (B came {b0 - ta[0][0]:.1f} s "
                  f"after A's first AllReduce); while both ran: A {a_both:.4f}, B {b_both:.4f} "
                  "GB/s")
    print(f"# job A: {'verified' if ok_a else 'NOT verified'}; job B: "
          f"{'verified' if ok_b else 'NOT verified'}")
    grants_ok = True
    if a.tenants:
        # The daemon divides its capacity by the tenants' weights: the grants it showed while
        # both jobs were live stand in the weights' ratio (within rounding to whole Mbit/s).
        def grant(s, k):
            return s.get(k, {}).get("grant", 0.0)
        pairs = [(grant(s, ja), grant(s, jb)) for _, s in samples if ja in s and jb in s]
        grants_ok = bool(pairs) and all(
            gb > 0 and abs(ga * a.weights[1] - gb * a.weights[0]) <= sum(a.weights)
            for ga, gb in pairs)
        shown = sorted(set(pairs))
        print(f"# grants while both ran (A, B Mbit/s): {shown}; weights {a.weights[0]}:"
              f"{a.weights[1]}: {'as weighted' if grants_ok else 'NOT as weighted'}")
    return 0 if ok_a and ok_b and grants_ok else 1


if __name__ == "__main__":
    fabric_run.run_scenario(main)
