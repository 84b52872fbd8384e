# SPDX-License-Identifier: Apache-2.0
"""ctest fabric_smoke: proves that bench/fabric/conflux_fabric.py builds the emulated cluster,
runs and verifies every system (Conflux, the plugin ring, Gloo and Open MPI where built) and a
depth-3 reduction tree, and tears everything down (also when it is stopped by
SIGTERM in the middle of a run).
Usage: fabric_smoke.py HARNESS [harness binary flags...]. Exit 0 pass, 1 fail, 77 skipped."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


def fail(msg, out=""):
    print(out[-6000:])
    print(f"FAIL: {msg}")
    sys.exit(1)


def namespaces(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [l.split()[0] for l in out.splitlines() if l.startswith(prefix + "-")]


def skip(why):
    """Exit code 77 (ctest: skipped), or a failure under CONFLUX_CI=1 (.ci/run sets it)."""
    if os.environ.get("CONFLUX_CI", "0") not in ("", "0"):
        print(f"fabric_smoke: FAILED: would skip, which CONFLUX_CI=1 forbids: {why}")
        return 1
    print(f"fabric_smoke: SKIPPED: {why}")
    return SKIP


def begin():
    """A fabric test's (harness, harness binary flags, namespace prefix) from the command line;
    exits through skip() where it cannot run."""
    why = None
    if os.geteuid() != 0:
        why = "not root (network namespaces, tc and nft need root)"
    elif subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        why = "`ip netns` unavailable"
    if why:
        sys.exit(skip(why))
    return sys.argv[1], sys.argv[2:], f"cfx{os.getpid()}"


def main():
    harness, bin_flags, prefix = begin()
    out_dir = tempfile.mkdtemp(prefix="fabric-smoke-")
    # 2 workers at 400 Mbit/s, small sizes, few iterations: the shape of every run here.
    common = [sys.executable, harness, *bin_flags, "--prefix", prefix, "--workers", "2",
              "--rate", "400", "--minbytes", "4", "--iters", "3", "--warmup", "1",
              "--check-seconds", "1"]
    argv = common + ["--topologies", "fat", "--maxbytes", "16K", "--percentiles",
                     "--out", out_dir]  # the out dir last: the SIGTERM run below replaces it
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=70)
    out = r.stdout + r.stderr
    if r.returncode == SKIP:
        print(out)
        return skip("the harness skipped")
    if r.returncode != 0:
        fail(f"harness exit code {r.returncode}", out)
    for needle in ("# tcp check w0->w1: 1 stream", "# system: conflux 1 agg @2x [lossless]",
                   "# system: plugin ring (p2p net) [lossless]"):
        if needle not in out:
            fail(f"missing {needle!r}", out)
    if "gloo: skipped" not in out and "# system: gloo ring (tcp) [lossless]" not in out:
        fail("gloo neither ran nor was reported skipped", out)
    if "mpi: skipped" not in out and "# system: open mpi ring (tcp) [lossless]" not in out:
        fail("open mpi neither ran nor was reported skipped", out)
    systems = len([l for l in out.splitlines() if l.startswith("# ") and " rows verified (" in l])
    if systems < 2 or not out.rstrip().endswith("verified: all results correct"):
        fail(f"only {systems} verified system runs", out)
    # --percentiles: every size of a Conflux system has its timed iterations' tail, ordered.
    tails = re.findall(r"# conflux 1 agg @2x: (\d+) B per iteration \(rank 0, (\d+) timed\): "
                       r"p50 ([\d.]+) p90 ([\d.]+) p99 ([\d.]+) max ([\d.]+) us", out)
    if sorted(int(t[0]) for t in tails) != [4 ** k for k in range(1, 8)]:
        fail(f"per-iteration percentiles for sizes {[t[0] for t in tails]}", out)
    for t in tails:
        p = [float(x) for x in t[2:]]
        if int(t[1]) != 3 or not 0 < p[0] <= p[1] <= p[2] <= p[3]:
            fail(f"per-iteration percentiles {t}", out)
    rows = [l for l in out.splitlines() if l.split()[:1] == ["16384"]]
    if len(rows) < systems or any(not l.rstrip().endswith(" 0") for l in rows):
        fail("16 KiB rows missing or #wrong != 0", out)
    for f in ("fabric.csv", "fabric.json"):
        if not os.path.getsize(os.path.join(out_dir, f)):
            fail(f"{f} not written", out)
    # Every system's program reports the host's CPU over its timed iterations under each row:
    # here "n/a" (null), since these rows take less than /proc/stat's 10 ms units can measure.
    with open(os.path.join(out_dir, "fabric.json")) as f:
        no_cpu = [(r["system"], r["bytes"]) for r in json.load(f)["rows"]
                  if "host_cpu_s_per_gb" not in r]
    if no_cpu:
        fail(f"rows without a host cpu line: {no_cpu}", out)
    # The figure of a long enough window is read into the row it follows.
    sys.path.insert(0, os.path.dirname(harness))
    import fabric_run  # noqa: E402 (the harness's own module, beside it)
    got = fabric_run.parse_rows(
        "    1048576  262144  float  sum  1000.00  1.049  1.573  0\n"
        "# host cpu: 12.34 CPU-s per GB AllReduced (timed iterations, whole host)\n"
        "         4       1  float  sum    10.00  0.000  0.000  0\n"
        "# host cpu: n/a (the timed iterations took 3 ms; /proc/stat counts 10 ms units)\n", 2)
    if [r.get("host_cpu_s_per_gb", "missing") for r in got] != [12.34, None]:
        fail(f"fabric_run.parse_rows misread the host cpu lines: {got}", out)
    left = namespaces(prefix)
    if left:
        fail(f"namespaces left behind: {left}", out)
    print(f"fabric_smoke: full run ok ({systems} systems verified, {time.monotonic() - t0:.0f} s)")

    # A reduction tree of depth 3: each worker under its own leaf, both leaves under one middle
    # aggregator under the root; the ranks name their chains ("leaf>mid").
    tree = common + ["--topologies", "tree", "--tree-leaves", "2", "--tree-mids", "1",
                     "--systems", "conflux", "--maxbytes", "64K",
                     "--out", os.path.join(out_dir, "tree")]
    r = subprocess.run(tree, capture_output=True, text=True, timeout=70)
    out = r.stdout + r.stderr
    if r.returncode != 0 or not out.rstrip().endswith("verified: all results correct"):
        fail(f"depth-3 tree: harness exit code {r.returncode}", out)
    for role in ("t0", "m1", "t1", "t2"):  # every level carried traffic
        m = re.search(rf"^# confluxd {role}: packets in (\d+)", out, re.M)
        if not m or int(m.group(1)) == 0:
            fail(f"depth-3 tree: confluxd {role} received nothing", out)
    print("fabric_smoke: depth-3 tree verified")

    # Stopped in the middle: SIGTERM once the fabric exists; nothing may remain.
    p = subprocess.Popen(argv[:-1] + [os.path.join(out_dir, "killed")], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seen = ""
    for line in p.stdout:
        seen += line
        if line.startswith("# tcp check"):
            p.send_signal(signal.SIGTERM)
            break
    rest, _ = p.communicate(timeout=30)
    if p.returncode != 128 + signal.SIGTERM:
        fail(f"harness exit code {p.returncode} after SIGTERM (want 143)", seen + rest)
    left = namespaces(prefix)
    if left:
        fail(f"namespaces left behind after SIGTERM: {left}", seen + rest)
    print(f"fabric_smoke: SIGTERM run torn down (exit {p.returncode}); PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
