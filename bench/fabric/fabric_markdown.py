#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the results of a fabric run (its fabric.json) as Markdown tables, for README.md:
one table per fabric (lossless / lossy), rows = sizes, columns = systems, cells = algbw in
GB/s and, in brackets, the fraction of the link rate; then time (us) for small messages.
Usage: fabric_markdown.py results/500mbit/fabric.json"""
import json
import sys


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b // div} {unit}"
    return f"{b} B"


def main(path):
    data = json.load(open(path))
    meta, rows = data["meta"], data["rows"]
    link = meta["mbit"] * 1e6 / 8 / 1e9
    for fab in ("lossless", "lossy"):
        sel = [r for r in rows if r["fabric"] == fab]
        if not sel:
            continue
        systems = list(dict.fromkeys(r["system"] for r in sel))
        cell = {(r["system"], r["bytes"]): r for r in sel}
        sizes = sorted({r["bytes"] for r in sel})
        extra = f", {meta['loss']}% loss" if fab == "lossy" else ""
        print(f"\n**{fab}{extra}** — algbw GB/s (× link {meta['mbit']} Mbit/s = {link:.4f} GB/s)\n")
        print("| size | " + " | ".join(systems) + " |")
        print("|---:|" + "---:|" * len(systems))
        for b in sizes:
            if b < (1 << 20):
                continue
            vals = []
            for s in systems:
                r = cell.get((s, b))
                vals.append("—" if r is None else f"{r['algbw']:.4f} ({r['algbw'] / link:.2f})")
            print(f"| {human(b)} | " + " | ".join(vals) + " |")
        print(f"\n**{fab}{extra}** — time per AllReduce, small messages (µs)\n")
        print("| size | " + " | ".join(systems) + " |")
        print("|---:|" + "---:|" * len(systems))
        for b in sizes:
            if b > (64 << 10):
                continue
            vals = [("—" if (s, b) not in cell else f"{cell[(s, b)]['time_us']:.0f}") for s in systems]
            print(f"| {human(b)} | " + " | ".join(vals) + " |")
    figs = data.get("figures", {})
    if figs:
        print("\nSummary figures (`figures` in fabric.json):\n")
        for k, v in figs.items():
            print(f"- `{k}`: {v:.3f}" if isinstance(v, float) else f"- `{k}`: {v}")
    fails = data["meta"].get("failures", [])
    if fails:
        print("\nFailed attempts (retried once):\n")
        for f in fails:
            print(f"- {f['system']} [{f['fabric']}] sizes {f['min']}..{f['max']} attempt "
                  f"{f['attempt']}: {f['error'].splitlines()[0]}")


if __name__ == "__main__":
    main(sys.argv[1])
