#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A CollNet job comes back to the aggregators it lost, with every result exact throughout
(the driver loads the NCCL plugin as NCCL does and verifies every iteration):
  restart  a 4-rank job on one aggregator; the daemon is killed (SIGKILL), the job goes on
           over the ring; the daemon starts again on the same ports and the job is back on it
           (how long after it answered is printed: the goal is 10 s);
  drain    a 4-rank job striped over two aggregators; one is drained (the job re-stripes over
           the other), then undrained: the job returns to both;
  tree     a 4-rank job on a reduction tree (a root, two leaves of two ranks each); the leaf of
           ranks 2 and 3 is killed, the job goes on over the ring, the leaf starts again on the
           same ports under the same root and the job is back on the tree;
  upgrade  a rolling upgrade under a 4-rank job striped over three aggregators: each in turn
           is drained (`conflux drain --wait`), stopped and started again from a fresh copy of
           the binary on the same ports, and the next waits until the job is back on it; at the
           end the job uses all three.
Each scenario prints the job's timeline (iteration durations) around the events.
Usage: return_test.py CONFLUXD DRIVER PLUGIN CONFLUX [restart|drain|upgrade]..."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
from procs import Daemon, check, closed_port, metric, wait_for  # noqa: E402

NRANKS = 4
SIZE = "1M"
AGG_TIMEOUT_MS = 1000


def job_env(aggs):
    return dict(os.environ, CONFLUX_AGGREGATORS=aggs, CONFLUX_SOCKET_IFNAME="lo",
                CONFLUX_AGGREGATOR_TIMEOUT_MS=str(AGG_TIMEOUT_MS),
                NCCL_DEBUG=os.environ.get("RETURN_TEST_NCCL_DEBUG", "WARN"))


def start_job(driver, plugin, aggs, iters, timeline, env=None):
    return subprocess.Popen(
        [driver, "--plugin", plugin, "--nranks", str(NRANKS), "--modes", "hybrid",
         "--ring-fraction", "auto",
         "--require-collnet", "-d", "float", "-o", "sum", "-b", SIZE, "-e", SIZE, "-n",
         str(iters), "-w", "1", "--check-iters", "--timeline", timeline, "--timeout", "280"],
        env=dict(job_env(aggs), **(env or {})), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def iterations_for(driver, plugin, aggs, seconds, env=None):
    """Iterations that take about `seconds` through the aggregators on this machine (a short
    job first measures them: its timeline's durations), so the events land mid-job on a fast
    or a loaded machine."""
    with tempfile.TemporaryDirectory() as d:
        timeline = os.path.join(d, "t")
        p = start_job(driver, plugin, aggs, 200, timeline, env)
        out, _ = p.communicate(timeout=200)
        check(p.returncode == 0, f"calibration job failed:\n{out}")
        ends = [end for end, _ in read_timeline(timeline)]
    per = (ends[-1] - ends[0]) / max(1, len(ends) - 1) if len(ends) > 1 else 0.01
    return max(400, min(50000, int(seconds / max(per, 1e-5))))


def read_timeline(path):
    """(end, duration) of each timed iteration, in seconds (the driver's --timeline lines:
    mode bytes end_unix_s us)."""
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) == 4 and not line.startswith("#"):
            rows.append((float(f[2]), float(f[3]) * 1e-6))
    return rows


def launch(driver, plugin, aggs, workdir, name, seconds, env=None):
    """The scenario's job, sized to run about `seconds`, and its timeline file. `env`: more of
    the job's environment (a tree's per-rank CONFLUX_DRIVER_AGGREGATORS_<r>)."""
    iters = iterations_for(driver, plugin, aggs, seconds, env)
    timeline = os.path.join(workdir, f"{name}.timeline")
    return start_job(driver, plugin, aggs, iters, timeline, env), timeline


def packets(d):
    try:
        return metric(d.metrics(), "conflux_job_packets_in_total")
    except OSError:
        return 0


def show_timeline(path, events):
    """The iterations' durations in 1 s bins up to 5 s after the last event (unix times), the
    events marked."""
    rows = read_timeline(path)
    if not rows:
        print("timeline: empty")
        return
    start = rows[0][0]
    last = max(t for _, t in events) - start + 5
    longest = max(rows, key=lambda r: r[1])
    print(f"longest AllReduce: {longest[1] * 1e3:.0f} ms, ending {longest[0] - start:.1f} s in "
          f"(an aggregator silent for CONFLUX_AGGREGATOR_TIMEOUT_MS = {AGG_TIMEOUT_MS} ms is "
          f"dead; a request without results for 4x that moves to the ring)")
    print(f"timeline ({len(rows)} iterations; mean duration per 1 s of the job):")
    bins = {}
    for end, dur in rows:
        if end - start <= last:
            bins.setdefault(int(end - start), []).append(dur)
    marks = {}
    for name, t in events:
        marks.setdefault(int(t - start), []).append(name)
    for b in sorted(set(bins) | set(marks)):
        ds = bins.get(b, [])
        mean = f"{sum(ds) / len(ds) * 1e3:8.2f} ms" if ds else "       -   "
        print(f"  t={b:4d} s {len(ds):5d} it  mean {mean}  {'; '.join(marks.get(b, []))}")


def stop(job):
    """After a failed check: kills the job if it still runs and shows what it said."""
    if job.stdout is None or job.stdout.closed:
        return  # finish() read it
    if job.poll() is None:
        job.kill()
    out, _ = job.communicate(timeout=30)
    print(f"the job (exit {job.returncode}):\n{out[-6000:]}")


def wait_back(d, since, what, events, before=0):
    """Waits until the job sends to daemon `d` again (more than `before` packets), notes the
    event and prints how long after `since` (monotonic) that was. The goal (10 s) is a figure
    to report, not an assertion: a loaded machine may take longer; never coming back fails."""
    wait_for(lambda: packets(d) > before, what, timeout=90)
    back = time.monotonic() - since
    events.append((what, time.time()))
    print(f"{what}: {back:.1f} s")
    return back


def finish(job, what):
    out, _ = job.communicate(timeout=280)
    check(job.returncode == 0, f"{what}: the job failed:\n{out}")
    check("verified: all results correct" in out, f"{what}: results not all verified:\n{out}")
    return out


def restart(confluxd, driver, plugin, workdir):
    control, data = closed_port(), closed_port()
    d = Daemon(confluxd, control_port=control, data_port=data)
    aggs = f"127.0.0.1:{control}"
    job, timeline = launch(driver, plugin, aggs, workdir, "restart", 30)
    events = []
    try:
        wait_for(lambda: packets(d) > 0, "the job's packets", timeout=60)
        time.sleep(1)
        d.kill()
        events.append(("aggregator killed", time.time()))
        time.sleep(3)  # the job fails over and runs on the ring
        check(job.poll() is None, "the job ended before the restart: make it longer")
        d = Daemon(confluxd, control_port=control, data_port=data)
        answered = time.monotonic()
        events.append(("aggregator answers again", time.time()))
        wait_back(d, answered, "restart: the job back on the aggregator after it answered",
                  events)
        out = finish(job, "restart")
        check("returned to 1 aggregator(s)" in out, f"no return in the job's log:\n{out}")
    finally:
        stop(job)
        d.stop()
    show_timeline(timeline, events)


def drain(confluxd, driver, plugin, cli, workdir):
    a, b = Daemon(confluxd), Daemon(confluxd)
    aggs = f"127.0.0.1:{a.control_port},127.0.0.1:{b.control_port}"
    job, timeline = launch(driver, plugin, aggs, workdir, "drain", 30)
    events = []
    try:
        wait_for(lambda: packets(b) > 0, "the job's packets on both", timeout=60)
        time.sleep(1)
        r = subprocess.run([cli, "drain", f"127.0.0.1:{b.metrics_port}", "--wait",
                            "--wait-timeout", "60"], capture_output=True, text=True, timeout=90)
        check(r.returncode == 0, f"drain: {r.stdout}{r.stderr}")
        events.append(("b drained, the job left it", time.time()))
        before = packets(b)
        time.sleep(2)
        check(packets(b) == before, "the job still sends to the drained aggregator")
        check(job.poll() is None, "the job ended before the undrain: make it longer")
        r = subprocess.run([cli, "undrain", f"127.0.0.1:{b.metrics_port}"], capture_output=True,
                           text=True, timeout=30)
        check(r.returncode == 0, f"undrain: {r.stdout}{r.stderr}")
        undrained = time.monotonic()
        events.append(("b undrained", time.time()))
        wait_back(b, undrained, "drain: the job back on both aggregators after the undrain",
                  events, before)
        out = finish(job, "drain")
        check("re-striped over 1 surviving aggregator(s)" in out, f"no re-stripe:\n{out}")
        check("returned to 2 aggregator(s)" in out, f"no return in the job's log:\n{out}")
    finally:
        stop(job)
        a.stop()
        b.stop()
    show_timeline(timeline, events)


def tree(confluxd, driver, plugin, workdir):
    root = Daemon(confluxd)
    parent = ("--parent", f"127.0.0.1:{root.control_port}")
    ports = [(closed_port(), closed_port()) for _ in range(2)]
    leaves = [Daemon(confluxd, *parent, control_port=c, data_port=d) for c, d in ports]
    env = {f"CONFLUX_DRIVER_AGGREGATORS_{r}": f"127.0.0.1:{ports[r // 2][0]}"
           for r in range(NRANKS)}
    job, timeline = launch(driver, plugin, env["CONFLUX_DRIVER_AGGREGATORS_0"], workdir, "tree",
                           30, env)
    events = []
    try:
        wait_for(lambda: packets(root) > 0 and packets(leaves[1]) > 0, "the job on the tree",
                 timeout=60)
        time.sleep(1)
        leaves[1].kill()
        killed = time.time()
        events.append(("leaf 1 killed", killed))
        # Down longer than the probers' longest wait: rank 0's own leaf answers all along, and
        # the job must not try to return before the ranks under the dead leaf hear theirs.
        time.sleep(6)
        check(job.poll() is None, "the job ended before the restart: make it longer")
        down = (killed + 2, time.time())
        leaves[1] = Daemon(confluxd, *parent, control_port=ports[1][0], data_port=ports[1][1])
        answered = time.monotonic()
        events.append(("leaf 1 answers again", time.time()))
        wait_back(leaves[1], answered, "tree: the job back on the restarted leaf after it answered",
                  events)
        before = packets(leaves[0])
        time.sleep(1)
        check(packets(leaves[0]) > before, "the job does not use the other leaf after the return")
        out = finish(job, "tree")
        check("returned to 1 aggregator(s)" in out, f"no return in the job's log:\n{out}")
        check("could not join" not in out, f"a return tried before the leaf was back:\n{out}")
        ran = sum(1 for end, _ in read_timeline(timeline) if down[0] <= end <= down[1])
        print(f"tree: {ran} AllReduces over the ring while the leaf was down")
        check(ran > 0, "the job stood still while the leaf was down")
    finally:
        stop(job)
        for d in [*leaves, root]:
            d.stop()
    show_timeline(timeline, events)


def upgrade(confluxd, driver, plugin, cli, workdir):
    ports = [(closed_port(), closed_port()) for _ in range(3)]
    daemons = [Daemon(confluxd, control_port=c, data_port=p) for c, p in ports]
    aggs = ",".join(f"127.0.0.1:{c}" for c, _ in ports)
    job, timeline = launch(driver, plugin, aggs, workdir, "upgrade", 60)
    events = []
    try:
        for i in range(3):
            wait_for(lambda: packets(daemons[i]) > 0, f"the job on aggregator {i}", timeout=60)
        for i in range(3):
            check(job.poll() is None, f"the job ended before aggregator {i}'s upgrade")
            r = subprocess.run([cli, "drain", f"127.0.0.1:{daemons[i].metrics_port}", "--wait",
                                "--wait-timeout", "60"], capture_output=True, text=True,
                               timeout=90)
            check(r.returncode == 0, f"drain {i}: {r.stdout}{r.stderr}")
            check(daemons[i].stop() == 0, f"aggregator {i} did not stop cleanly")
            # The new build: a copy of the binary, started on the same ports.
            fresh = os.path.join(workdir, f"confluxd-new-{i}")
            shutil.copy2(confluxd, fresh)
            daemons[i] = Daemon(fresh, control_port=ports[i][0], data_port=ports[i][1])
            events.append((f"aggregator {i} upgraded", time.time()))
            wait_back(daemons[i], time.monotonic(),
                      f"upgrade: the job back on aggregator {i} after its restart", events)
        before = [packets(d) for d in daemons]
        time.sleep(1)
        check(all(packets(d) > b for d, b in zip(daemons, before)),
              "the job does not use all three aggregators at the end")
        out = finish(job, "upgrade")
        check(out.count("returned to 3 aggregator(s)") >= 3, f"three returns:\n{out}")
    finally:
        stop(job)
        for d in daemons:
            d.stop()
    show_timeline(timeline, events)


def main():
    confluxd, driver, plugin, cli = sys.argv[1:5]
    scenarios = sys.argv[5:] or ["restart", "drain", "tree", "upgrade"]
    with tempfile.TemporaryDirectory(prefix="conflux-return-") as workdir:
        for s in scenarios:
            if s == "restart":
                restart(confluxd, driver, plugin, workdir)
            elif s == "drain":
                drain(confluxd, driver, plugin, cli, workdir)
            elif s == "tree":
                tree(confluxd, driver, plugin, workdir)
            elif s == "upgrade":
                upgrade(confluxd, driver, plugin, cli, workdir)
            else:
                check(False, f"unknown scenario {s}")
    print("return: ok")


if __name__ == "__main__":
    main()
