#!/usr/bin/env python3
"""The tuner (ncclTunerPlugin_v5) choosing CollNet or not per AllReduce size from what a live
CollNet communicator measured (nccl_plugin/collnet/path_estimate.h), against a real confluxd:
the driver runs hybrid AllReduces with the auto split through the plugin, then, with the
communicator still open, asks the tuner about every size (--tuner-report).
- Default (CONFLUX_TUNER_MEASURED=1, no byte range): every size gets a decision, and each
  decision is the one its logged estimate gives (CollNet exactly where its estimated time is
  at most the ring's); the estimates grow with the size and are positive.
- CONFLUX_TUNER_MEASURED=0: CollNet for every size, no estimate logged.
- A byte range set (CONFLUX_TUNER_COLLNET_MIN_BYTES=1K): it decides, whatever was measured.
Every result of every run verified.
Usage: tuner_test.py CONFLUXD DRIVER PLUGIN"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
from procs import Daemon, check  # noqa: E402

SIZES = [4, 64, 1024, 16384, 262144, 4194304]
CHOICE_RE = re.compile(r"^# tuner: AllReduce of (\d+) B -> (.+)$", re.M)
ESTIMATE_RE = re.compile(r"tuner: AllReduce of (\d+) B \(and its size class\) to (CollNet|NCCL's "
                         r"other algorithms): estimated (\d+) us through CollNet, (\d+) us over "
                         r"a ring")


def run(driver, plugin, daemon, **env_extra):
    env = dict(os.environ, CONFLUX_AGGREGATORS=f"127.0.0.1:{daemon.control_port}",
               CONFLUX_SOCKET_IFNAME="lo", CONFLUX_AGGREGATOR_TIMEOUT_MS="1500",
               NCCL_DEBUG="INFO", **env_extra)
    r = subprocess.run([driver, "--plugin", plugin, "--nranks", "4", "--modes", "hybrid",
                        "--ring-fraction", "auto", "--require-collnet", "-d", "float", "-o",
                        "sum", "-b", "4", "-e", "4M", "-f", "16", "-n", "10", "-w", "2",
                        "--tuner-report", "--timeout", "150"],
                       env=env, capture_output=True, text=True, timeout=200)
    out = r.stdout + r.stderr
    check(r.returncode == 0 and "verified: all results correct" in out,
          f"driver exit {r.returncode}:\n{out[-3000:]}")
    choices = {int(b): c for b, c in CHOICE_RE.findall(out)}
    check(sorted(choices) == SIZES, f"a decision per size: {choices}\n{out[-3000:]}")
    return choices, out


def main():
    confluxd, driver, plugin = sys.argv[1:4]
    d = Daemon(confluxd)
    try:
        choices, out = run(driver, plugin, d)
        estimates = {int(b): (to, int(c), int(g)) for b, to, c, g in ESTIMATE_RE.findall(out)}
        check(sorted(estimates) == SIZES, f"an estimate per size: {estimates}\n{out[-3000:]}")
        last = (0, 0)
        for b in SIZES:
            to, coll_us, ring_us = estimates[b]
            want = "CollNet" if coll_us <= ring_us else "not CollNet"
            check(choices[b] == want, f"{b} B: {choices[b]}, but estimated {coll_us} us through "
                                      f"CollNet and {ring_us} us over a ring")
            check((to == "CollNet") == (want == "CollNet"), f"{b} B: logged {to}")
            check(coll_us > 0 and ring_us > 0 and coll_us >= last[0] and ring_us >= last[1],
                  f"{b} B: estimates {coll_us} / {ring_us} us after {last}")
            last = (coll_us, ring_us)
        print("measured: " + ", ".join(f"{b} B {choices[b]} ({estimates[b][1]} / "
                                       f"{estimates[b][2]} us)" for b in SIZES))

        off, out = run(driver, plugin, d, CONFLUX_TUNER_MEASURED="0")
        check(all(c == "CollNet" for c in off.values()), f"measured off: {off}")
        check(not ESTIMATE_RE.search(out), "measured off: an estimate was logged")

        ranged, _ = run(driver, plugin, d, CONFLUX_TUNER_COLLNET_MIN_BYTES="1K")
        want = {b: "CollNet" if b >= 1024 else "not CollNet" for b in SIZES}
        check(ranged == want, f"range from 1 KiB: {ranged}")
    finally:
        check(d.stop() == 0, "confluxd exit 0")
    print("tuner: ok")


if __name__ == "__main__":
    main()
