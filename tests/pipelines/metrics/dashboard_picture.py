"""Render docs/metrics-dashboard.png: the dashboard's panels after a reference scenario.

Grafana is not available offline, so this is **not a Grafana screenshot**: it runs every query
of ``docs/grafana-dashboard.json`` against a real Prometheus (``query_range``), draws each
panel with matplotlib in the dashboard's grid (time series as lines, stats as their last value
coloured by the panel's thresholds) into an HTML page, and screenshots that page with headless
Chromium. The scenario is the reference scenario of docs/DESIGN.md with continuous jobs (each a
process serving ``/metrics``, as a deployment runs them) and producers that keep writing::

    python -m tests.pipelines.metrics.dashboard_picture [--out docs/metrics-dashboard.png]

1. producers write to P's Payments, group G consumes on P; a burst of 300,000 records:
   lag and RPO rise and recover;
2. failover G P -> B; G consumes Payments and P.Payments on B;
3. producers move to B;
4. failback G B -> P; producers and G back on P.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from ledger.config import config_from_mapping
from pipelines.devtools import workload
from pipelines.devtools.clusters import EmbeddedClusters, free_port
from pipelines.edge import kafka_admin
from tests.pipelines.metrics.servers import Job, Prometheus, wait_for

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
RULES = ROOT / "docs" / "prometheus-alerts.yml"
CLI = str(Path(sys.executable).with_name("offset-ledger"))
TOPIC = "Payments"
ROW_PX = 30  # Grafana's grid: 24 columns, 30 px per row unit


# --- rendering ---------------------------------------------------------------------------------


def _legend(fmt: str, labels: dict[str, str]) -> str:
    out = fmt
    for key, value in labels.items():
        out = out.replace("{{" + key + "}}", value)
    return out if "{{" not in out else ", ".join(f"{k}={v}" for k, v in labels.items())


def _series(prom: Prometheus, panel: dict, start: float, end: float, step: float,
            variables: dict[str, str]) -> list[tuple[str, list[float], list[float]]]:
    out = []
    for target in panel.get("targets", []):
        expr = target["expr"].replace("$__rate_interval", f"{max(4 * step, 15):.0f}s")
        for name, value in variables.items():
            expr = expr.replace(f"${name}", value)
        data = prom.api("query_range", query=expr, start=str(start), end=str(end),
                        step=str(step))
        for r in data["result"]:
            xs = [float(t) - start for t, _ in r["values"]]
            ys = [float(v) for _, v in r["values"]]
            out.append((_legend(target.get("legendFormat", ""), r["metric"]), xs, ys))
    return out


def _unit(value: float, unit: str) -> str:
    if math.isnan(value):
        return "-"
    if unit == "s":
        return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"
    if unit == "bytes":
        return f"{value / 2**20:.0f} MiB"
    return f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2f}"


def _color(panel: dict, value: float) -> str:
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    color = steps[0]["color"]
    for step in steps[1:]:
        if value >= step["value"]:
            color = step["color"]
    return {"green": "#37872d", "orange": "#e0752d", "red": "#c4162a"}.get(color, color)


def _stat_html(panel: dict, series: list) -> str:
    if not series:
        return '<div class="nodata">No data</div>'
    mappings = {k: v["text"] for m in panel["fieldConfig"]["defaults"].get("mappings", [])
                for k, v in m["options"].items()}
    cells = []
    for name, _, ys in series:
        last = ys[-1]
        text = mappings.get(str(int(last)), _unit(last, panel["fieldConfig"]["defaults"]["unit"])
                            ) if not math.isnan(last) else "-"
        cells.append(f'<div class="stat" style="background:{_color(panel, last)}">'
                     f'<span class="v">{html.escape(text)}</span>'
                     f'<span class="n">{html.escape(name)}</span></div>')
    return '<div class="stats">' + "".join(cells) + "</div>"


def _timeseries_svg(panel: dict, series: list, width_px: int, height_px: int) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not series:
        return '<div class="nodata">No data</div>'
    fig, ax = plt.subplots(figsize=(width_px / 100, height_px / 100), dpi=100)
    fig.patch.set_facecolor("#181b1f")
    ax.set_facecolor("#181b1f")
    unit = panel["fieldConfig"]["defaults"]["unit"]
    scale = 2**20 if unit == "bytes" else 1
    for name, xs, ys in series[:8]:
        ax.plot([x / 60 for x in xs], [y / scale for y in ys], linewidth=1.2, label=name[:60])
    ax.tick_params(colors="#ccccdc", labelsize=7)
    for spine in ax.spines.values():
        spine.set_color("#2c3235")
    ax.grid(color="#2c3235", linewidth=0.5)
    ax.set_xlabel("minutes since the scenario started", color="#8e8e8e", fontsize=7)
    if unit not in ("short", "none"):
        ax.set_ylabel({"s": "seconds", "rps": "records/s", "Bps": "bytes/s", "ops": "per s",
                       "bytes": "MiB", "percentunit": "CPU (1 = a core)"}.get(unit, unit),
                      color="#8e8e8e", fontsize=7)
    ax.legend(fontsize=6, loc="upper left", facecolor="#181b1f", edgecolor="#2c3235",
              labelcolor="#ccccdc", ncol=2 if len(series) > 3 else 1)
    fig.tight_layout(pad=0.4)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", facecolor=fig.get_facecolor())
    plt.close(fig)
    return f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def render_html(prom: Prometheus, start: float, end: float, note: str, step: float = 2.0,
                width: int = 1400) -> str:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {"source": ".*", "target": ".*", "group": ".*"}
    col = width / 24
    blocks = []
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        style = (f"left:{g['x'] * col:.0f}px;top:{g['y'] * ROW_PX + 60}px;"
                 f"width:{g['w'] * col - 6:.0f}px;height:{g['h'] * ROW_PX - 6}px")
        if panel["type"] == "row":
            blocks.append(f'<div class="row" style="{style}">{html.escape(panel["title"])}</div>')
            continue
        series = _series(prom, panel, start, end, step, variables)
        body = (_stat_html(panel, series) if panel["type"] == "stat" else
                _timeseries_svg(panel, series, int(g["w"] * col - 16), g["h"] * ROW_PX - 36))
        blocks.append(f'<div class="panel" style="{style}"><div class="t">'
                      f'{html.escape(panel["title"])}</div>{body}</div>')
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
html, body {{ overflow:hidden; }}
body {{ margin:0; background:#111217; color:#ccccdc; font-family:Inter,Helvetica,Arial,sans-serif;
  position:relative; width:{width}px; height:{bottom * ROW_PX + 70}px; }}
.head {{ position:absolute; left:8px; top:8px; font-size:16px; }}
.head small {{ color:#8e8e8e; font-size:11px; margin-left:12px; }}
.row {{ position:absolute; font-size:14px; font-weight:600; padding:6px 4px; }}
.panel {{ position:absolute; background:#181b1f; border:1px solid #2c3235; border-radius:3px;
  overflow:hidden; }}
.t {{ font-size:12px; font-weight:500; padding:4px 8px; }}
.panel img {{ display:block; margin:0 4px; }}
.stats {{ display:flex; gap:4px; padding:0 6px; height:calc(100% - 30px); }}
.stat {{ flex:1; border-radius:3px; display:flex; flex-direction:column; justify-content:center;
  align-items:center; color:white; }}
.stat .v {{ font-size:22px; font-weight:600; }} .stat .n {{ font-size:10px; }}
.nodata {{ color:#8e8e8e; font-size:12px; padding:20px; }}
</style></head><body>
<div class="head">{html.escape(dashboard["title"])}<small>{html.escape(note)}</small></div>
{"".join(blocks)}
</body></html>"""


def screenshot(page: Path, out: Path, width: int, height: int) -> None:
    chromium = "chromium"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                        f"--screenshot={out}", f"--window-size={width},{height}",
                        page.as_uri()], check=True, capture_output=True, timeout=120)


# --- the scenario -------------------------------------------------------------------------------


class Producers:
    """Writes to ``Payments`` on one cluster at a steady rate until moved or stopped."""

    def __init__(self, clusters: dict, rate: float = 60.0) -> None:
        self.clusters, self.rate, self.alias = clusters, rate, "P"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            batch = [f"{self.alias}-{i + k:07d}" for k in range(int(self.rate // 2))]
            workload.produce(self.clusters[self.alias], TOPIC, batch, 3)
            i += len(batch)
            self.stop.wait(0.5)


class Group:
    """Group G reading ``topics`` on one cluster in small steps (commits after each)."""

    def __init__(self, clusters: dict, group: str) -> None:
        self.clusters, self.group = clusters, group
        self.where: tuple[str, list[str]] | None = None
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                if self.where is not None:
                    alias, topics = self.where
                    workload.consume(self.clusters[alias], self.group, topics, limit=40)
            self.stop.wait(1.0)

    def move(self, where: tuple[str, list[str]] | None) -> None:
        with self.lock:  # returns once no poll is in flight: the group has no active member
            self.where = where


def run(out: Path, workdir: Path) -> None:
    state = workdir / "state"
    raw = {
        "clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ("P", "B")},
        "flows": {"P->B": {"topics": [TOPIC], "groups": ["G"]},
                  "B->P": {"topics": [TOPIC, f"P.{TOPIC}"], "groups": ["G"],
                           "reverse.checkpointed.topics": [f"P.{TOPIC}"]}},
        "emit.checkpoints.interval.seconds": 5, "sync.group.offsets.enabled": False,
        "ledger": {"location": str(workdir / "ledger")},
        "embedded": {"data.dir": str(workdir / "clusters")},
    }
    path = workdir / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    config = config_from_mapping(raw, path=str(path))
    clusters = EmbeddedClusters(config, tied_to_parent=True)
    clusters.up()
    env = {**os.environ, "OFFSET_LEDGER_STATE_DIR": str(state)}
    ports = {name: free_port() for name in ("P->B", "B->P", "cp P->B", "cp B->P")}
    prom = Prometheus(workdir / "prometheus", {
        "offset-ledger-replicate": [f"127.0.0.1:{ports['P->B']}", f"127.0.0.1:{ports['B->P']}"],
        "offset-ledger-checkpoint": [f"127.0.0.1:{ports['cp P->B']}",
                                     f"127.0.0.1:{ports['cp B->P']}"]}, [RULES])
    jobs: list[Job] = []
    c = {a: config.cluster(a) for a in ("P", "B")}
    producers = group = None

    def cli(*argv: str) -> None:
        print("  $ offset-ledger", " ".join(argv), flush=True)
        subprocess.run([CLI, *argv, "--config", str(path)], env=env, check=True, cwd=workdir,
                       timeout=600)

    try:
        for alias in ("P", "B"):
            kafka_admin.create_topic(c[alias], TOPIC, 3)
        cli("ledger", "init")
        start = time.time()
        for flow in ("P->B", "B->P"):
            jobs.append(Job([CLI, "replicate", "--flow", flow, "--config", str(path),
                             "--interval", "2", "--commit-interval", "2", "--metrics-address",
                             f"127.0.0.1:{ports[flow]}"], workdir / f"rep {flow}.log", env,
                            workdir))
        for flow in ("P->B", "B->P"):
            jobs.append(Job([CLI, "checkpoint", "--flow", flow, "--config", str(path),
                             "--metrics-address", f"127.0.0.1:{ports['cp ' + flow]}"],
                            workdir / f"cp {flow}.log", env, workdir))
        print("1. producers write to P:Payments; G consumes on P", flush=True)
        producers = Producers(c)
        group = Group(c, "G")
        group.move(("P", [TOPIC]))
        wait_for(lambda: prom.scalar('sum(offset_ledger_group_ready_to_move{source="P"})') == 1,
                 900, "G ready to move P -> B")
        time.sleep(40)  # the scenario's pace, for the picture: not synchronisation
        print("   a burst of 300,000 records to P:Payments", flush=True)
        workload.produce(c["P"], TOPIC, [f"burst-{i:07d}" for i in range(300_000)], 3)
        wait_for(lambda: prom.scalar('sum(offset_ledger_replication_lag_records'
                                     '{source="P"})') == 0, 120, "P->B caught up")
        time.sleep(20)
        print("2. failover G P -> B", flush=True)
        group.move(None)
        cli("failover", "--group", "G", "--from", "P", "--to", "B")
        group.move(("B", [TOPIC, f"P.{TOPIC}"]))
        print("3. producers move to B", flush=True)
        producers.alias = "B"
        time.sleep(60)
        print("4. failback G B -> P", flush=True)
        group.move(None)
        cli("failback", "--group", "G", "--from", "B", "--to", "P")
        producers.alias = "P"
        group.move(("P", [TOPIC, f"B.{TOPIC}"]))
        time.sleep(60)
        end = time.time()
        note = (f"Not Grafana: the dashboard's queries run on Prometheus, drawn with matplotlib. "
                f"Reference scenario, {(end - start) / 60:.0f} min: a burst of 300,000 records "
                "on P, failover P->B, producers to B, failback B->P.")
        page = workdir / "dashboard.html"
        page.write_text(render_html(prom, start, end, note))
        dashboard = json.loads(DASHBOARD.read_text())
        height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
        screenshot(page, out, 1400, height * ROW_PX + 70)
        print(f"wrote {out}", flush=True)
    finally:
        for stopper in (producers, group):
            if stopper is not None:
                stopper.stop.set()
        for job in jobs:
            job.stop()
        prom.stop()
        clusters.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "metrics-dashboard.png"))
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="offset-ledger-dashboard-"))
    workdir.mkdir(parents=True, exist_ok=True)
    run(Path(args.out).resolve(), workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
