#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fabric-goals: the capacity goals of one aggregator on the emulated fabric, as medians of
repeated runs.

Runs conflux_fabric.py in the setting the goals name (N workers, one aggregator at N x the
workers' rate, multicast results, 64 MiB float sums, Conflux and Gloo's ring in the same run)
--repeat times at each --rates, rates interleaved so that a drift of the host spreads over all
of them, and prints per rate the median and the spread of:
  - Conflux / Gloo algbw (the same run),
  - whole-host CPU-seconds per GB AllReduced, Conflux / Gloo (the timed iterations),
  - Conflux's algbw / the link,
  - confluxd's CPU-seconds per GB of contributions in (its whole life), and the KiB of
    contributions it read per wake-up.
Then each goal, met or not by the median. A VM's free-page reporting makes single runs
bimodal, and transparent huge pages move Conflux's figures against Gloo's (README.md, 'On a
VM'): the medians are the figures to quote, and the first line says how the host was set.

  bench/fabric/fabric_goals.py --build build [--rates 1000,2500,5000] [--repeat 3]
                               [--iters 30] [--fabric-arg=ARG ...] [--json out.json]

Needs root (network namespaces), like conflux_fabric.py."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fabric_ns  # noqa: E402  (the host's memory settings that move these figures)

# (rate in Mbit/s, figure, "min" or "max", bound, what the goal says)
GOALS = [
    (1000, "algbw_over_link", "min", 0.95, "Conflux keeps 0.95 of the link at 1000 Mbit/s"),
    (2500, "daemon_cpu_s_per_gb", "max", 0.2,
     "confluxd <= 0.2 CPU-s per GB in at 2500 Mbit/s (>= 40 Gbit/s per core)"),
    (2500, "host_cpu_ratio", "max", 0.6, "host CPU per GB <= 0.6x Gloo's at 2500 Mbit/s"),
    (5000, "algbw_ratio", "min", 1.42, "Conflux >= 1.42x Gloo's algbw at 5000 Mbit/s"),
    (5000, "host_cpu_ratio", "max", 0.6, "host CPU per GB <= 0.6x Gloo's at 5000 Mbit/s"),
]

FIGURES = [  # (key, label, format)
    ("algbw_ratio", "Conflux / Gloo algbw", "{:.2f}"),
    ("host_cpu_ratio", "host CPU per GB, Conflux / Gloo", "{:.3f}"),
    ("algbw_over_link", "Conflux algbw / link", "{:.3f}"),
    ("daemon_cpu_s_per_gb", "confluxd CPU-s per GB in", "{:.3f}"),
    ("kib_per_wakeup", "confluxd KiB in per wake-up", "{:.0f}"),
]


def run_figures(report):
    """One conflux_fabric.py report (its fabric.json, parsed) -> {figure: value or None}."""
    rows = [r for r in report["rows"] if r.get("fabric", "lossless") == "lossless"]
    fat = report["meta"]["labels"]["fat"]
    conflux = [r for r in rows if r["system"] == fat]
    gloo = [r for r in rows if r["system"].startswith("gloo")]
    c = max(conflux, key=lambda r: r["bytes"]) if conflux else None
    g = next((r for r in gloo if c and r["bytes"] == c["bytes"]), None)
    out = {"algbw_ratio": None, "host_cpu_ratio": None,
           "algbw_over_link": report["figures"].get("algbw_over_link_fat"),
           "daemon_cpu_s_per_gb": None, "kib_per_wakeup": None}
    if c and g and g["algbw"] > 0:
        out["algbw_ratio"] = c["algbw"] / g["algbw"]
    if c and g and c.get("host_cpu_s_per_gb") and g.get("host_cpu_s_per_gb"):
        out["host_cpu_ratio"] = c["host_cpu_s_per_gb"] / g["host_cpu_s_per_gb"]
    agg = next((x for x in report["meta"].get("aggregators", [])
                if x["fabric"] == "lossless" and x["topology"] == "fat" and x["role"] == "a0"),
               None)
    if agg and agg.get("bytes_in", 0) > 0:
        if agg.get("cpu_seconds", -1) > 0:
            out["daemon_cpu_s_per_gb"] = agg["cpu_seconds"] / (agg["bytes_in"] / 1e9)
        if agg.get("sleeps", 0) > 0:
            out["kib_per_wakeup"] = agg["bytes_in"] / agg["sleeps"] / 1024
    return out


def summarize(by_rate):
    """{rate: [run_figures(...), ...]} -> (lines, {rate: {figure: median}}, goal verdicts).
    A verdict is (goal text, median or None, met: True/False/None when not measured)."""
    lines, medians = [], {}
    for rate in sorted(by_rate):
        runs = by_rate[rate]
        lines.append(f"# {rate} Mbit/s, {len(runs)} runs")
        medians[rate] = {}
        for key, label, fmt in FIGURES:
            xs = [r[key] for r in runs if r.get(key) is not None]
            if not xs:
                medians[rate][key] = None
                continue
            m = statistics.median(xs)
            medians[rate][key] = m
            each = ", ".join(fmt.format(x) for x in xs)
            lines.append(f"  {label:<34} median {fmt.format(m)}  ({each})")
    verdicts = []
    for rate, key, kind, bound, text in GOALS:
        m = medians.get(rate, {}).get(key)
        met = None if m is None else (m >= bound if kind == "min" else m <= bound)
        verdicts.append((text, m, met))
        state = "not measured" if met is None else ("met" if met else "NOT met")
        shown = "-" if m is None else f"{m:.3f}"
        lines.append(f"# goal: {text}: median {shown}: {state}")
    return lines, medians, verdicts


def fabric_cmd(a, rate, out):
    return [sys.executable, os.path.join(HERE, "conflux_fabric.py"), "--build", a.build,
            "--workers", str(a.workers), "--rate", str(rate), "--topologies", "fat",
            "--systems", "conflux,gloo", "--minbytes", "64M", "--maxbytes", "64M",
            "--iters", str(a.iters), "--agg-arg=--multicast-range=239.77.0.0/16",
            "--out", out] + a.fabric_arg


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--rates", default="1000,2500,5000")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--fabric-arg", action="append", default=[],
                   help="passed to conflux_fabric.py (e.g. --fabric-arg=--confluxd=PATH)")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    rates = [int(r) for r in a.rates.split(",") if r]
    by_rate = {r: [] for r in rates}
    work = tempfile.mkdtemp(prefix="cfx-goals-")
    host = {"free_page_reporting": fabric_ns.free_page_reporting(),
            "transparent_hugepages": fabric_ns.transparent_hugepages()}
    print(f"# host: free-page reporting {host['free_page_reporting'] or 'off'}, transparent "
          f"huge pages {host['transparent_hugepages'] or 'none'}", flush=True)
    for i in range(a.repeat):
        for rate in rates:
            out = os.path.join(work, f"{rate}-{i}")
            proc = subprocess.run(fabric_cmd(a, rate, out), capture_output=True, text=True)
            path = os.path.join(out, "fabric.json")
            if proc.returncode != 0 or not os.path.exists(path):
                print(f"# run {i + 1} at {rate} Mbit/s failed (rc {proc.returncode}):\n"
                      + proc.stdout[-2000:] + proc.stderr[-2000:])
                return 1
            with open(path) as f:
                figs = run_figures(json.load(f))
            by_rate[rate].append(figs)
            shown = ", ".join(f"{k} {v:.3f}" for k, v in figs.items() if v is not None)
            print(f"# run {i + 1}/{a.repeat} at {rate} Mbit/s: {shown}", flush=True)
    lines, medians, verdicts = summarize(by_rate)
    print("\n".join(lines))
    print(f"# each run's conflux_fabric.py report (fabric.json, .csv, .png): {work}/RATE-RUN")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"argv": sys.argv[1:], "host": host, "runs": by_rate, "medians": medians,
                       "goals": [{"goal": t, "median": m, "met": met} for t, m, met in verdicts]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
