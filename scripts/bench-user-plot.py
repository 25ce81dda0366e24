#!/usr/bin/env python3
"""Renders the plots of docs/benchmarks.md "streamd as a user runs it".

    scripts/bench-user plot [DIR]     (python3 scripts/bench-user-plot.py [DIR])

Reads DIR/*.jsonl (default docs/benchmarks), the results scripts/bench-user
wrote (one JSON object a run), and writes DIR/NAME.png for each curve it
finds: size, partitions, stages, txn, idle, latency. Every point is the
median of its runs, the bar their range. Needs matplotlib
(scripts/install-tools plot).
"""
import json
import pathlib
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"bare": "#555555", "streamd": "#1f77b4", "streamd+as": "#d62728", "streamd+go": "#2ca02c"}


def load(d):
    runs = []
    for f in sorted(pathlib.Path(d).glob("*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                runs.append(json.loads(line))
    return runs


def med(points):
    """points: {x: [y...]} -> xs, medians, lower and upper error lengths."""
    xs = sorted(points)
    m = [statistics.median(points[x]) for x in xs]
    lo = [m[i] - min(points[x]) for i, x in enumerate(xs)]
    hi = [max(points[x]) - m[i] for i, x in enumerate(xs)]
    return xs, m, [lo, hi]


def line(ax, points, label, color=None, **kw):
    if not points:
        return
    xs, m, err = med(points)
    ax.errorbar(xs, m, yerr=err, marker="o", capsize=3, label=label, color=color or COLORS.get(label), **kw)


def records(runs):
    """The record counts and sizes of runs, e.g. "500,000 200-byte records"."""
    ns = sorted({(r["records"], r.get("size", 200)) for r in runs})
    return ", ".join(f"{n:,} {sz}-byte records" for n, sz in ns)


def title(fig, runs, text):
    loads = [r["load"][0] for r in runs]
    dates = sorted(r["at"][:10] for r in runs)
    broker = sorted({r["broker"] for r in runs})
    fig.suptitle(f"{text}\n{'/'.join(broker)} broker, {dates[0]}, load {min(loads):.1f}-{max(loads):.1f}, "
                 f"{max(r.get('round', 1) for r in runs)} rounds; median and range", fontsize=9)


def by(runs, row, xkey, ykey, **match):
    pts = defaultdict(list)
    for r in runs:
        if r["row"] != row or any(r.get(k, 0) != v for k, v in match.items()):
            continue
        y = ykey(r) if callable(ykey) else r[ykey]
        if y is not None:
            pts[xkey(r) if callable(xkey) else r.get(xkey, 0)].append(y)
    return pts


def ratio_by(runs, row, xkey, field="rate", **match):
    """Per round, row's field over the bare loop's of the same shape and round."""
    bare = {}
    for r in runs:
        if r["row"] == "bare":
            bare[(r["round"], r["size"], r["partitions"], r["records"], r["delivery"])] = r
    pts = defaultdict(list)
    for r in runs:
        if r["row"] != row or any(r.get(k) != v for k, v in match.items()):
            continue
        b = bare.get((r["round"], r["size"], r["partitions"], r["records"], r["delivery"]))
        if b:
            pts[xkey(r) if callable(xkey) else r.get(xkey, 0)].append(r[field] / b[field])
    return pts


def save(fig, d, name):
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    out = pathlib.Path(d) / f"{name}.png"
    fig.savefig(out, dpi=90)
    plt.close(fig)
    print("wrote", out)


def plot_size(runs, d, suffix=""):
    rs = [r for r in runs if r["bench"] == "size"]
    if not rs:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for row in ("bare", "streamd"):
        line(a, by(rs, row, "size", lambda r: r["steady"] * r["size"] / 2**20), row)
    a.set(xscale="log", yscale="log", xlabel="record value size, bytes", ylabel="MiB/s of values (steady)")
    line(b, ratio_by(rs, "streamd", "size", "steady"), "streamd / bare, steady")
    line(b, ratio_by(rs, "streamd", "size", "rate"), "streamd / bare, from process start", color="#9467bd")
    b.axhline(1, color="#999", lw=0.8)
    b.set(xscale="log", xlabel="record value size, bytes", ylabel="records/s, of the bare loop", ylim=(0, 1.6))
    for ax in (a, b):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    title(fig, rs, "Record size: kafka -> kafka passthrough against the bare franz-go loop")
    save(fig, d, "size" + suffix)


def plot_partitions(runs, d, suffix=""):
    rs = [r for r in runs if r["bench"] == "partitions"]
    if not rs:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for row in ("bare", "streamd"):
        line(a, by(rs, row, "partitions", lambda r: r["rate"] / 1e3), row)
        line(b, by(rs, row, "partitions", lambda r: r["peak_rss"] / 2**20), row)
    a.set(xscale="log", xlabel="partitions (input and output)", ylabel="thousand records/s, from process start", ylim=(0, None))
    b.set(xscale="log", xlabel="partitions (input and output)", ylabel="peak RSS, MiB", ylim=(0, None))
    for ax in (a, b):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    title(fig, rs, f"Partitions: {records(rs)}")
    save(fig, d, "partitions" + suffix)


def plot_stages(runs, d, suffix=""):
    rs = [r for r in runs if r["bench"] == "stages"]
    if not rs:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    line(a, by(rs, "streamd", "stages", lambda r: r["rate"] / 1e3), "streamd")
    line(b, by(rs, "streamd", "stages", lambda r: r["cpu_s"] * 1e6 / r["records"]), "streamd")
    bare = [r for r in rs if r["row"] == "bare"]
    if bare:
        a.axhline(statistics.median(r["rate"] / 1e3 for r in bare), color=COLORS["bare"], ls="--", label="bare loop")
        b.axhline(statistics.median(r["cpu_s"] * 1e6 / r["records"] for r in bare), color=COLORS["bare"], ls="--", label="bare loop")
    a.set(xlabel="Wasm identity stages (AssemblyScript, KEEP)", ylabel="thousand records/s, from process start", ylim=(0, None))
    b.set(xlabel="Wasm identity stages (AssemblyScript, KEEP)", ylabel="process CPU, µs per record", ylim=(0, None))
    for ax in (a, b):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    title(fig, rs, f"Stages: {records(rs)}")
    save(fig, d, "stages" + suffix)


def plot_txn(runs, d, suffix=""):
    rs = [r for r in runs if r["bench"] == "txn"]
    if not rs:
        return
    fig, a = plt.subplots(1, 1, figsize=(6, 4))
    line(a, by(rs, "streamd", "txn_records", lambda r: r["rate"] / 1e3, delivery="exactly-once"), "streamd exactly-once")
    for row, delivery, color, label in (("streamd", "at-least-once", COLORS["streamd"], "streamd at-least-once"),
                                         ("bare", "at-least-once", COLORS["bare"], "bare loop"),
                                         ("bare", "exactly-once", "#2ca02c", "bare loop, a transaction per poll")):
        sel = [r["rate"] / 1e3 for r in rs if r["row"] == row and r["delivery"] == delivery]
        if sel:
            a.axhline(statistics.median(sel), color=color, ls="--", label=label)
    a.set(xscale="log", xlabel="transaction.max_records", ylabel="thousand records/s, from process start", ylim=(0, None))
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    title(fig, rs, f"Exactly-once transaction size: {records(rs)}")
    save(fig, d, "txn" + suffix)


def plot_idle(runs, d, suffix=""):
    rs = [r for r in runs if r["bench"] == "idle"]
    if not rs:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for row in ("bare", "streamd"):
        line(a, by(rs, row, "pipelines", lambda r: r["rss"] / 2**20), row)
        line(b, by(rs, row, "pipelines", lambda r: 100 * r["cpu_s"] / r["window_s"]), row)
    a.set(xlabel="idle pipelines in one daemon (bare: loops in one process)", ylabel="resident set, MiB", ylim=(0, None))
    b.set(xlabel="idle pipelines in one daemon (bare: loops in one process)", ylabel="CPU, % of one core", ylim=(0, None))
    for ax in (a, b):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    title(fig, rs, "Idle pipelines: memory and CPU")
    save(fig, d, "idle" + suffix)


def plot_latency(runs, d, suffix=""):
    # Every latency run (-bench latency, latency-low, ...), by the rate
    # produced.
    rs = [r for r in runs if r["bench"].startswith("latency")]
    if not rs:
        return
    deliveries = [x for x in ("at-least-once", "exactly-once") if any(r["delivery"] == x for r in rs)]
    fig, axes = plt.subplots(1, len(deliveries), figsize=(5 * len(deliveries), 4), squeeze=False)
    for ax, dl in zip(axes[0], deliveries):
        for row in ("bare", "streamd", "streamd+as", "streamd+go"):
            for q, ls in (("p50_ms", ":"), ("p99_ms", "-")):
                pts = by(rs, row, lambda r: round(r["target_rate"] / 1e3), lambda r, q=q: r[q] if r[q] > 0 else None, delivery=dl)
                line(ax, pts, f"{row} {q[:-3]}", color=COLORS.get(row), ls=ls)
        ax.set(xscale="log", yscale="log", xlabel="thousand records/s produced", ylabel="send -> output latency, ms", title=dl)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    title(fig, rs, "Latency at a steady rate (200-byte orders, 4 partitions)")
    save(fig, d, "latency" + suffix)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "docs/benchmarks"
    runs = load(d)
    if not runs:
        sys.exit(f"no results in {d}/*.jsonl")
    # One set of plots a broker: NAME.png for kfake, NAME-kafka.png for
    # Apache Kafka.
    for broker in sorted({r["broker"] for r in runs}):
        these = [r for r in runs if r["broker"] == broker]
        suffix = "" if broker == "kfake" else f"-{broker}"
        for f in (plot_size, plot_partitions, plot_stages, plot_txn, plot_idle, plot_latency):
            f(these, d, suffix)


if __name__ == "__main__":
    main()
