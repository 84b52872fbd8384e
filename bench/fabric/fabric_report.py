# SPDX-License-Identifier: Apache-2.0
"""Tables, summary figures, CSV/JSON and the PNG plot of a fabric run. Pure functions over the
list of result rows: {"fabric", "system", "bytes", "time_us", "algbw", "busbw", "wrong"}
(algbw/busbw in GB/s = 1e9 B/s, as nccl-tests and conflux-nccl-driver print them)."""
import csv
import json

HEADER = (f"#{'size':>11} {'count':>12} {'type':>9} {'redop':>6} {'time(us)':>10} "
          f"{'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'#wrong':>7}")


def table(rows, title):
    out = [f"# system: {title}", HEADER]
    for r in rows:
        out.append(f"{r['bytes']:12d} {r['bytes'] // 4:12d} {'float':>9} {'sum':>6} "
                   f"{r['time_us']:10.2f} {r['algbw']:12.4f} {r['busbw']:12.4f} {r['wrong']:7d}")
    return "\n".join(out)


def timeline_percentiles(path):
    """conflux-nccl-driver --timeline FILE ("MODE BYTES END_S US" per timed iteration of rank
    0) -> {bytes: {"n", "p50_us", "p90_us", "p99_us", "max_us"}}: the tail that a mean hides."""
    by = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            _, nbytes, _, us = line.split()
            by.setdefault(int(nbytes), []).append(float(us))
    out = {}
    for nbytes, v in by.items():
        v.sort()
        n = len(v)
        out[nbytes] = {"n": n, "p50_us": v[n // 2], "p90_us": v[min(n - 1, n * 9 // 10)],
                       "p99_us": v[min(n - 1, n * 99 // 100)], "max_us": v[-1]}
    return out


def link_gbs(mbit):
    return mbit * 1e6 / 8 / 1e9


def _by_size(rows, fabric, system):
    return {r["bytes"]: r for r in rows if r["fabric"] == fabric and r["system"] == system}


def _large_mean(rows, fabric, system, min_bytes):
    sel = [r["algbw"] for b, r in _by_size(rows, fabric, system).items() if b >= min_bytes]
    return sum(sel) / len(sel) if sel else None


def summary(rows, meta):
    """Returns (lines, figures dict). meta: workers, mbit, large (min bytes), labels."""
    n, link = meta["workers"], link_gbs(meta["mbit"])
    big = meta["large"]
    lab = meta["labels"]
    fig, lines = {}, []

    def fmt(v, spec=".3f"):
        return "n/a" if v is None else format(v, spec)

    lines.append(f"# summary: N={n} workers, link {meta['mbit']} Mbit/s = {link:.4f} GB/s, "
                 f"ring ceiling {n / (2 * (n - 1)):.3f} x link, aggregation ceiling 1.0 x link; "
                 f"'large' = messages >= {big >> 20} MiB (mean algbw over those sizes)")
    present = {r["system"] for r in rows}
    lab = {k: v for k, v in lab.items() if v in present}
    for key in ("fat", "fat_hybrid", "striped", "one", "hybrid", "ring", "gloo"):
        if key not in lab:
            continue
        m = _large_mean(rows, "lossless", lab[key], big)
        fig[f"algbw_over_link_{key}"] = None if m is None else m / link
        lines.append(f"#   {lab[key]:44s} large algbw {fmt(m, '.4f')} GB/s = "
                     f"{fmt(None if m is None else m / link)} x link")
    conf, gloo = _by_size(rows, "lossless", lab.get("fat")), _by_size(rows, "lossless", lab.get("gloo"))
    common = sorted(set(conf) & set(gloo))
    if common:
        ref = 64 << 20 if (64 << 20) in common else common[-1]
        fig["conflux_over_gloo_bytes"] = ref
        fig["conflux_over_gloo"] = conf[ref]["algbw"] / gloo[ref]["algbw"]
        lines.append(f"#   conflux ({lab['fat']}) / gloo ring algbw at {ref} B: "
                     f"{fig['conflux_over_gloo']:.2f}x (goal >= 1.35x at 64 MiB)")
        for small in (4, 4096):
            if small in common:
                r = conf[small]["time_us"] / gloo[small]["time_us"]
                fig[f"latency_ratio_{small}B"] = r
                lines.append(f"#   small-message latency conflux/gloo at {small} B: "
                             f"{conf[small]['time_us']:.1f} / {gloo[small]['time_us']:.1f} us = {r:.2f}")
    if "lossy" in {r["fabric"] for r in rows} and "fat" in lab:
        lossy = _large_mean(rows, "lossy", lab["fat"], big)
        clean = _large_mean(rows, "lossless", lab["fat"], big)
        if lossy and clean:
            fig["loss_over_lossless"] = lossy / clean
            lines.append(f"#   conflux with {meta['loss']}% loss / lossless (large): "
                         f"{lossy / clean:.2f} (goal >= 0.5)")
    if "hybrid" in lab:
        hy = _large_mean(rows, "lossless", lab["hybrid"], big)
        ring = _large_mean(rows, "lossless", lab.get("ring"), big)
        one = _large_mean(rows, "lossless", lab.get("one"), big)
        best = max([v for v in (ring, one) if v is not None], default=None)
        if hy and best:
            fig["hybrid_over_best"] = hy / best
            lines.append(f"#   hybrid / best of (ring, 1 aggregator alone) (large): "
                         f"{hy:.4f} / {best:.4f} GB/s = {hy / best:.2f} -> "
                         f"{'at least as fast' if hy >= best * 0.98 else 'SLOWER'}")
    if "fat_hybrid" in lab:
        fh = _large_mean(rows, "lossless", lab["fat_hybrid"], big)
        fat = _large_mean(rows, "lossless", lab.get("fat"), big)
        if fh and fat:
            fig["fat_hybrid_over_fat"] = fh / fat
            lines.append(f"#   measured split / aggregators alone at the fat aggregator (large): "
                         f"{fh:.4f} / {fat:.4f} GB/s = {fh / fat:.2f}")
    return lines, fig


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["fabric", "system", "bytes", "time_us", "algbw",
                                          "busbw", "wrong", "host_cpu_s_per_gb", "p50_us",
                                          "p90_us", "p99_us", "max_us"])
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in w.fieldnames})


def write_json(path, rows, meta, figures):
    with open(path, "w") as f:
        json.dump({"format": "conflux-fabric/1", "meta": meta, "figures": figures,
                   "rows": rows}, f, indent=1)


def plot(path, rows, meta):
    """algbw vs size, one line per system, one panel per fabric. Returns an error string or None."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"plot skipped: {e}"
    fabrics = [f for f in ("lossless", "lossy") if any(r["fabric"] == f for r in rows)]
    fig, axes = plt.subplots(1, len(fabrics), figsize=(7.5 * len(fabrics), 5), squeeze=False)
    n, link = meta["workers"], link_gbs(meta["mbit"])
    for ax, fab in zip(axes[0], fabrics):
        systems = []
        for r in rows:
            if r["fabric"] == fab and r["system"] not in systems:
                systems.append(r["system"])
        for s in systems:
            pts = sorted((r["bytes"], r["algbw"]) for r in rows
                         if r["fabric"] == fab and r["system"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=s)
        ax.axhline(link, color="k", ls="--", lw=1,
                   label=f"link {meta['mbit']} Mbit/s = aggregation ceiling (1.0)")
        ax.axhline(link * n / (2 * (n - 1)), color="gray", ls=":", lw=1.2,
                   label=f"ring ceiling N/(2(N-1)) = {n / (2 * (n - 1)):.3f}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("algbw (GB/s)")
        extra = f", {meta['loss']}% loss" if fab == "lossy" else ""
        ax.set_title(f"AllReduce float sum, N={n} workers{extra}")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylim(0, link * 1.15)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return None
