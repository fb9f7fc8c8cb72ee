"""One chart per flow partition, as inline SVG: runs over time, operations, resume points.

Invariants:
    * Rendered with matplotlib's Agg/SVG backend into a string: no file, no display, no
      network; fonts are embedded as paths so the SVG looks the same everywhere.
    * The x axis is time; upstream ends (u+n) and downstream ends (d+n) of the runs are steps.
    * Operation labels sit above the plot in as many rows as needed so that no two overlap;
      every resume point is labelled on the chart itself (group and offset), not only in a
      tooltip, so a screenshot or a printout keeps it.
"""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

from ledger import clock

Row = dict[str, Any]

UPSTREAM, DOWNSTREAM = "#1f77b4", "#ff7f0e"
KIND_COLOURS = {"failover": "#d62728", "failback": "#2ca02c"}
POINT = "#6a3d9a"
_NO_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}


def label_rows(xs: list[float], min_gap: float) -> list[int]:
    """For labels at sorted-or-not positions ``xs``, a row each so labels in a row are
    at least ``min_gap`` apart (greedy, first row that fits)."""
    rows_last: list[float] = []
    out = [0] * len(xs)
    for i in sorted(range(len(xs)), key=lambda k: xs[k]):
        for row, last in enumerate(rows_last):
            if xs[i] - last >= min_gap:
                rows_last[row] = xs[i]
                out[i] = row
                break
        else:
            rows_last.append(xs[i])
            out[i] = len(rows_last) - 1
    return out


def partition_chart(title: str, runs: list[Row], operations: list[Row],
                    points: list[Row]) -> str:
    """The SVG of one flow partition.

    Args:
        runs: offset_syncs rows of the partition (written_at, upstream/downstream offsets,
            length).
        operations: ``{"label", "kind", "started_at"}`` per operation to mark.
        points: ``{"written_at", "offset", "label"}`` per resume point on this partition.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "path"
    ordered = sorted(runs, key=lambda r: (r["written_at"], r.get("batch_id") or 0))
    fig, ax = plt.subplots(figsize=(11.5, 3.8), dpi=100)
    try:
        times = [r["written_at"] for r in ordered]
        everything = times + [o["started_at"] for o in operations if o.get("started_at")]
        everything += [p["written_at"] for p in points if p.get("written_at")]
        if not everything:
            everything = [clock.now()]
        t0, t1 = min(everything), max(everything)
        pad = max((t1 - t0) * 0.04, dt.timedelta(seconds=1))
        ax.set_xlim(t0 - pad, t1 + pad)
        for key, colour, name in (("upstream", UPSTREAM, "upstream end u+n (original)"),
                                  ("downstream", DOWNSTREAM, "downstream end d+n (replica)")):
            # Each run's end, held until the next run (the last one to the edge); a new epoch
            # (a truncated replica) shows as a drop.
            ends = [r[f"{key}_offset"] + r["length"] for r in ordered]
            if times:
                ax.step([*times, t1 + pad], [*ends, ends[-1]], where="post", color=colour,
                        linewidth=1.8, label=name)
                ax.plot(times, ends, "o", color=colour, markersize=2.5)
        span = (ax.get_xlim()[1] - ax.get_xlim()[0]) or 1.0

        marked = [o for o in operations if o.get("started_at")]
        xs = [mdates.date2num(o["started_at"]) for o in marked]
        rows = label_rows(xs, span * 0.16)
        for op, x, row in zip(marked, xs, rows, strict=True):
            colour = KIND_COLOURS.get(op["kind"], "#555")
            ax.axvline(op["started_at"], color=colour, linestyle="--", linewidth=1.2)
            ax.annotate(op["label"], xy=(x, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(0, 4 + 13 * row), textcoords="offset points", ha="center",
                        va="bottom", fontsize=8.5, color=colour, fontweight="bold")

        placed = sorted((p for p in points if p.get("written_at")),
                        key=lambda p: p["written_at"])
        point_rows = label_rows([mdates.date2num(p["written_at"]) for p in placed],
                                span * 0.22)
        for p, row in zip(placed, point_rows, strict=True):
            ax.plot(p["written_at"], p["offset"], "s", color=POINT, markersize=7, zorder=5)
            ax.annotate(p["label"], xy=(p["written_at"], p["offset"]), xytext=(8, -12 - 11 * row),
                        textcoords="offset points", fontsize=8, color=POINT,
                        arrowprops={"arrowstyle": "-", "color": POINT, "linewidth": 0.6})

        locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, nbins=6))
        ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        ax.set_ylim(bottom=0)
        ax.set_ylabel("offset")
        ax.grid(True, color="#eee")
        ax.set_title(title, loc="left", fontsize=10, pad=8 + 13 * (max(rows, default=0) + 1))
        if points:
            ax.plot([], [], "s", color=POINT, label="resume point (group: offset)")
        # Outside the plot, so it never hides a run or a resume point.
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        fig.tight_layout()
        buffer = io.StringIO()
        # No RDF block: it carries a creation date (the report would differ on every render) and
        # links to external vocabularies (the page must stand alone offline).
        fig.savefig(buffer, format="svg", metadata=_NO_METADATA)
    finally:
        plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]  # inline: drop the XML prolog and DOCTYPE
