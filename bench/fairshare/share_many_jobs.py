#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Eight (or N) jobs on one capped confluxd: does each get its weighted share?

Starts one confluxd on loopback (one dataplane thread, --max-mbps CAP; with weights, one tenant
per distinct weight, each with its own secret), then N CollNet jobs of 2 ranks each through
conflux-nccl-driver (1 MiB float sums, every result verified), one after the other so that the
daemon's job ids follow the start order. Every 0.5 s it reads each job's grant and achieved
result rate from /metrics (conflux_job_grant_mbps, conflux_job_result_mbps; the daemon samples
rates about once a second).

Scenarios (--scenario):
  equal     N jobs of weight 1
  weighted  N jobs of the weights --weights (default 4,2,1,1,...)
  churn     N-1 steady jobs of weight 1, and one more that joins for ~2 s and leaves, again
            and again (a new job each time)
  loss      N jobs of weight 1; the last one's ranks drop --loss of their aggregator datagrams
            (CONFLUX_FAULT_DROP: test builds; on the fabric, real loss: an nftables rule drops
            that share of what arrives at the job's two worker hosts from the aggregator's, its
            results and control messages), so it retransmits and cannot use all of its share

--fabric RATE runs the same on the emulated fabric of bench/fabric (root): one network
namespace per rank (2 x N worker hosts, links shaped to RATE Mbit/s; the churning jobs take
turns on the last pair) and confluxd alone on an aggregator host whose link (--agg-rate,
default 1.25 x CAP) is faster than the daemon's --max-mbps CAP, so the daemon's cap is the
bottleneck all jobs share, and the links leave room for headers and resends. The namespaces are
deleted on exit, also on SIGTERM/SIGINT.

In the steady window (from --settle s after the last steady job started to the first steady
job's end) each sample's weighted share of job j is CAP * w_j / (sum of the weights of the jobs
holding a grant then, the churning job included while it does). Prints per job: mean achieved
rate, mean share, their ratio, the grant, and the result datagrams the daemon resent to the
job (a rank asked again: lost, or late past its timer) with their share of all it sent the job
(the achieved rate counts them). The verdict is whether every job that can use its share (all
but the lossy one) achieved within 10 % of it (ratio >= 0.9). Exit 1 if a job's results were
not all verified (or, on the fabric, a namespace was left), or (with --strict) if a ratio is
below 0.9; 77 when --fabric cannot run (not root, no `ip netns`).

  bench/fairshare/share_many_jobs.py [--build build] [--scenario equal] [--jobs 8] [--cap 800]
                                     [--fabric 300 [--agg-rate MBIT]]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

CHURN_GAP = 4.0  # seconds between one churning job's exit and the next one's start

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "fabric"))
sys.path.insert(0, os.path.join(ROOT, "tests", "deploy"))
import fabric_ns  # noqa: E402
import fabric_run  # noqa: E402
import procs  # noqa: E402  (confluxd on loopback: shared with the deploy tests)


def driver_args(iters):
    """One job: 1 MiB float sums through the aggregator only, every result verified."""
    return ["--modes", "collnet", "--require-collnet", "-d", "float", "-o", "sum", "-b", "1M",
            "-e", "1M", "-n", str(iters), "-w", "1", "--timeout", "600"]


def write_tenants(work, tenants):
    """A confluxd config with one tenant per entry of {name: (secret, weight)}."""
    path = os.path.join(work, "tenants.toml")
    with open(path, "w") as f:
        for name, (secret, weight) in tenants.items():
            f.write(f'[tenants.{name}]\nsecret = "{secret}"\nweight = {weight}\n')
    return path


def parse_metrics(text):
    out = {}
    for name in ("grant_mbps", "result_mbps", "share_weight", "unicast_resends_total",
                 "results_sent_total"):
        for m in re.finditer(r'^conflux_job_%s\{conflux_job="(\d+)"[^}]*\} (\S+)$' % name, text, re.M):
            out.setdefault(int(m.group(1)), {})[name] = float(m.group(2))
    return out


class Loopback:
    """confluxd on 127.0.0.1 and each job one driver process of 2 ranks."""

    def __init__(self, a, tenants, work):
        self.build, self.work = a.build, work
        self.capacity = a.cap
        self.idle = [] if a.idle_sleep_us is None else ["--idle-sleep-us", str(a.idle_sleep_us)]
        args = ["--threads", "1", "--max-mbps", str(a.cap), "--max-jobs", "64"]
        if tenants:
            args += ["--config", write_tenants(work, tenants)]
        try:
            self.daemon = procs.Daemon(os.path.join(a.build, "aggregator/confluxd"), *args)
        except RuntimeError as e:
            sys.exit(str(e))
        self.control = self.daemon.control_port
        self.procs = []

    def metrics(self):
        return parse_metrics(self.daemon.metrics())

    def start(self, job):
        """Starts `job`; returns [(process, log path)]."""
        env = dict(os.environ, CONFLUX_AGGREGATORS=f"127.0.0.1:{self.control}",
                   CONFLUX_SOCKET_IFNAME="lo", **job.env)
        out = os.path.join(self.work, f"job-{job.name}.log")
        with open(out, "w") as f:
            p = subprocess.Popen(
                [os.path.join(self.build, "tools/driver/conflux-nccl-driver"),
                 "--plugin", os.path.join(self.build, "nccl_plugin/libnccl-net-conflux.so"),
                 "--nranks", "2"] + driver_args(job.iters) + self.idle,
                stdout=f, stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        return [(p, out)]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        try:
            self.daemon.stop()
        except subprocess.TimeoutExpired:
            self.daemon.proc.kill()
        return True


class OnFabric:
    """bench/fabric's emulated cluster: confluxd on aggregator host a0, job k's two ranks on
    worker hosts 2k and 2k+1 (one process each, env-mode bootstrap)."""

    def __init__(self, a, tenants, work, pairs, lossy_pair, bins):
        self.capacity = min(a.cap, a.agg_rate)  # the daemon divides min(line, max_mbps)
        lossy = {}
        if lossy_pair is not None:
            lossy = {2 * lossy_pair: 100 * a.loss, 2 * lossy_pair + 1: 100 * a.loss}
        self.fab = fabric_ns.Fabric(f"cfx{os.getpid()}", 2 * pairs, a.fabric,
                                    [("a0", a.agg_rate)], lossy_workers=lossy,
                                    loss_from="a0")
        agg_args = ["--max-mbps", str(a.cap), "--max-jobs", "64"]
        if tenants:
            agg_args += ["--config", write_tenants(work, tenants)]
        self.runner = fabric_run.Runner(self.fab, bins, work, agg_args=agg_args)
        self.port = 29600
        # 16 single-rank processes on a few cores: idle polling sleeps instead of spinning
        self.idle_sleep_us = 50 if a.idle_sleep_us is None else a.idle_sleep_us

    def build(self):
        print(self.fab.describe(), flush=True)
        self.fab.build()
        self.agg = self.runner.start_aggregators(["a0"], 1)[0]

    def metrics(self):
        return parse_metrics(fabric_run.scrape(self.fab.aggs["a0"]))

    def start(self, job):
        self.port += 1
        pair = self.fab.workers[2 * job.pair:2 * job.pair + 2]
        return self.runner.start_ranks(f"job-{job.name}", pair, self.port, self.agg,
                                       driver_args(job.iters) +
                                       ["--idle-sleep-us", str(self.idle_sleep_us)],
                                       job.env)

    def stop(self):
        if self.runner.agg_procs:
            self.runner.stop_aggregators()  # saves the daemon's last /metrics in the work dir
        self.runner.kill_all()
        if self.fab.created:
            drops = self.fab.loss_counts()
            if drops:
                print("# nftables loss drops: " +
                      ", ".join(f"{k} {v}" for k, v in sorted(drops.items())))
        self.fab.teardown()
        left = [ns for ns in fabric_ns.list_namespaces() if ns.startswith(self.fab.prefix + "-")]
        if left:
            print("# namespaces left behind: " + " ".join(left))
        return not left


class Job:
    def __init__(self, name, weight, secret, iters, pair, env_extra=None):
        self.name, self.weight, self.iters, self.pair = name, weight, iters, pair
        self.env = dict(env_extra or {})
        if secret:
            self.env["CONFLUX_SECRET"] = secret
        self.ranks, self.id = [], None

    def start(self, place):
        self.ranks = place.start(self)

    def running(self):
        return any(p.poll() is None for p, _ in self.ranks)

    def wait(self, timeout):
        for p, _ in self.ranks:
            p.wait(timeout=timeout)

    def verified(self):
        """Every rank exited 0 and rank 0 verified every result."""
        return (bool(self.ranks) and all(p.poll() == 0 for p, _ in self.ranks)
                and fabric_run.VERIFIED in open(self.ranks[0][1]).read())


def wait_new_job(place, known, timeout=20):
    """The id of the first job in /metrics that is not in `known` (the one just started)."""
    end = time.time() + timeout
    while time.time() < end:
        new = [j for j in place.metrics() if j not in known]
        if new:
            return min(new)
        time.sleep(0.05)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", choices=["equal", "weighted", "churn", "loss"], default="equal")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--cap", type=int, default=800, help="the daemon's max_mbps")
    ap.add_argument("--weights", default="", help="weighted: comma-separated, one per job")
    ap.add_argument("--duration", type=float, default=30, help="seconds of steady state wanted")
    ap.add_argument("--settle", type=float, default=4, help="seconds ignored after the last start")
    ap.add_argument("--loss", type=float, default=0.05, help="loss: the lossy job's drop share")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a share is missed")
    ap.add_argument("--json", help="write the per-job figures here")
    ap.add_argument("--fabric", type=int, default=0, metavar="RATE",
                    help="run on the emulated fabric, worker links at RATE Mbit/s (root)")
    ap.add_argument("--agg-rate", type=int, default=0, metavar="MBIT",
                    help="--fabric: the aggregator's link (default 1.25 x --cap)")
    ap.add_argument("--idle-sleep-us", type=int, default=None, metavar="US",
                    help="the driver's idle polling sleep (default: 50 on the fabric, where each "
                         "rank is a process, else the driver's default)")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="extra environment of every rank (e.g. NCCL_DEBUG=INFO)")
    a = ap.parse_args()
    a.agg_rate = a.agg_rate or int(1.25 * a.cap)

    n = a.jobs
    if a.scenario == "weighted":
        weights = [int(w) for w in a.weights.split(",")] if a.weights else [4, 2] + [1] * (n - 2)
        if len(weights) != n:
            sys.exit("--weights needs one weight per job")
    else:
        weights = [1] * n
    steady = n - 1 if a.scenario == "churn" else n
    tenants, secret_of = {}, {}
    if a.scenario == "weighted":
        for w in sorted(set(weights)):
            tenants[f"w{w}"] = (f"bench-tenant-w{w}", w)
            secret_of[w] = f"bench-tenant-w{w}"
    lossy = steady - 1 if a.scenario == "loss" else None
    if a.fabric:
        bins = fabric_run.preflight("share_many_jobs", argparse.Namespace(
            build=a.build, confluxd=None, plugin=None, driver=None, conflux=None))
        if bins is None:
            return 77
        work = tempfile.mkdtemp(prefix=f"cfx{os.getpid()}-share-many-")
        # The churning jobs take turns on the last pair of workers.
        place = OnFabric(a, tenants, work, n, lossy, bins)
    else:
        work = tempfile.mkdtemp(prefix="conflux-share-many-")
        place = Loopback(a, tenants, work)
    cap = place.capacity
    print(f"# {a.scenario}: {n} jobs, " + (
        f"fabric: workers at {a.fabric} Mbit/s, aggregator link {a.agg_rate} Mbit/s, "
        if a.fabric else "loopback, ") + f"confluxd --max-mbps {a.cap}; logs in {work}",
        flush=True)
    total_w = sum(weights[:steady])
    jobs = []
    for i in range(steady):
        share = cap * weights[i] / total_w  # Mbit/s while the steady jobs run
        # Enough 1 MiB iterations to run --duration + starts + settle at about the share (the
        # work-conserving daemon may give more); the window ends at the first exit anyway.
        # (result_mbps counts the results sent to both ranks: 2 x 8.389 Mbit per iteration.)
        iters = int((a.duration + a.settle + 0.5 * steady + 5) * share / 16.78) + 20
        extra = dict(kv.split("=", 1) for kv in a.env)
        if i == lossy and not a.fabric:  # on the fabric, nftables drops at its hosts
            extra["CONFLUX_FAULT_DROP"] = str(a.loss)
        jobs.append(Job(f"j{i}", weights[i], secret_of.get(weights[i]), iters, i, extra))
    samples, known = [], set()
    churn = None
    try:
        if a.fabric:
            place.build()
        joins = []
        for job in jobs:
            t0 = time.time()
            job.start(place)
            job.id = wait_new_job(place, known, timeout=60)
            if job.id is None:
                print(f"job {job.name} never joined: see {job.ranks[0][1]}")
                return 1
            known.add(job.id)
            joins.append(time.time() - t0)
        print("# each job in the daemon's /metrics after " +
              ", ".join(f"{t:.1f}" for t in joins) + " s", flush=True)
        t_start = time.time()
        churn, churn_ids, churn_runs, churn_ended, churn_failed = None, set(), 0, 0.0, 0
        while all(j.running() for j in jobs):
            now = time.time() - t_start
            if a.scenario == "churn" and churn is not None and not churn.running():
                churn_failed += not churn.verified()
                churn, churn_ended = None, now
            # A new churning job CHURN_GAP s after the last one left: its share is idle meanwhile.
            if a.scenario == "churn" and churn is None and now - churn_ended >= CHURN_GAP:
                churn = Job(f"churn{churn_runs}", 1, None, 25, n - 1,
                            dict(kv.split("=", 1) for kv in a.env))
                churn_runs += 1
                churn.start(place)
            m = place.metrics()
            churn_ids |= {j for j in m if j not in known}
            samples.append((time.time() - t_start, m))
            time.sleep(0.5)
        t_end = time.time() - t_start
        for j in jobs:
            j.wait(timeout=600)
        if churn is not None:
            churn.wait(timeout=120)
            churn_failed += not churn.verified()
    finally:
        clean = place.stop()
    if not clean:
        print("FAILED: the fabric's namespaces were not all deleted")
        return 1

    weight_of = {j.id: j.weight for j in jobs}
    window = [(t, m) for t, m in samples if t >= a.settle and t <= t_end - 1]
    rows, ok = [], True
    for j in jobs:
        got, share, grant = [], [], []
        def last(name):
            return max((m.get(j.id, {}).get(name, 0) for _, m in samples), default=0)
        resends, sent = last("unicast_resends_total"), last("results_sent_total")
        for _, m in window:
            active = [k for k, v in m.items() if v.get("grant_mbps", 0) > 0]
            wsum = sum(weight_of.get(k, 1) for k in active)
            if j.id in m and wsum:
                got.append(m[j.id].get("result_mbps", 0))
                share.append(cap * j.weight / wsum)
                grant.append(m[j.id].get("grant_mbps", 0))
        mean = lambda v: sum(v) / len(v) if v else 0
        ratio = mean(got) / mean(share) if share else 0
        lossy = a.scenario == "loss" and j is jobs[-1]
        rows.append({"job": j.name, "id": j.id, "weight": j.weight, "lossy": lossy,
                     "achieved_mbps": round(mean(got), 1), "share_mbps": round(mean(share), 1),
                     "grant_mbps": round(mean(grant), 1), "ratio": round(ratio, 3),
                     "resends": int(resends),
                     "resent_pct": round(100 * resends / sent, 2) if sent else 0,
                     "verified": j.verified()})
        ok &= j.verified()
    print(f"# {a.scenario}: {n} jobs, capacity {cap} Mbit/s, steady window {len(window) / 2:.1f} s "
          f"({len(window)} samples){'; churning job runs: %d' % churn_runs if churn_runs else ''}")
    print(f"{'job':>6} {'weight':>6} {'achieved':>9} {'share':>7} {'ratio':>6} {'grant':>7} "
          f"{'resends':>7} {'resent':>6}  verified")
    for r in rows:
        note = " (lossy)" if r["lossy"] else ""
        print(f"{r['job']:>6} {r['weight']:>6} {r['achieved_mbps']:>9.1f} {r['share_mbps']:>7.1f} "
              f"{r['ratio']:>6.2f} {r['grant_mbps']:>7.1f} {r['resends']:>7} "
              f"{r['resent_pct']:>5.1f}%  "
              f"{'yes' if r['verified'] else 'NO'}{note}")
    # Churn: after each churning job leaves, how long until the steady jobs together use 95 %
    # (and 90 %) of the cap again (its share lent to them), from the first sample without its
    # grant; inf: not before the next one joined.
    steady_ids = {j.id for j in jobs}

    def recovery_times(level):
        out, present_before, left_at = [], False, None
        for t, m in samples:
            present = any(k in churn_ids and v.get("grant_mbps", 0) > 0 for k, v in m.items())
            if present_before and not present:
                left_at = t
            if present and left_at is not None:
                out.append(float("inf"))
                left_at = None
            elif left_at is not None:
                used = sum(v.get("result_mbps", 0) for k, v in m.items() if k in steady_ids)
                if used >= level * cap:
                    out.append(t - left_at)
                    left_at = None
            present_before = present
        return out
    recoveries, recoveries90 = recovery_times(0.95), recovery_times(0.90)
    if a.scenario == "churn":
        ok &= churn_failed == 0

        def times(rs):
            return ", ".join(f"{r:.1f}" for r in rs) + " s" if rs else "(no sample)"
        print(f"# churning jobs: {churn_runs} started, {churn_failed} not verified; after one "
              f"left, the others used >= 95 % of the cap within {times(recoveries)}; "
              f">= 90 % within {times(recoveries90)}")
    # The samples are 0.5 s apart plus a metrics request; a longer gap means this script was not
    # scheduled for that long: the host stalled (other load), which stalls the ranks too.
    gaps = [t1 - t0 for (t0, _), (t1, _) in zip(samples, samples[1:]) if t1 - t0 > 1.0]
    if gaps:
        print(f"# host stalls: {len(gaps)} gaps of > 1 s between samples, {sum(gaps):.1f} s in "
              f"all (the longest {max(gaps):.1f} s): the figures include them")
    fair = [r for r in rows if not r["lossy"]]
    worst = min(r["ratio"] for r in fair)
    total = sum(r["achieved_mbps"] for r in rows)
    print(f"# worst ratio {worst:.2f} (goal >= 0.90 for every job that can use its share); "
          f"all jobs together {total:.0f} Mbit/s = {total / cap:.2f} of the cap")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"scenario": a.scenario, "cap": cap, "fabric_mbit": a.fabric,
                       "agg_link_mbit": a.agg_rate if a.fabric else None, "jobs": rows,
                       "churn_recovery_s": [r if r != float("inf") else None for r in recoveries],
                       "churn_recovery_90_s": [r if r != float("inf") else None
                                               for r in recoveries90],
                       "samples": [[round(t, 2), {k: [v.get("grant_mbps", 0), v.get("result_mbps", 0)]
                                                  for k, v in m.items()}] for t, m in samples],
                       "worst_ratio": worst, "total_mbps": total,
                       "join_s": [round(t, 2) for t in joins],
                       "sample_gaps_over_1_s": [round(g, 2) for g in gaps]}, f, indent=1)
    if not ok:
        print("FAILED: a job's results were not all verified; logs in " + work)
        return 1
    if a.strict and worst < 0.9:
        print("FAILED: a job below 0.9 of its share")
        return 1
    return 0


if __name__ == "__main__":
    # SIGTERM ends the run the way Ctrl-C does: every process stopped, the namespaces deleted.
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))
    try:
        sys.exit(main())
    except (fabric_ns.FabricError, fabric_run.RunError) as e:
        print(f"# error: {e}", file=sys.stderr)
        sys.exit(1)
