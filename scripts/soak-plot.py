#!/usr/bin/env python3
"""scripts/soak-plot.py DIR OUT.png: draws the embedded broker's soak
(scripts/soak-embedded writes DIR/samples.csv and DIR/summary.json): RSS and
Go heap in use, the broker's disk and its index estimate, open files, the
records retained, records/s and the machine's load, each with the slope per
hour fitted after the retention window (summary.json) and that window
shaded. Needs matplotlib (scripts/install-tools plot)."""

import csv
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, out = sys.argv[1], sys.argv[2]
    with open(d + "/samples.csv") as f:
        rows = list(csv.DictReader(f))
    with open(d + "/summary.json") as f:
        s = json.load(f)
    t = [float(r["t"]) / 60 for r in rows]
    col = lambda k, scale=1.0: [float(r[k]) / scale for r in rows]  # noqa: E731
    slope = s["slopes_per_hour"]
    mib = 1 << 20

    fig, ax = plt.subplots(3, 2, figsize=(13, 11))
    retention = "retention %g min" % (s["retention_s"] / 60) if s["retention_s"] > 0 else "no retention"
    fig.suptitle(
        "streamd run, embedded broker: %.0f records/s generated, %s, %.1f%% dead-lettered, load average %.1f on 2 cores"
        % (s["orders_in_per_s"], retention, 100 * s["dlq_share"], s["load1_mean"]),
        fontsize=11,
    )

    def panel(a, title, series, unit, scale=1.0):
        for key, label in series:
            line = a.plot(t, col(key, scale), label="%s (%+.1f %s/h)" % (label, slope.get(key, 0) / scale, unit))[0]
            line.set_linewidth(1.2)
        a.axvspan(0, s["settle_s"] / 60, color="#eeeeee", zorder=0)
        a.set_title(title, fontsize=10)
        a.set_xlabel("minutes")
        a.set_ylabel(unit)
        a.set_ylim(bottom=0)
        a.grid(True, color="#e5e5e5")
        a.legend(fontsize=8, loc="upper left")

    mem = [("rss_bytes", "RSS"), ("heap_inuse_bytes", "Go heap in use")]
    if "heap_goal_bytes" in rows[0]:
        mem.append(("heap_goal_bytes", "GC goal (2x live heap)"))
    panel(ax[0][0], "daemon memory", mem, "MiB", mib)
    panel(ax[0][1], "broker disk and index estimate", [("disk_bytes", "data directory"), ("index_bytes", "index in memory (estimate)")], "MiB", mib)
    panel(ax[1][0], "open files and goroutines", [("open_fds", "open files"), ("goroutines", "goroutines"), ("segments", "segment files")], "count")
    panel(ax[1][1], "records retained (all topics)", [("retained_records", "retained")], "records")
    rate = lambda k: [0] + [  # noqa: E731
        (float(rows[i][k]) - float(rows[i - 1][k])) / (float(rows[i]["t"]) - float(rows[i - 1]["t"])) for i in range(1, len(rows))
    ]
    a = ax[2][0]
    a.plot(t, rate("in_orders"), label="orders in /s", linewidth=1.2)
    a.plot(t, rate("out_orders"), label="orders.v1 out /s", linewidth=1.2)
    a.plot(t, rate("out_copy"), label="exactly-once copy out /s", linewidth=1.2)
    a.plot(t, col("lag_orders"), label="lag of orders (records)", linewidth=1.2)
    a.axvspan(0, s["settle_s"] / 60, color="#eeeeee", zorder=0)
    a.set_title("records/s and lag", fontsize=10)
    a.set_xlabel("minutes")
    a.set_ylim(bottom=0)
    a.grid(True, color="#e5e5e5")
    a.legend(fontsize=8, loc="lower right")
    a = ax[2][1]
    a.plot(t, col("load1"), label="load average (1 min), 2 cores shared", linewidth=1.2)
    a.plot(t, col("skipped_unread"), label="records retention deleted unread (%d)" % s["deleted_unread_records"], linewidth=1.2)
    a.axvspan(0, s["settle_s"] / 60, color="#eeeeee", zorder=0)
    a.set_title("machine load; deleted before read", fontsize=10)
    a.set_xlabel("minutes")
    a.set_ylim(bottom=0)
    a.grid(True, color="#e5e5e5")
    a.legend(fontsize=8, loc="upper left")
    fig.text(0.5, 0.005, "slopes per hour: least squares over the samples after the shaded %g minutes" % (s["settle_s"] / 60),
             ha="center", fontsize=9, color="#555555")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(out, dpi=80)


if __name__ == "__main__":
    main()
