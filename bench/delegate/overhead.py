#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Forwarding overhead of CONFLUX_NET_DELEGATE on the point-to-point path.

Runs the driver's p2p ring (--modes ring: NCCL-shaped isend/irecv/test, every byte checked)
over a delegate net twice, alternated ROUNDS times on loopback: the delegate loaded alone as
the plugin, and the same delegate behind libnccl-net-conflux.so (CONFLUX_NET_DELEGATE). Prints
per message size the median time of each and their ratio (via Conflux / alone).

  bench/delegate/overhead.py --build build [--ranks 2] [--rounds 5] [--maxbytes 64M]

The delegate is the test delegate (tests/plugin_net/delegate: Conflux's TCP net under another
name), so the ratio is the cost of the forwarding layer alone. Run it on a quiet machine.
"""
import argparse
import os
import statistics
import subprocess
import sys


def run(driver, plugin, ranks, maxbytes, env_extra):
    env = dict(os.environ, CONFLUX_SOCKET_IFNAME="lo", **env_extra)
    cmd = [driver, "--nranks", str(ranks), "--plugin", plugin, "--modes", "ring", "-b", "4",
           "-e", maxbytes, "-f", "16", "-n", "20", "-w", "3", "--timeout", "200"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0 or "verified: all results correct" not in out.stdout:
        sys.exit(f"driver failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    times = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].isdigit():
            times[int(f[0])] = float(f[4])  # time(us)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--maxbytes", default="64M")
    a = ap.parse_args()
    driver = os.path.join(a.build, "tools/driver/conflux-nccl-driver")
    conflux = os.path.join(a.build, "nccl_plugin/libnccl-net-conflux.so")
    delegate = os.path.abspath(os.path.join(a.build,
                                            "tests/plugin_net/libconflux_test_delegate_v11.so"))
    alone, via = {}, {}
    for _ in range(a.rounds):
        for size, t in run(driver, delegate, a.ranks, a.maxbytes, {}).items():
            alone.setdefault(size, []).append(t)
        for size, t in run(driver, conflux, a.ranks, a.maxbytes,
                           {"CONFLUX_NET_DELEGATE": delegate}).items():
            via.setdefault(size, []).append(t)
    print(f"# p2p ring, {a.ranks} ranks on loopback, median of {a.rounds} alternated runs (us)")
    print(f"{'bytes':>10} {'delegate alone':>15} {'via Conflux':>12} {'ratio':>7}")
    for size in sorted(alone):
        x, y = statistics.median(alone[size]), statistics.median(via[size])
        print(f"{size:>10} {x:>15.1f} {y:>12.1f} {y / x:>7.3f}")


if __name__ == "__main__":
    main()
