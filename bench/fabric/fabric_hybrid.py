#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The switched planner's hybrid layout against the fabric: one aggregator slower than the
workers' sum and the worker ring at once.

For each --factors F, the fabric of conflux_fabric.py (a bridge) with --workers workers at
--rate and one confluxd at F x --rate; `conflux plan` gives the "1 aggregator + ring (hybrid)"
layout's algbw and ring share, and one CollNet job runs hybrid AllReduces of --bytes with that
ring share fixed (--ring-fraction), and then with the plugin's own split (--ring-fraction auto),
every result verified. Printed per factor: predicted algbw, measured with the planner's share and
with auto, and measured / predicted. Root, like conflux_fabric.

    bench/fabric/fabric_hybrid.py --build build [--workers 4] [--rate 1000]
                                  [--factors 0.25,0.5,1] [--bytes 64M] [--iters 3] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_ns  # noqa: E402
import fabric_run  # noqa: E402

HYBRID = "1 aggregator + ring (hybrid)"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fabric_run.add_scenario_args(p, agg_factor=1.0, one_job=True)
    p.set_defaults(bytes="64M")
    p.add_argument("--factors", default="0.25,0.5,1",
                   help="the aggregator's link rate / a worker's, one run each")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--no-auto", action="store_true", help="skip the --ring-fraction auto runs")
    p.add_argument("--json", help="write the rows here")
    return p.parse_args(argv)


def predicted(a, bins, agg_mbit):
    argv = [bins["conflux"], "plan", "--workers", str(a.workers), "--worker-gbit",
            str(a.rate / 1000), "--agg-gbit", str(agg_mbit / 1000), "--max-aggregators", "1",
            "--json"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise fabric_run.RunError(f"{' '.join(argv)}: {r.stderr.strip()}")
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    return rows[HYBRID], rows["ring"]


def measure(runner, a, eps, fraction):
    band = {"min": a.bytes, "max": a.bytes, "iters": a.iters, "warmup": a.warmup}
    text = runner.run_driver("hybrid", band, eps, fraction, 600)
    rows = fabric_run.parse_rows(text, a.workers)
    if not rows:
        raise fabric_run.RunError(f"no result row:\n{text[-2000:]}")
    return rows[-1]["algbw"] * 8


def main(argv):
    a = parse_args(argv)
    bins = fabric_run.preflight("fabric_hybrid", a)
    if bins is None:
        return 77
    prefix = f"cfx{os.getpid()}"
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-hybrid-")
    print(f"# fabric_hybrid: {a.workers} workers @ {a.rate} Mbit/s, one aggregator at each of "
          f"{a.factors} x that, {a.bytes} per AllReduce, {a.iters} timed; logs in {workdir}",
          flush=True)
    print("# factor  ring share  predicted  measured  ratio   auto  ratio (Gbit/s)", flush=True)
    out = []
    for factor in (float(x) for x in a.factors.split(",")):
        agg_mbit = int(round(a.rate * factor))
        hybrid, ring = predicted(a, bins, agg_mbit)
        fab = fabric_ns.Fabric(prefix, a.workers, a.rate, [("a0", agg_mbit)])
        runner = fabric_run.Runner(fab, bins, workdir, agg_args=a.agg_arg,
                                   driver_env=dict(kv.split("=", 1) for kv in a.env))
        try:
            fab.build()
            eps = runner.start_aggregators(["a0"], 1)
            fixed = measure(runner, a, eps, hybrid["ring_share"])
            auto = None if a.no_auto else measure(runner, a, eps, "auto")
            runner.stop_aggregators()
        finally:
            runner.kill_all()
            fab.teardown()
        row = {"factor": factor, "ring_share": hybrid["ring_share"],
               "predicted_gbit": hybrid["algbw_gbit"], "ring_gbit": ring["algbw_gbit"],
               "measured_gbit": fixed, "ratio": fixed / hybrid["algbw_gbit"],
               "auto_gbit": auto,
               "auto_ratio": None if auto is None else auto / hybrid["algbw_gbit"]}
        out.append(row)
        print(f"{factor:8.2f} {row['ring_share']:11.3f} {row['predicted_gbit']:10.4f} "
              f"{fixed:9.4f} {row['ratio']:6.3f} " +
              ("     -      -" if auto is None else f"{auto:6.4f} {row['auto_ratio']:6.3f}"),
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"format": "conflux-hybrid/1", "meta": {
                "workers": a.workers, "rate_mbit": a.rate, "bytes": a.bytes, "iters": a.iters,
                "command": "bench/fabric/fabric_hybrid.py " + " ".join(argv)}, "rows": out},
                f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    fabric_run.run_scenario(main)
