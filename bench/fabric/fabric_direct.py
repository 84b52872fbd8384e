#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs direct-connect plans: the planner's circuits as point-to-point links, its shares as the
plugin's configuration, and the measured algbw next to the planner's prediction.

For each (ports, devices) case, `conflux plan --fabric direct` plans --workers workers of that
many ports with --device-ports-port devices, a budget of that many, restricted to what Conflux
runs: one worker ring, which sends one way (--ring-directions 1 --max-rings 1), and reduction
trees of one device each (--topologies ring,tree; --device-ports >= --workers). The plan's
circuits become veth pairs between namespaces (fabric_direct_ns.py: no switch, each link shaped
at --rate both ways, routes to the neighbours of each topology only), a confluxd runs on every
device, and one conflux-nccl-driver job runs the plan:

  CONFLUX_AGGREGATORS      every tree's device, in plan order (a stripe per tree)
  CONFLUX_STRIPE_WEIGHTS   the trees' shares as integers (per mille of the trees' sum)
  --ring-fraction          the ring's share (hybrid mode); no ring: every byte through the
                           trees (collnet mode); no device: the driver's ring mode

as `conflux plan --device-endpoints` prints it.

Every result is verified. Printed per case: the plan, the measured algbw (the --bytes row,
rank 0) and measured / predicted. --kill-device D --kill-after S SIGKILLs device D's daemon S
seconds after the job's first packet there: the ranks re-stripe over the other trees (the ring
at worst) and the results must stay exact. Root, like conflux_fabric.

    bench/fabric/fabric_direct.py --build build --case 3:1 [--case 4:2 ...] [--rate 100]
                                  [--workers 8] [--device-ports 8] [--bytes 64M] [--iters 3]
                                  [--kill-device 1 --kill-after 2] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_direct_ns  # noqa: E402
import fabric_run  # noqa: E402

TOLERANCE = 0.10  # the prediction goal: measured within +-10 % of the planner's algbw


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fabric_run.add_scenario_args(p, agg_factor=1.0, one_job=True)
    p.set_defaults(workers=8, rate=100, bytes="64M")
    p.add_argument("--case", action="append", default=[], metavar="PORTS:DEVICES",
                   help="a worker port count and a device budget (repeatable; default 3:1)")
    p.add_argument("--device-ports", type=int, default=8)
    p.add_argument("--iters", type=int, default=3, help="timed AllReduces per case")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--check-iters", action="store_true", help="verify every iteration")
    p.add_argument("--kill-device", type=int, help="SIGKILL this device's daemon mid-run")
    p.add_argument("--kill-after", type=float, default=2.0,
                   help="seconds after the job's first packet at that device")
    p.add_argument("--goal", action="store_true",
                   help="exit 1 unless every case is within +-10 %% of its prediction")
    p.add_argument("--json", help="write the cases (plan, prediction, measure) here")
    a = p.parse_args(argv)
    a.case = a.case or ["3:1"]
    return a


def plan(a, bins, ports, devices):
    """The planner's JSON for one case, restricted to what Conflux runs, with the plugin
    environment that runs it (--device-endpoints: device d's confluxd listens on
    fabric_direct_ns's data address of d)."""
    endpoints = ",".join(f"{fabric_direct_ns.DEVICE_DATA}.{1 + d}:7470" for d in range(devices))
    argv = [bins["conflux"], "plan", "--fabric", "direct", "--workers", str(a.workers),
            "--worker-gbit", str(a.rate / 1000), "--ports", str(ports), "--device-ports",
            str(a.device_ports), "--devices", str(devices), "--ring-directions", "1",
            "--max-rings", "1", "--topologies", "ring,tree", "--json"]
    argv += ["--device-endpoints", endpoints] if devices > 0 else []
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise fabric_run.RunError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def configuration(doc):
    """(driver mode, ring fraction, CONFLUX_AGGREGATORS, CONFLUX_STRIPE_WEIGHTS) of a plan, from
    the planner's plugin environment."""
    env = doc.get("plugin_env", {})
    if not env.get("CONFLUX_AGGREGATORS"):
        return "ring", 1.0, "", ""
    ring = env["CONFLUX_RING_FRACTION"]
    return (("hybrid" if ring > 0 else "collnet"), ring, env["CONFLUX_AGGREGATORS"],
            env["CONFLUX_STRIPE_WEIGHTS"])


def kill_device_midrun(a, fab, runner, mode, ring, aggregators, band):
    """The job with device a.kill_device's daemon SIGKILLed under it; rank 0's output."""
    role = f"d{a.kill_device}"
    if role not in fab.aggs:
        raise fabric_run.RunError(f"--kill-device {a.kill_device}: the plan has no {role}")
    args = ["--modes", mode, "--ring-fraction", f"{ring:.4f}", "--require-collnet", "-d",
            "float", "-o", "sum", "-b", band, "-e", band, "-n", str(a.iters), "-w",
            str(a.warmup), "--idle-sleep-us", "50", "--timeout", "600"]
    args += ["--check-iters"] if a.check_iters else []
    ranks = runner.start_ranks("kill", fab.workers, 29700, aggregators, args)
    victim = fab.aggs[role]
    first = fabric_run.wait_first_packet(victim, ranks[0][0], "fabric_direct")
    time.sleep(max(0.0, first + a.kill_after - time.monotonic()))
    if ranks[0][0].poll() is not None:
        raise fabric_run.RunError("the job ended before the kill; run more iterations")
    runner.kill_aggregator(role)
    print(f"# {role}'s confluxd killed (SIGKILL)", flush=True)
    verified, text = fabric_run.finish_ranks(ranks)
    if not verified:
        tails = "\n".join(open(log).read()[-1500:] for _, log in ranks)
        raise fabric_run.RunError(f"the job was not verified after the kill:\n{tails}")
    if "re-striped over" not in text and "the worker ring takes over" not in text:
        raise fabric_run.RunError(f"rank 0 never moved {role}'s share:\n{text[-3000:]}")
    return text


def run_case(a, bins, ports, devices, workdir):
    doc = plan(a, bins, ports, devices)
    p = doc["plan"]
    prefix = f"cfx{os.getpid()}"
    fab = fabric_direct_ns.DirectFabric(prefix, a.workers, p, a.rate)
    mode, ring, aggregators, weights = configuration(doc)
    env = {"CONFLUX_SOCKET_IFNAME": "=data0", "CONFLUX_MULTICAST": "off",
           "CONFLUX_AGGREGATOR_TIMEOUT_MS": "1500", "NCCL_DEBUG": "INFO"}
    if weights:
        env["CONFLUX_STRIPE_WEIGHTS"] = weights
    # Every rank of every run gets env (the runner keeps its own copy).
    runner = fabric_run.Runner(fab, bins, workdir, driver_env=env, agg_args=a.agg_arg)
    kinds = " + ".join(f"{t['kind']} {t['share']:.3f}" for t in p["topologies"])
    print(f"# case {ports} ports, budget {devices}: {p['devices']} device(s), {kinds}; "
          f"predicted {p['algbw_gbit']:.4f} Gbit/s", flush=True)
    try:
        fab.build()
        if fab.aggs:
            runner.start_aggregators(sorted(fab.aggs), 1)
        if a.kill_device is not None:
            text = kill_device_midrun(a, fab, runner, mode, ring, aggregators, a.bytes)
        else:
            band = {"min": a.bytes, "max": a.bytes, "iters": a.iters, "warmup": a.warmup}
            text = runner.run_driver(mode, band, [aggregators], ring, 600,
                                     extra_args=["--check-iters"] if a.check_iters else [])
        if fab.aggs:
            runner.stop_aggregators()
        rows = fabric_run.parse_rows(text, a.workers)
        if not rows:
            raise fabric_run.RunError(f"no result row:\n{text[-2000:]}")
        gbit = rows[-1]["algbw"] * 8
        for line in text.splitlines():
            if "re-striped" in line or "failover" in line.lower():
                print(f"#   r0: {line.strip()}")
        print(fab.drop_report(), flush=True)
    finally:
        runner.kill_all()
        fab.teardown()
    ratio = gbit / p["algbw_gbit"]
    print(f"{ports:5d} {devices:6d} {p['devices']:7d}  {mode:7s} {ring:6.3f} "
          f"{weights or '-':>11s} {p['algbw_gbit']:9.4f} {gbit:9.4f} {ratio:6.3f}" +
          (f"  (d{a.kill_device} killed: not a prediction)" if a.kill_device is not None else ""),
          flush=True)
    return {"ports": ports, "budget": devices, "devices": p["devices"], "mode": mode,
            "ring_fraction": ring, "stripe_weights": weights,
            "topologies": p["topologies"], "predicted_gbit": p["algbw_gbit"],
            "measured_gbit": gbit, "ratio": ratio, "killed": a.kill_device}


def main(argv):
    a = parse_args(argv)
    bins = fabric_run.preflight("fabric_direct", a)
    if bins is None:
        return 77
    workdir = tempfile.mkdtemp(prefix=f"cfx{os.getpid()}-direct-")
    print(f"# fabric_direct: {a.workers} workers, {a.device_ports}-port devices, every link "
          f"{a.rate} Mbit/s each way, {a.bytes} per AllReduce, {a.iters} timed; logs in "
          f"{workdir}", flush=True)
    print("# ports budget devices mode    ring  weights     predicted  measured  ratio "
          "(Gbit/s)", flush=True)
    cases = []
    for c in a.case:
        ports, devices = (int(x) for x in c.split(":"))
        cases.append(run_case(a, bins, ports, devices, workdir))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"format": "conflux-direct/1", "meta": {
                "workers": a.workers, "rate_mbit": a.rate, "device_ports": a.device_ports,
                "bytes": a.bytes, "iters": a.iters,
                "command": "bench/fabric/fabric_direct.py " + " ".join(argv)},
                "cases": cases}, f, indent=1)
            f.write("\n")
    if a.kill_device is not None:
        print(f"# every result exact with d{a.kill_device} killed mid-run", flush=True)
        return 0
    off = [c for c in cases if abs(c["ratio"] - 1) > TOLERANCE]
    print(f"# {len(cases) - len(off)} of {len(cases)} cases within +-{TOLERANCE:.0%} of the "
          "prediction", flush=True)
    return 1 if a.goal and off else 0


if __name__ == "__main__":
    fabric_run.run_scenario(main)
