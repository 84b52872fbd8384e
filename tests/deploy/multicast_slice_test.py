#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Daemons that share one configuration never grant the same multicast group: two confluxd
with the same config file (multicast_range 239.77.0.0/16, one fixed multicast_port, as a
DaemonSet's one ConfigMap gives them) on two addresses (127.0.0.2, 127.0.0.3); `conflux check`
joins each and reports the group it was granted: different slices of the range, each where the
daemon's address puts it (multicast_slice 64: slice address mod 1024). With multicast_slice 0
(the whole range, the old behaviour) both grant the range's first group, and the daemon warns.
Usage: multicast_slice_test.py CONFLUXD CONFLUX"""
import ipaddress
import json
import os
import subprocess
import sys
import tempfile

from procs import Daemon, check


def groups(cli, daemons):
    aggs = ",".join(f"{d.listen}:{d.control_port}" for d in daemons)
    r = subprocess.run([cli, "check", "--aggregators", aggs, "--json", "--timeout-ms", "3000"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, CONFLUX_SECRET=""))
    doc = json.loads(r.stdout)
    return [a.get("group", "") for a in doc["aggregators"]]


def expected(listen, slice_size):
    slices = 65536 // slice_size
    base = int(ipaddress.IPv4Address("239.77.0.0"))
    return str(ipaddress.IPv4Address(base + (int(ipaddress.IPv4Address(listen)) % slices) * slice_size))


def main():
    confluxd, cli = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as d:
        for slice_size in (64, 0):
            cfg = os.path.join(d, f"shared-{slice_size}.toml")
            with open(cfg, "w") as f:
                f.write('multicast_range = "239.77.0.0/16"\nmulticast_port = 17471\n'
                        f"multicast_slice = {slice_size}\n")
            daemons = [Daemon(confluxd, "--config", cfg, listen=a)
                       for a in ("127.0.0.2", "127.0.0.3")]
            try:
                got = groups(cli, daemons)
                print(f"multicast_slice {slice_size}: granted {got}")
                for dmn in daemons:
                    log = dmn.tail()
                    warned = "grants from the whole of 239.77.0.0/16" in log
                    check(warned == (slice_size == 0), f"the whole-range warning:\n{log}")
            finally:
                for dmn in daemons:
                    dmn.stop()
            hosts = [g.rsplit(":", 1)[0] for g in got]
            ports = {g.rsplit(":", 1)[1] for g in got}
            check(ports == {"17471"}, f"the shared multicast_port: {got}")
            if slice_size:
                check(hosts == [expected("127.0.0.2", 64), expected("127.0.0.3", 64)],
                      f"slices by address: {got}")
                check(hosts[0] != hosts[1], f"two daemons granted the same group: {got}")
            else:
                check(hosts == ["239.77.0.0", "239.77.0.0"], f"the whole range: {got}")
    print("PASS")


if __name__ == "__main__":
    main()
