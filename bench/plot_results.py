#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The results page's plots and tables, from the reports kept in bench/results/ (small JSON
written by the benchmark harnesses), so that a plot or a table of RESULTS.md can never disagree
with the run it shows.

  bench/plot_results.py                 writes bench/results/<report>.png and .svg for every report
  bench/plot_results.py --tables        prints each report's Markdown table
  bench/plot_results.py --check FILE    exit 1 unless FILE (RESULTS.md) holds every report's table
                                        exactly as --tables prints it (ctest results_page_tables)
  bench/plot_results.py --driver-json F --out P.png
                                        algbw against size, one line per mode, of one
                                        conflux-nccl-driver --json report (scripts/demo.sh)

Reports: "conflux-fabric/1" (bench/fabric/conflux_fabric.py --out DIR: DIR/fabric.json), one
row per (system, size) with algbw in GB/s; "conflux-timeline/1" (bench/fabric/fabric_return.py
--json FILE), a job's algbw over time with the events that moved it; "conflux-capacity/1"
(bench/capacity/capacity.py --sweep SIZES --json FILE), the aggregator's Gbit/s per core by size;
"conflux-direct/1" (bench/fabric/fabric_direct.py --json) and "conflux-hybrid/1"
(bench/fabric/fabric_hybrid.py --json), the planners' predicted algbw next to the measured one.
Plots need matplotlib (Debian's python3-matplotlib);
the tables and the check do not."""
import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def reports():
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        if doc.get("format") in ("conflux-fabric/1", "conflux-timeline/1", "conflux-capacity/1",
                                 "conflux-direct/1", "conflux-hybrid/1"):
            yield os.path.splitext(os.path.basename(path))[0], doc


def size_text(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def table(name, doc):
    return {"conflux-timeline/1": timeline_table,
            "conflux-capacity/1": capacity_table,
            "conflux-direct/1": prediction_table,
            "conflux-hybrid/1": prediction_table}.get(doc["format"], fabric_table)(name, doc)


def plot(name, doc):
    {"conflux-timeline/1": plot_timeline,
     "conflux-capacity/1": plot_capacity,
     "conflux-direct/1": plot_prediction,
     "conflux-hybrid/1": plot_prediction}.get(doc["format"], plot_fabric)(name, doc)


def prediction_rows(doc):
    """(label, predicted Mbit/s, measured Mbit/s) of a planner-against-fabric report: the
    direct-connect plans (fabric_direct.py) or the switched planner's hybrid (fabric_hybrid.py)."""
    if doc["format"] == "conflux-direct/1":
        return [(f"{c['ports']} ports, {c['devices']} dev.", c["predicted_gbit"] * 1000,
                 c["measured_gbit"] * 1000, " + ".join(t["kind"] for t in c["topologies"]))
                for c in doc["cases"]]
    return [(f"aggregator {r['factor']:g}x", r["predicted_gbit"] * 1000,
             r["measured_gbit"] * 1000, f"ring share {r['ring_share']:.3f}")
            for r in doc["rows"]]


def prediction_table(name, doc):
    lines = [f"<!-- table {name} -->",
             "| case | what runs | predicted (Mbit/s) | measured (Mbit/s) | measured / predicted |",
             "|---|---|---:|---:|---:|"]
    for label, pred, meas, what in prediction_rows(doc):
        lines.append(f"| {label} | {what} | {pred:.1f} | {meas:.1f} | {meas / pred:.3f} |")
    lines.append(f"<!-- end {name} -->")
    return "\n".join(lines)


def plot_prediction(name, doc):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = prediction_rows(doc)
    meta = doc["meta"]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4.0))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r[1] for r in rows], 0.4, label="planner's prediction",
           color="#8172b2")
    ax.bar([x + 0.2 for x in xs], [r[2] for r in rows], 0.4, label="measured", color="#55a868")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r[0] for r in rows], fontsize=7, rotation=20)
    ax.set_ylabel("algbw (Mbit/s)")
    what = ("direct-connect plans" if doc["format"] == "conflux-direct/1"
            else "one aggregator + ring (switched)")
    ax.set_title(f"{what}: N={meta['workers']}, {meta['rate_mbit']} Mbit/s links, "
                 f"{meta['bytes']}")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save(fig, name)


def capacity_table(name, doc):
    """The UDP dataplane by AllReduce size, and the DPDK lcore's figure where measured."""
    lines = [f"<!-- table {name} -->",
             "| dataplane | AllReduce size | Gbit/s per core | cores per 100 Gbit/s | "
             "daemon CPU-s per GB | workers' CPU-s per GB |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in doc.get("udp_by_size", []):
        lines.append(f"| kernel UDP | {size_text(r['bytes'])} | {r['gbit_per_core']:.1f} | "
                     f"{100 / r['gbit_per_core']:.1f} | {r['daemon_cpu_s_per_gb']:.3f} | "
                     f"{r['worker_cpu_s_per_gb']:.3f} |")
    if "dpdk" in doc:
        d = doc["dpdk"]
        lines.append(f"| DPDK | 8 KiB packets | {d['gbit_per_core']:.1f} | "
                     f"{100 / d['gbit_per_core']:.1f} | | |")
    lines.append(f"<!-- end {name} -->")
    return "\n".join(lines)


def plot_capacity(name, doc):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = sorted(doc.get("udp_by_size", []), key=lambda r: r["bytes"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    sizes = [r["bytes"] for r in rows]
    left.plot(sizes, [r["gbit_per_core"] for r in rows], marker="o", label="kernel UDP")
    if "dpdk" in doc:
        left.axhline(doc["dpdk"]["gbit_per_core"], color="#c44e52", ls="--",
                     label="DPDK (8 KiB packets, saturated lcore)")
    left.set_ylabel("Gbit/s of contributions per daemon core")
    right.plot(sizes, [r["daemon_cpu_s_per_gb"] for r in rows], marker="o",
               label="daemon, per GB in")
    right.plot(sizes, [r["worker_cpu_s_per_gb"] for r in rows], marker="o",
               label="workers, per GB AllReduced")
    right.set_ylabel("CPU-s per GB")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("AllReduce size (bytes)")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Aggregator capacity: {doc['workers']} workers on loopback, "
                 f"{doc['cpus']} CPUs ({doc['host']})")
    fig.tight_layout()
    save(fig, name)


def timeline_table(name, doc):
    """The steady algbw of each phase (of the link, of the reference) and how long each
    recovery took."""
    meta, s = doc["meta"], doc["summary"]
    link = meta["mbit"] * 1e6 / 8 / 1e9
    ref = s["reference"]
    lines = [f"<!-- table {name} -->",
             "| phase | algbw (GB/s) | of the link | of before |",
             "|---|---:|---:|---:|"]
    for label, v in s["phases"]:
        lines.append(f"| {label} | {v:.4f} | {v / link:.3f} | {v / ref:.3f} |")
    for label, sec in s["recoveries"]:
        lines.append(f"| {label} | " + (f"{sec:.2f} s" if sec is not None else "never")
                     + " | | |")
    lines.append(f"<!-- end {name} -->")
    return "\n".join(lines)


def plot_timeline(name, doc):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    meta, s = doc["meta"], doc["summary"]
    link = meta["mbit"] * 1e6 / 8 / 1e9
    fig, ax = plt.subplots(figsize=(8, 4.0))
    for job, series in doc["series"].items():
        ax.plot([p[0] for p in series], [p[1] for p in series],
                label=f"{job}: algbw over the last {meta['window_s']:g} s")
    ax.axhline(link, color="k", ls="--", lw=1, label=f"link {meta['mbit']} Mbit/s")
    ax.axhline(0.95 * s["reference"], color="#55a868", ls=":", lw=1.2, label=f"0.95 of {meta.get('reference', 'before')}")
    for i, (ev, at) in enumerate(sorted(doc["events"].items(), key=lambda e: e[1])):
        ax.axvline(at, color="#c44e52", lw=1, alpha=0.7)
        ax.text(at, link * (1.22 - 0.06 * (i % 2)), f" {ev}", va="top", fontsize=7)
    ax.set_ylim(0, link * 1.25)
    ax.set_xlabel("seconds since the job's first timed AllReduce")
    ax.set_ylabel("algbw (GB/s)")
    ax.set_title(f"{meta['what']}: N={meta['workers']}, {size_text(meta['bytes'])}, "
                 f"{meta['mode']}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    save(fig, name)


SWEEP_COLUMNS = (1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)


def sweep_table(name, rows):
    """A size sweep: one row per system, the 4 B time and algbw at a few sizes (the plot has
    every size)."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    at = {(r["system"], r["bytes"]): r for r in rows}
    cols = [b for b in SWEEP_COLUMNS if any((s, b) in at for s in systems)]
    small = min(r["bytes"] for r in rows)
    lines = [f"<!-- table {name} -->",
             f"| system | {size_text(small)} time (µs) | "
             + " | ".join(f"{size_text(b)} algbw (GB/s)" for b in cols) + " |",
             "|---|---:|" + "---:|" * len(cols)]
    for s in systems:
        t = at.get((s, small))
        cells = [f"{at[(s, b)]['algbw']:.4f}" if (s, b) in at else "" for b in cols]
        lines.append(f"| {s} | {t['time_us']:.1f} | " if t else f"| {s} | | ")
        lines[-1] += " | ".join(cells) + " |"
    lines.append(f"<!-- end {name} -->")
    return "\n".join(lines)


def fabric_table(name, doc):
    """One row per system and size: algbw, its share of the link and of the first system."""
    meta, rows = doc["meta"], [r for r in doc["rows"] if r.get("fabric", "lossless") == "lossless"]
    if len({r["bytes"] for r in rows}) > 2:
        return sweep_table(name, rows)
    link = meta["mbit"] * 1e6 / 8 / 1e9
    lines = [f"<!-- table {name} -->",
             f"| system | size | algbw (GB/s) | of the link | CPU-s per GB |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        cpu = r.get("cpu_s_per_gb")
        lines.append(f"| {r['system']} | {size_text(r['bytes'])} | {r['algbw']:.4f} | "
                     f"{r['algbw'] / link:.3f} | {cpu:.2f} |" if cpu is not None else
                     f"| {r['system']} | {size_text(r['bytes'])} | {r['algbw']:.4f} | "
                     f"{r['algbw'] / link:.3f} | |")
    lines.append(f"<!-- end {name} -->")
    return "\n".join(lines)


def plot_fabric(name, doc):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    meta = doc["meta"]
    rows = [r for r in doc["rows"] if r.get("fabric", "lossless") == "lossless"]
    link = meta["mbit"] * 1e6 / 8 / 1e9
    systems = list(dict.fromkeys(r["system"] for r in rows))
    sizes = sorted({r["bytes"] for r in rows})
    if len(sizes) > 1:
        plot_sweep(name, meta, rows, systems, link)
        return
    fig, ax = plt.subplots(figsize=(8, 4.5))
    vals = [next(r["algbw"] for r in rows if r["system"] == s) for s in systems]
    ax.barh(systems, vals, color="#4c72b0")
    ax.axvline(link, color="k", ls="--", lw=1, label=f"link {meta['mbit']} Mbit/s")
    ax.set_xlabel("algbw (GB/s)")
    ax.invert_yaxis()
    for y, v in enumerate(vals):
        ax.text(v, y, f" {v:.3f}", va="center", fontsize=8)
    ax.set_title(f"AllReduce float sum, N={meta['workers']}, {size_text(sizes[0])}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    save(fig, name)


def save(fig, name):
    import matplotlib.pyplot as plt
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(RESULTS, f"{name}.{ext}"), dpi=90)
    plt.close(fig)


def plot_sweep(name, meta, rows, systems, link):
    """algbw, busbw and the host's CPU-seconds per GB AllReduced against size, a line per
    system."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    panels = (("algbw", "algbw (GB/s)"), ("busbw", "busbw (GB/s)"),
              ("host_cpu_s_per_gb", "host CPU-s per GB (timed iterations)"))
    for ax, (key, label) in zip(axes, panels):
        drawn = 0
        for s in systems:
            pts = sorted((r["bytes"], r[key]) for r in rows
                         if r["system"] == s and r.get(key) is not None)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=s)
            drawn += len(pts)
        if key != "host_cpu_s_per_gb":
            ax.axhline(link, color="k", ls="--", lw=1, label=f"link {meta['mbit']} Mbit/s")
        elif drawn:
            ax.set_yscale("log")
        else:
            ax.text(0.5, 0.5, "not in this report", transform=ax.transAxes, ha="center")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"AllReduce float sum, N={meta['workers']} workers, {meta['mbit']} Mbit/s links")
    fig.tight_layout()
    save(fig, name)


def plot_driver(path, out):
    """One conflux-nccl-driver --json report: algbw against size, a line per mode (and type)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != "conflux-nccl-driver/1":
        sys.exit(f"{path}: not a conflux-nccl-driver report")
    lines = {}
    for r in doc["rows"]:
        key = r["mode"] + ("" if r["dtype"] == "float" else f" {r['dtype']}")
        lines.setdefault(key, []).append((r["bytes"], r["algbw"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, pts in lines.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=key)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("algbw (GB/s)")
    ax.set_title("AllReduce through the plugin: " + ", ".join(lines))
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def driver_summary(path):
    """One line per mode at the largest size both it and the ring ran: its algbw and its ratio to
    the ring's (the demo's last words)."""
    with open(path) as f:
        doc = json.load(f)
    best = {}
    for r in doc["rows"]:
        if r["dtype"] != "float":
            continue
        best.setdefault(r["mode"], {})[r["bytes"]] = r["algbw"]
    ring = best.get("ring", {})
    names = {"collnet": "aggregators (CollNet)", "hybrid": "aggregators + ring (measured split)",
             "ring": "the plugin's ring"}
    lines = []
    for mode, rows in best.items():
        common = sorted(set(rows) & set(ring))
        if not common:
            continue
        size = common[-1]
        ratio = rows[size] / ring[size] if ring[size] > 0 else 0.0
        lines.append(f"# {names.get(mode, mode)} at {size_text(size)}: {rows[size]:.3f} GB/s, "
                     f"{ratio:.2f}x the ring")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", action="store_true")
    p.add_argument("--check", metavar="FILE")
    p.add_argument("--driver-json", metavar="FILE")
    p.add_argument("--out", metavar="PNG")
    a = p.parse_args()
    if a.driver_json:
        if not a.out:
            p.error("--driver-json needs --out")
        plot_driver(a.driver_json, a.out)
        for line in driver_summary(a.driver_json):
            print(line)
        print(f"# plot: {a.out}")
        return 0
    found = list(reports())
    if not found:
        sys.exit("no report in bench/results")
    if a.tables:
        for name, doc in found:
            print(table(name, doc) + "\n")
        return 0
    if a.check:
        page = open(a.check).read()
        stale = [name for name, doc in found if table(name, doc) not in page]
        for name in stale:
            print(f"{a.check}: the table of bench/results/{name}.json is missing or stale; "
                  f"paste it from bench/plot_results.py --tables")
        if not stale:
            print(f"{a.check}: {len(found)} report table(s) as their JSON says")
        return 1 if stale else 0
    for name, doc in found:
        plot(name, doc)
        print(f"wrote bench/results/{name}.png and .svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
