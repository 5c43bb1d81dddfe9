"""Watch: catch the leak while it happens (`forensics watch DIR`).

The pipeline, one poll at a time:
  follow.Follower   the engine logs (and page events) of DIR as they grow, with rotation and truncation
  detector.Detector each new run of lines typed in bulk (chunks: the per-request shapes by strict patterns
                    over the whole run, every other line by investigate's own line parsers), the
                    signatures applied as soon as their last line arrives
  pages.PageWatch   page events: a read of slots another room wrote (where page events are followed)
  gateway.GatewayRooms  with --gateway FILE: room -> the gateway's request id and account, for alerts
  Sinks             alerts as JSON lines (stdout or --alerts), an optional webhook, Prometheus metrics
  the state file    offsets, open rooms and the alerts made, written after each poll's alerts are out:
                    a restarted watcher goes on where it stopped, alerting nothing twice
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

from forensics.intake import load_bundle_config
from forensics.watch.alerts import Alert
from forensics.watch.detector import KINDS, Detector
from forensics.watch.follow import Follower, lag_bytes
from forensics.watch.gateway import GatewayRooms
from forensics.watch.pages import PageWatch

STATE_VERSION = 1
# the state (offsets with the detector's rooms and the page maps) is saved at most this often, and at
# exit: a watcher killed in between reads those seconds again, and the alerts file keeps it from
# raising an alert twice
SAVE_EVERY_S = 1.0


@dataclass
class Metrics:
    """Counters for the Prometheus endpoint (text exposition format 0.0.4)."""

    alerts: dict[tuple[str, str], int] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    last_alert: float = 0.0
    lag_seconds: float = 0.0
    lag_bytes: int = 0
    open_rooms: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def render(self) -> str:
        def lbl(v: str) -> str:
            return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

        with self.lock:
            out = [
                "# HELP kvf_watch_alerts_total Alerts raised, by kind and node.",
                "# TYPE kvf_watch_alerts_total counter",
            ]
            out += [
                f'kvf_watch_alerts_total{{kind="{lbl(k)}",node="{lbl(n)}"}} {c}'
                for (k, n), c in sorted(self.alerts.items())
            ]
            out += ["# HELP kvf_watch_lines_total Log lines read, by node.", "# TYPE kvf_watch_lines_total counter"]
            out += [f'kvf_watch_lines_total{{node="{lbl(n)}"}} {c}' for n, c in sorted(self.lines.items())]
            out += [
                "# HELP kvf_watch_last_alert_timestamp_seconds When the last alert was raised (0: none yet).",
                "# TYPE kvf_watch_last_alert_timestamp_seconds gauge",
                f"kvf_watch_last_alert_timestamp_seconds {self.last_alert:.3f}",
                "# HELP kvf_watch_lag_seconds Now minus the log time of the newest line read.",
                "# TYPE kvf_watch_lag_seconds gauge",
                f"kvf_watch_lag_seconds {self.lag_seconds:.3f}",
                "# HELP kvf_watch_lag_bytes Bytes written to the followed files and not read yet.",
                "# TYPE kvf_watch_lag_bytes gauge",
                f"kvf_watch_lag_bytes {self.lag_bytes}",
                "# HELP kvf_watch_open_rooms Rooms the detector holds (in flight, not yet forgotten).",
                "# TYPE kvf_watch_open_rooms gauge",
                f"kvf_watch_open_rooms {self.open_rooms}",
            ]
        return "\n".join(out) + "\n"


def serve_metrics(metrics: Metrics, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:  # no access log on stderr
            return

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Webhook:
    """POSTs each alert as JSON from a background thread: a slow endpoint never stalls the watch."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.q: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=10_000)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def send(self, alert: dict[str, Any]) -> None:
        try:
            self.q.put_nowait(alert)
        except queue.Full:
            print("watch: webhook queue full; alert kept in the alerts output only", file=sys.stderr)

    def _run(self) -> None:
        while (alert := self.q.get()) is not None:
            req = urllib.request.Request(
                self.url, json.dumps(alert).encode(), {"Content-Type": "application/json"}, method="POST"
            )
            try:
                urllib.request.urlopen(req, timeout=10).close()  # noqa: S310 (the operator's URL)
            except OSError as err:
                print(f"watch: webhook {self.url}: {err}", file=sys.stderr)

    def close(self) -> None:
        self.q.put(None)
        self.thread.join(timeout=5)


def _alerted_in(path: Path | None) -> set[str]:
    """Dedupe keys of the alerts an alerts file already holds (a watcher killed after writing an alert
    and before saving its state must not raise it again)."""
    keys: set[str] = set()
    if path is None or not path.exists():
        return keys
    with path.open("rb") as fh:
        for raw in fh:
            try:
                a = json.loads(raw)
                keys.add(f"{a['kind']}\t{a['room'] if a['room'] is not None else a['node']}")
            except (ValueError, KeyError, TypeError):
                continue
    return keys


class Watch:
    def __init__(
        self,
        root: Path,
        alerts: Path | None = None,
        state: Path | None = None,
        webhook: str | None = None,
        metrics: Metrics | None = None,
        pages: bool = True,
        gateway: Path | None = None,
    ) -> None:
        self.root = root
        self.gateway = GatewayRooms(gateway) if gateway is not None else None
        cfg = load_bundle_config(root) if (root / "bundle.toml").is_file() else None
        tz = cfg.log_timezone if cfg else ZoneInfo("UTC")  # the spec's default zone of text logs
        self.detector = Detector(tz, cfg.log_year if cfg else None)
        self.pages = PageWatch() if pages else None
        self.follower = Follower(root, pages=pages)
        self.alerts_path = alerts
        self.out: IO[str] = alerts.open("a", encoding="utf-8") if alerts else sys.stdout
        self.state_path = state
        self.webhook = Webhook(webhook) if webhook else None
        self.metrics = metrics or Metrics()
        self.count = 0
        self.lines = 0
        self.saved_at = 0.0
        if state and state.exists():
            data = json.loads(state.read_text())
            self.follower.load(data.get("files", {}))
            self.detector.load(data.get("detector", {}))
            if self.pages is not None:
                self.pages.load(data.get("pages", {}))
                self.pages.load_maps(self._maps_path(state))
        seen = _alerted_in(alerts)
        for k in seen:
            self.detector.alerted.setdefault(k, self.detector.clock)
        if self.pages is not None:
            self.pages.alerted |= {k for k in seen if k.startswith("exposure\t")}

    def _emit(self, alert: Alert) -> None:
        alert.detected_at = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        if self.gateway is not None:
            named = self.gateway.name(alert.room)
            alert.gateway_request_id, alert.account_id = named["gateway_request_id"], named["account_id"]
        rec = alert.to_json()
        self.out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self.count += 1
        with self.metrics.lock:
            key = (alert.kind, alert.node)
            self.metrics.alerts[key] = self.metrics.alerts.get(key, 0) + 1
            self.metrics.last_alert = time.time()
        if self.webhook:
            self.webhook.send(rec)

    def poll(self) -> int:
        """Read what was written since the last poll; returns the lines read."""
        n = 0
        per_node: dict[str, int] = {}
        if self.gateway is not None:  # first: the records written by now name the rooms alerted below
            self.gateway.poll()
            for note in self.gateway.notes:
                print(f"watch: {note}", file=sys.stderr)
            self.gateway.notes.clear()
        for f, before, data in self.follower.poll_chunks():
            k = data.count(b"\n")
            n += k
            per_node[f.node] = per_node.get(f.node, 0) + k
            if f.source == "pages":
                if self.pages is not None:
                    for a in self.pages.feed_chunk(f.rel, before, data):
                        self._emit(a)
                continue
            for a in self.detector.feed_chunk(f.node, f.rel, before, data, f.source == "jsonl"):
                self._emit(a)
        self.out.flush()
        for note in self.follower.notes:
            print(f"watch: {note}", file=sys.stderr)
        self.follower.notes.clear()
        self.detector.sweep()
        self.lines += n
        with self.metrics.lock:
            for node, c in per_node.items():
                self.metrics.lines[node] = self.metrics.lines.get(node, 0) + c
            if self.detector.clock:
                self.metrics.lag_seconds = max(0.0, time.time() - self.detector.clock)
            self.metrics.lag_bytes = lag_bytes(self.follower)
            self.metrics.open_rooms = len(self.detector.rooms)
        if n and time.monotonic() - self.saved_at >= SAVE_EVERY_S:
            self.save()
        return n

    def save(self) -> None:
        """The state after this poll's alerts are out (written to a temp file, then renamed)."""
        if self.state_path is None:
            return
        data = {
            "version": STATE_VERSION,
            "files": self.follower.dump(),
            "detector": self.detector.dump(),
            "pages": self.pages.dump() if self.pages is not None else {},
        }
        if self.pages is not None:
            self.pages.save_maps(self._maps_path(self.state_path))
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.state_path)
        self.saved_at = time.monotonic()

    @staticmethod
    def _maps_path(state: Path) -> Path:
        return state.with_name(state.name + ".pages.npz")

    def close(self) -> None:
        self.save()
        self.follower.close()
        if self.webhook:
            self.webhook.close()
        if self.out is not sys.stdout:
            self.out.close()


def run(root: Path, interval: float = 0.2, once: bool = False, idle_exit: float | None = None, **kw: Any) -> Watch:
    """Follow `root` until stopped (Ctrl-C), or, with `once`, read what is there and stop; `idle_exit`:
    stop after that many seconds without a new line (for tests and replays)."""
    w = Watch(root, **kw)
    idle_since = time.monotonic()
    try:
        while True:
            if w.poll():
                idle_since = time.monotonic()
            elif idle_exit is not None and time.monotonic() - idle_since > idle_exit:
                break
            if once:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        w.close()
    return w


__all__ = ["KINDS", "Metrics", "Watch", "run", "serve_metrics"]
