"""Real Prometheus and Pushgateway servers for the tests (Debian's packages, `make setup`).

Each runs on a free loopback port with a temporary config and data folder, dies with the test
process (``PR_SET_PDEATHSIG``), and is stopped by its fixture. Conditions are awaited by polling
the HTTP API, never by sleeping a guessed time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pipelines.devtools.clusters import free_port
from pipelines.passes import die_with_parent


def binary(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} not found: `make setup` installs Debian's prometheus packages"
    return path


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


class Server:
    """A child process answering HTTP on ``127.0.0.1:port``."""

    def __init__(self, argv: list[str], port: int, log: Path, ready_path: str) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=die_with_parent)
        wait_for(lambda: self._ready(ready_path), 60, f"{argv[0]} ready on {self.url}",
                 lambda: log.read_text()[-2000:])

    def _ready(self, path: str) -> bool:
        assert self.proc.poll() is None, f"exited: {self.log.read_text()[-2000:]}"
        try:
            http_get(self.url + path, 2)
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Prometheus(Server):
    """``prometheus`` scraping ``targets`` (job -> ["host:port"]) every second, with ``rules``
    evaluated every second."""

    def __init__(self, folder: Path, targets: dict[str, list[str]],
                 rules: list[Path] = (), honor_labels: bool = False) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": [str(r) for r in rules],
            "scrape_configs": [{"job_name": job, "honor_labels": honor_labels,
                                "static_configs": [{"targets": hosts}]}
                               for job, hosts in targets.items()],
        }
        path = folder / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        port = free_port()
        super().__init__([binary("prometheus"), f"--config.file={path}",
                          f"--storage.tsdb.path={folder / 'data'}",
                          f"--web.listen-address=127.0.0.1:{port}",
                          "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                         port, folder / "prometheus.log", "/-/ready")

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        body = json.loads(http_get(f"{self.url}/api/v1/{path}?{query}", 10))
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant vector: ``[{"metric": {labels}, "value": [t, "v"]}, ...]``."""
        return self.api("query", query=promql)["result"]

    def scalar(self, promql: str) -> float | None:
        """The single value of ``promql``, or None when it has no sample."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]

    def targets_up(self) -> dict[str, float]:
        return {r["metric"]["job"]: float(r["value"][1]) for r in self.query("up")}


class Pushgateway(Server):
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        port = free_port()
        super().__init__([binary("prometheus-pushgateway"),
                          f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                         port, folder / "pushgateway.log", "/-/ready")


def wait_for(condition: Callable[[], Any], timeout: float, what: str,
             context: Callable[[], str] | None = None, every: float = 0.5) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(every)  # a poll interval, not synchronisation: the condition decides
    extra = f"\n{context()}" if context else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})"
                         f"{extra}")


class Job:
    """An ``offset-ledger`` verb running as its own process (as a service would run it)."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         cwd=cwd, preexec_fn=die_with_parent)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> int:
        """SIGTERM (a replicate records its current batch first); kill after 60 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode
