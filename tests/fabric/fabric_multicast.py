# SPDX-License-Identifier: Apache-2.0
"""ctest fabric_multicast: multicast result delivery (protocol/SPEC.md section 8) on the emulated
fabric of bench/fabric, one namespace per host and a Linux bridge as the switch.
  1. 3 workers, one aggregator with a multicast range: the job's results go to its group (the
     daemon counts one multicast decision), the aggregator sends each result once (its bytes
     out are about a third of its bytes in), every result verified.
  2. The same with worker 2's host dropping every IPv4 multicast datagram at input (an
     nftables rule, as behind a switch that does not forward the group): that rank cannot hear
     the probe, so every rank uses unicast for the aggregator (one unicast decision), each rank
     logs the choice once with the reason, and every result is still verified.
  3. 2 workers striped over 2 aggregators at the workers' rate, each with a multicast range:
     the bridge floods each aggregator's group to the other, whose link then carries those
     results on top of its contributions. Each daemon must notice (multicast reaching it
     unasked) and move the job to unicast (conflux_multicast_flood_unicast_total 1), every
     result verified.
Usage: fabric_multicast.py HARNESS [harness binary flags...]. Exit 0 pass, 1 fail, 77 skipped."""
import os
import re
import subprocess
import sys
import tempfile

from fabric_smoke import SKIP, begin, fail, skip

DAEMON_RE = re.compile(r"^# confluxd a0: bytes in (\d+) out (\d+), .* jobs by multicast (\d+), "
                       r"by unicast (\d+)$", re.M)


FAT = ["--workers", "3", "--topologies", "fat", "--minbytes", "4", "--maxbytes", "1M",
       "--iters", "3"]


def run(harness, bin_flags, prefix, extra, shape=FAT):
    out_dir = tempfile.mkdtemp(prefix="fabric-multicast-")
    argv = [sys.executable, harness, *bin_flags, "--prefix", prefix, *shape,
            "--rate", "400", "--systems", "conflux", "--warmup", "1", "--check-seconds", "1",
            "--agg-arg=--multicast-range=239.77.0.0/16", "--env", "NCCL_DEBUG=INFO",
            "--out", out_dir, *extra]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    if r.returncode == SKIP:
        print(out)
        sys.exit(skip("the harness skipped"))
    if r.returncode != 0 or not out.rstrip().endswith("verified: all results correct"):
        fail(f"harness exit code {r.returncode}, not verified", out)
    logs = re.search(r"logs in (\S+)", out).group(1)
    if shape is not FAT:
        return out, [], logs
    m = DAEMON_RE.search(out)
    if not m:
        fail("no confluxd byte/decision line", out)
    return out, [int(x) for x in m.groups()], logs


def rank_logs(logs):
    d = os.path.join(logs, "lossless")
    return {f: open(os.path.join(d, f)).read() for f in sorted(os.listdir(d))
            if re.match(r"\d+-driver-collnet-r\d+\.log$", f)}


def main():
    harness, bin_flags, prefix = begin()

    out, (b_in, b_out, mc, uc), logs = run(harness, bin_flags, prefix, [])
    if (mc, uc) != (1, 0):
        fail(f"hearing ranks: want 1 multicast and 0 unicast decisions, got {mc} and {uc}", out)
    if not 0 < b_out < 0.45 * b_in:  # one copy per result for 3 workers: ~1/3 of what came in
        fail(f"aggregator sent {b_out} B for {b_in} B in: not once per result", out)
    for name, text in rank_logs(logs).items():
        if text.count("results by multicast") != 1:
            fail(f"{name}: want one 'results by multicast' line", text)
    print(f"fabric_multicast: by multicast, {b_out} B out for {b_in} B in")

    out, (b_in, b_out, mc, uc), logs = run(harness, bin_flags, prefix, ["--deaf-workers", "2"])
    if (mc, uc) != (0, 1):
        fail(f"deaf rank: want 0 multicast and 1 unicast decisions, got {mc} and {uc}", out)
    if b_out < 0.9 * b_in:  # fan-out: every worker gets its own copy
        fail(f"aggregator sent {b_out} B for {b_in} B in: not once per worker", out)
    ranks = rank_logs(logs)
    if len(ranks) != 3:
        fail(f"want 3 rank logs, got {sorted(ranks)}", out)
    for name, text in ranks.items():
        lines = [l for l in text.splitlines() if "results by unicast" in l]
        if len(lines) != 1 or "rank 2 did not receive the probe" not in lines[0]:
            fail(f"{name}: want one 'results by unicast' line naming rank 2", text)
    print(f"fabric_multicast: deaf rank 2 -> every rank by unicast, {b_out} B out for {b_in} B "
          "in")

    # About 6 s of 64 MiB AllReduces: the daemons sample once a second and need two periods
    # in a row over 5 % of the line rate.
    striped = ["--workers", "2", "--topologies", "striped", "--minbytes", "64M", "--maxbytes",
               "64M", "--iters", "4"]
    out, _, logs = run(harness, bin_flags, prefix, [], shape=striped)
    d = os.path.join(logs, "lossless")
    for agg in ("a1", "a2"):
        metrics = [f for f in os.listdir(d) if re.match(rf"\d+-metrics-{agg}\.log$", f)]
        if len(metrics) != 1:
            fail(f"want one metrics log of {agg}, got {metrics}", out)
        text = open(os.path.join(d, metrics[0])).read()
        moved = re.search(r"^conflux_multicast_flood_unicast_total (\d+)$", text, re.M)
        if not moved or int(moved.group(1)) != 1:
            fail(f"{agg}: want conflux_multicast_flood_unicast_total 1", text)
        log = open(os.path.join(d, next(f for f in os.listdir(d)
                                        if re.match(rf"\d+-confluxd-{agg}\.log$", f)))).read()
        if "the network floods multicast to every port" not in log:
            fail(f"{agg}: no warning that the network floods multicast", log)
    print("fabric_multicast: striped over 2 flooded aggregators -> both moved the job to "
          "unicast; PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
