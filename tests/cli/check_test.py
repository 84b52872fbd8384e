#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`conflux check` against real daemons: a daemon with a secret and the data MAC passes with the
right secret (JSON: joined, round trip exact, granted payload less the MAC trailer, a round-trip
time, unicast) and exits 0; one with a multicast range passes with results by multicast; with a wrong secret, a daemon that drops every datagram (fault injection: the
control port answers, UDP does not), a closed port and no aggregators at all it exits 1 and says
the plugin would fall back to the ring, and why. It names the net that carries point-to-point
traffic: Conflux's TCP net without CONFLUX_NET_DELEGATE, the delegate's name and ABI version with
one, and for a delegate that cannot be loaded the reason and what NCCL would do (exit 1 without
the fallback).
Per NIC of the delegate it reports the GPUDirect bit NCCL will compute: 0 for a host-only net
(CollNet then gets host memory), 1 for one that claims CUDA, and then whether CollNet can take
device memory: with the CUDA test double it can (exit 0), without a CUDA driver it cannot and
NCCL would drop CollNet (exit 1).
Usage: check_test.py CONFLUX CONFLUXD DELEGATE_SO CUDA_DOUBLE_DIR"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
from procs import Daemon, check, closed_port  # noqa: E402


def conflux_check(cli, *args, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONFLUX_")}
    env.pop("LD_LIBRARY_PATH", None)  # no CUDA driver unless a case gives the test double
    env.update(extra_env or {})
    r = subprocess.run([cli, "check", "--json", "--timeout-ms", "1500", *args],
                       capture_output=True, text=True, timeout=60, env=env)
    return r.returncode, json.loads(r.stdout)


def main():
    cli, confluxd, delegate, cuda_double = sys.argv[1:5]
    good = Daemon(confluxd, "--secret", "s3", "--data-mac=true")
    deaf = Daemon(confluxd, "--fault-drop", "1")
    mcast = Daemon(confluxd, "--multicast-range", "239.77.0.0/16")
    try:
        ok = f"127.0.0.1:{good.control_port}"
        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "s3")
        check(rc == 0 and doc["usable"] is True, doc)
        (a,) = doc["aggregators"]
        check(a["joined"] and a["round_trip"] and a["data_mac"], a)
        check(a["payload_bytes"] == 8192 - 32 and a["granted_slots"] > 0, a)
        check(a["rtt_us"] > 0 and "signed" in doc["verdict"], doc)
        check(not a["multicast"] and a["group"] == "", a)  # no multicast range there
        check(doc["p2p_ok"] and "Conflux's TCP net" in doc["p2p_net"], doc)

        # Which net carries point-to-point traffic with CONFLUX_NET_DELEGATE.
        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "s3",
                                "--net-delegate", delegate)
        check(rc == 0 and doc["p2p_ok"], doc)
        check("'TestDelegate11' (ncclNetPlugin_v11 of " in doc["p2p_net"], doc)
        lo = {"CONFLUX_SOCKET_IFNAME": "lo"}  # the test delegate wraps Conflux's TCP net
        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "s3",
                                "--net-delegate", delegate, extra_env=lo)
        check(rc == 0 and [(n["name"], n["gdr"]) for n in doc["nics"]] == [("delegate0", False)],
              doc)
        check(doc["device_ok"] and "pinned host memory (no NIC with gdr 1)" in doc["device_memory"],
              doc)
        gpudirect = dict(lo, TEST_DELEGATE_PTR_SUPPORT="7")  # HOST|CUDA|DMABUF
        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "s3",
                                "--net-delegate", delegate, extra_env=gpudirect)
        check(rc == 1 and doc["nics"] == [{"name": "delegate0", "ptr_support": 7, "gdr": True}],
              doc)
        check(not doc["device_ok"] and not doc["cuda"], doc)
        check("libcuda.so.1" in doc["device_memory"] and "without CollNet" in doc["device_memory"],
              doc)
        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "s3",
                                "--net-delegate", delegate,
                                extra_env=dict(gpudirect, LD_LIBRARY_PATH=cuda_double))
        check(rc == 0 and doc["device_ok"] and doc["cuda"], doc)
        check("accepted, staged through pinned host memory" in doc["device_memory"], doc)
        missing = delegate + ".missing"
        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "s3",
                                "--net-delegate", missing)
        check(rc == 1 and not doc["p2p_ok"] and doc["usable"], doc)
        check("cannot load it" in doc["p2p_net"] and "init would fail" in doc["p2p_net"], doc)
        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "s3",
                                "--net-delegate", missing, "--net-delegate-fallback", "1")
        check(rc == 0 and doc["p2p_ok"] and "would use Conflux's TCP net" in doc["p2p_net"], doc)

        # A daemon with a multicast range: the probe reaches this host (loopback), results by
        # multicast.
        rc, doc = conflux_check(cli, "--aggregators", f"127.0.0.1:{mcast.control_port}")
        (a,) = doc["aggregators"]
        check(rc == 0 and a["round_trip"] and a["multicast"], doc)
        check(a["group"].startswith("239.77.") and "multicast" in doc["verdict"], doc)

        rc, doc = conflux_check(cli, "--aggregators", ok, "--secret", "wrong")
        check(rc == 1 and not doc["usable"] and "auth_failed" in doc["verdict"], doc)
        check("worker ring" in doc["verdict"], doc)

        rc, doc = conflux_check(cli, "--aggregators", f"127.0.0.1:{deaf.control_port}")
        (a,) = doc["aggregators"]
        check(rc == 1 and a["joined"] and not a["round_trip"], doc)
        check("no result within" in a["error"], a)

        rc, doc = conflux_check(cli, "--aggregators", f"{ok},127.0.0.1:{closed_port()}",
                                "--secret", "s3")
        check(rc == 1 and [x["round_trip"] for x in doc["aggregators"]] == [True, False], doc)
        check("cannot connect" in doc["verdict"], doc)

        rc, doc = conflux_check(cli)
        check(rc == 1 and doc["aggregators"] == [] and "no aggregators" in doc["verdict"], doc)
    finally:
        check(good.stop() == 0 and deaf.stop() == 0 and mcast.stop() == 0, "confluxd exit 0")
    print("check: ok")


if __name__ == "__main__":
    main()
