"""Issue #26 end to end, two processes: `forensics simulate --live` writes a cluster's logs over real
time (with log rotation), `forensics watch` follows them, is killed part way and restarted on its state
file: every leak is alerted once, and the time from each deciding line to its alert is printed (median
and maximum; no timing is asserted: the suite shares its machine)."""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from tests.watch.test_watch import _alerts, check_against_truth

SIM = ["--seed", "12", "--requests", "400", "--page-size", "32", "--abort-rate", "0.1"]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "forensics", *args]


def _watch(target: Path, alerts: Path, state: Path) -> subprocess.Popen:
    return subprocess.Popen(
        _cli("watch", str(target), "--alerts", str(alerts), "--state", str(state), "--interval", "0.05",
             "--idle-exit", "4"),
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_live_cluster_watched_killed_and_restarted(tmp_path: Path) -> None:
    out, target = tmp_path / "sim", tmp_path / "live"
    target.mkdir()
    truth = tmp_path / "live_truth.jsonl"
    writer = subprocess.Popen(
        _cli("simulate", str(out), *SIM, "--live", str(target), "--speed", "100", "--rotate-every", "300",
             "--live-truth", str(truth)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (target / "bundle.toml").exists():  # the simulation runs first, then the replay starts
        assert writer.poll() is None, writer.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    alerts, state = tmp_path / "alerts.jsonl", tmp_path / "watch.state"
    watcher = _watch(target, alerts, state)
    # killed once it has alerted (mid-run: the replay goes on), however long a loaded machine takes
    deadline = time.monotonic() + 120
    while not (alerts.exists() and "\n" in alerts.read_text()):  # a whole alert line written
        assert watcher.poll() is None and writer.poll() is None, "the watcher or the replay ended before an alert"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    watcher.send_signal(signal.SIGKILL)  # mid-run, no chance to save
    watcher.wait()
    first = len(_alerts(alerts))
    watcher = _watch(target, alerts, state)
    w_out, w_err = writer.communicate(timeout=120)
    assert writer.returncode == 0, w_err
    _, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    got = _alerts(alerts)
    assert 0 < first < len(got), (first, len(got))  # the kill fell inside the run
    assert any((target / "engine").glob("*/server.log.1"))  # the logs rotated under the watcher
    check_against_truth(out, got)  # every leak alerted, each once (across the kill)
    # detection latency: the deciding line's write to its alert
    written = {}
    for line in truth.read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "decode_stats":
            written[rec["room"]] = rec["written_at"]
    lat = [
        datetime.fromisoformat(a["detected_at"].replace("Z", "+00:00")).timestamp() - written[a["room"]]
        for a in got
        if a["kind"] == "placeholder_signature" and a["room"] in written
    ]
    assert lat
    print(
        f"\nlive detection latency over {len(lat)} alerts: median {statistics.median(lat):.3f} s, max {max(lat):.3f} s"
    )


def test_live_clean_cluster_raises_no_alert(tmp_path: Path) -> None:
    out, target = tmp_path / "sim", tmp_path / "live"
    clean = ["--seed", "6", "--requests", "400", "--prefill-pool", "16384", "--long-rate", "0", "--researcher-rate",
             "0", "--abort-rate", "0"]  # fmt: skip
    done = subprocess.run(
        _cli("simulate", str(out), *clean, "--live", str(target), "--speed", "0"), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    alerts = tmp_path / "alerts.jsonl"
    w = subprocess.run(_cli("watch", str(target), "--alerts", str(alerts), "--once"), capture_output=True, text=True)
    assert w.returncode == 0, w.stderr
    assert _alerts(alerts) == [] and "0 alerts" in w.stderr
