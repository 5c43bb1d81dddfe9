"""Issue #26: forensics watch, against the simulator's truth: every leak alerted, nothing on a clean
cluster, rotation and truncation followed, a restart losing and repeating nothing, the metrics served."""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from forensics.watch import Metrics, Watch, run, serve_metrics
from forensics.watch.follow import Follower

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "bundle"
DARK = {"prefill_count": 1, "decode_count": 3, "no_telemetry": "decode-1", "abort_rate": 0.1}
CASES = {
    "seed12-p32-dark": {"seed": 12, "requests": 600, "page_size": 32, **DARK},
    "seed4-p16": {"seed": 4, "requests": 600},
}  # fmt: skip


def _alerts(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _truth(out: Path) -> tuple[list[dict], list[dict]]:
    responses = list(csv.DictReader((out / "truth" / "responses.csv").open()))
    exposures = list(csv.DictReader((out / "truth" / "exposures.csv").open()))
    return responses, exposures


def check_against_truth(out: Path, alerts: list[dict]) -> None:
    """Every leaking response alerted, and no placeholder alert where the truth has no placeholder:
    - a response decoded over a placeholder: its room's placeholder_signature (or exposure) alert;
    - a response a late transfer wrote into: a late_transfer alert for that transfer's room, on its node;
    - every prefill node whose pool is smaller than the context: a pool_smaller_than_context alert."""
    responses, exposures = _truth(out)
    by_id = {r["request_id"]: r for r in responses}
    rooms = {k: {str(a["room"]) for a in alerts if a["kind"] == k} for k in ("placeholder_signature", "exposure",
                                                                               "late_transfer")}  # fmt: skip
    leaking = [r for r in responses if r["exposed"] == "1"]
    assert leaking, "the incident must leak for the test to mean anything"
    for r in responses:
        if r["placeholder"] == "1" and r["status"] == "200":
            assert r["room"] in rooms["placeholder_signature"] | rooms["exposure"], r
    for e in exposures:
        if e["kind"] == "foreign_write":
            src = by_id[e["source_request_id"]]
            assert src["room"] in rooms["late_transfer"], e
        else:
            rec = by_id[e["recipient_request_id"]]
            assert rec["room"] in rooms["placeholder_signature"] | rooms["exposure"], e
    placeholders = {r["room"] for r in responses if r["placeholder"] == "1"}
    assert rooms["placeholder_signature"] <= placeholders  # never on a request with its own KV
    aborted = {r["room"] for r in responses if r["aborted"] == "1"}
    assert rooms["late_transfer"] <= aborted
    summary = json.loads((out / "truth" / "summary.json").read_text())
    assert summary  # the truth was written
    for a in alerts:
        assert a["evidence"] and all({"file", "line", "text"} <= set(ev) for ev in a["evidence"]), a
        assert a["detected_at"].endswith("Z")
    # deduplicated per room
    keys = [(a["kind"], a["room"] if a["room"] is not None else a["node"]) for a in alerts]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_leak_is_alerted(tmp_path: Path, case: str) -> None:
    simulate(tmp_path / "sim", build_config("default", **CASES[case]))
    alerts = tmp_path / "alerts.jsonl"
    run(tmp_path / "sim" / "bundle", once=True, alerts=alerts)
    got = _alerts(alerts)
    check_against_truth(tmp_path / "sim", got)
    # the default cluster's prefill pool (4096 tokens) is smaller than its context (8192)
    assert any(a["kind"] == "pool_smaller_than_context" and a["node"].startswith("prefill") for a in got)


def test_a_clean_cluster_raises_no_alert(tmp_path: Path) -> None:
    """Pools that hold the whole context and no aborts: nothing to alert on."""
    cfg = build_config(
        "default", seed=6, requests=600, prefill_pool=16384, long_rate=0.0, researcher_rate=0.0, abort_rate=0.0
    )
    simulate(tmp_path / "sim", cfg)
    responses, _ = _truth(tmp_path / "sim")
    assert not any(r["exposed"] == "1" for r in responses)
    alerts = tmp_path / "alerts.jsonl"
    w = run(tmp_path / "sim" / "bundle", once=True, alerts=alerts)
    assert w.lines > 1000 and _alerts(alerts) == []


def test_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """The logs written in three parts; the watcher stopped cleanly after the first, killed (no state
    saved) after the second: the alerts are those of one pass over the whole, each once."""
    simulate(tmp_path / "sim", build_config("default", seed=12, requests=400, **DARK))
    whole = tmp_path / "whole.jsonl"
    run(tmp_path / "sim" / "bundle", once=True, alerts=whole)
    live = tmp_path / "live"
    shutil.copytree(tmp_path / "sim" / "bundle", live)
    parts: dict[Path, list[bytes]] = {}
    for p in sorted((live / "engine").rglob("*")):
        if p.is_file():
            parts[p] = p.read_bytes().splitlines(keepends=True)
            p.write_bytes(b"")
    alerts, state = tmp_path / "alerts.jsonl", tmp_path / "watch.state"

    def write_part(i: int) -> None:
        for p, lines in parts.items():
            n = len(lines)
            with p.open("ab") as fh:
                fh.write(b"".join(lines[i * n // 3 : (i + 1) * n // 3]))

    write_part(0)
    run(live, once=True, alerts=alerts, state=state)  # a clean stop: state saved
    write_part(1)
    w = Watch(live, alerts=alerts, state=state)
    w.saved_at = float("inf")  # never saves again: then killed
    w.poll()
    w.out.flush()
    del w
    write_part(2)
    run(live, once=True, alerts=alerts, state=state)
    got = _alerts(alerts)
    want = _alerts(whole)
    key = lambda a: (a["kind"], a["node"], a["room"] or 0)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want)), set(map(key, got)) ^ set(map(key, want))
    assert len(got) == len(want)


def test_rotation_truncation_and_new_nodes(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    log = root / "engine" / "decode-0" / "server.log"
    log.parent.mkdir(parents=True)
    f = Follower(root)

    def lines() -> list[tuple[str, int, bytes]]:
        return [(x.rel, n, raw) for x, n, raw in f.poll()]

    log.write_bytes(b"a1\na2\na")  # the last line is still being written
    assert lines() == [("engine/decode-0/server.log", 1, b"a1\n"), ("engine/decode-0/server.log", 2, b"a2\n")]
    with log.open("ab") as fh:
        fh.write(b"3\na4\n")
    os.rename(log, log.with_name("server.log.1"))  # logrotate: the old file moves away, a new one starts
    with log.with_name("server.log.1").open("ab") as fh:
        fh.write(b"a5\n")  # the server wrote once more before it reopened
    log.write_bytes(b"b1\n")
    other = root / "engine" / "prefill-0" / "server.log"  # a node that appears later
    other.parent.mkdir()
    other.write_bytes(b"p1\n")
    got = lines()
    assert [(r, n, x) for r, n, x in got if r.startswith("engine/decode")] == [
        ("engine/decode-0/server.log", 3, b"a3\n"),
        ("engine/decode-0/server.log", 4, b"a4\n"),
        ("engine/decode-0/server.log", 5, b"a5\n"),
        ("engine/decode-0/server.log", 1, b"b1\n"),
    ]
    assert ("engine/prefill-0/server.log", 1, b"p1\n") in got
    log.write_bytes(b"")  # copytruncate: the same file, cut shorter than what was read
    assert lines() == []
    log.write_bytes(b"c1\n")
    assert lines() == [("engine/decode-0/server.log", 1, b"c1\n")]
    assert any("rotated" in n for n in f.notes) and any("truncated" in n for n in f.notes)
    f.close()


def test_metrics_endpoint(tmp_path: Path) -> None:
    simulate(tmp_path / "sim", build_config("default", seed=12, requests=300, **DARK))
    metrics = Metrics()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve_metrics(metrics, port)
    try:
        w = run(tmp_path / "sim" / "bundle", once=True, alerts=tmp_path / "a.jsonl", metrics=metrics)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
    counted = {}
    for line in body.splitlines():
        if line.startswith("kvf_watch_alerts_total{"):
            counted[line.split("{")[1].split("}")[0]] = int(line.rsplit(" ", 1)[1])
    alerts = _alerts(tmp_path / "a.jsonl")
    assert sum(counted.values()) == len(alerts) == w.count > 0
    for a in alerts:
        assert f'kind="{a["kind"]}",node="{a["node"]}"' in counted
    assert "# TYPE kvf_watch_lag_seconds gauge" in body and "kvf_watch_open_rooms" in body
    assert "kvf_watch_lines_total" in body


def test_webhook_receives_each_alert(tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    got: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    simulate(tmp_path / "sim", build_config("default", seed=12, requests=300, **DARK))
    try:
        run(tmp_path / "sim" / "bundle", once=True, alerts=tmp_path / "a.jsonl",
            webhook=f"http://127.0.0.1:{server.server_address[1]}/hook")  # fmt: skip
    finally:
        server.shutdown()
    assert got and got == _alerts(tmp_path / "a.jsonl")


def _watch_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "forensics", "watch", *args], capture_output=True, text=True, timeout=300
    )


def test_once_on_a_folder_without_engine_logs_exits_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "pages").mkdir()
    proc = _watch_cli(str(tmp_path), "--once")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"Error: {tmp_path}: no engine/ folder, nothing to watch (expected engine/<node>/*.log, as in a bundle)"
    ]
    assert "lines read" not in proc.stderr and proc.stdout == ""


def test_files_watch_does_not_read_are_named_once_with_why(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "b")
    node = tmp_path / "b" / "engine" / "decode-0"
    (node / "notes.txt").write_text("operator notes\n")
    shutil.copy(next(node.glob("*.log")), node / (next(node.glob("*.log")).name + ".1"))
    w = Watch(tmp_path / "b", alerts=tmp_path / "a.jsonl")
    w.poll()
    w.poll()  # a second poll names nothing again
    notes = w.follower.ignored
    w.close()
    parquet = sorted(f"pages/{p.name}" for p in (SAMPLE / "pages").glob("*.parquet"))
    assert parquet and set(parquet) <= notes
    assert "pages/prefill-1.jsonl" not in notes  # JSONL page events are followed
    assert {"engine/decode-0/notes.txt", "gateway/"} <= notes
    assert not any(n.endswith(".log") for n in notes)
    proc = _watch_cli(str(tmp_path / "b"), "--once", "--alerts", str(tmp_path / "cli.jsonl"))
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("watch: ignored ")]
    assert len(lines) == len(set(lines)) == len(notes)
    said = {x.removeprefix("watch: ignored ").split(": ", 1)[0]: x.split(": ", 2)[2] for x in lines}
    assert "JSONL page events" in said[parquet[0]]
    assert "not a .log or .jsonl" in said["engine/decode-0/notes.txt"]
    rotated = next(n for n in said if n.endswith(".log.1"))
    assert "rotated" in said[rotated]


def test_gateway_names_the_request_and_account_of_each_alerted_room(tmp_path: Path) -> None:
    import gzip

    simulate(tmp_path / "sim", build_config("default", seed=3, requests=300))
    bundle = tmp_path / "sim" / "bundle"
    # the spec's JSONL records of the bundle in one file (its CSV and Parquet parts left out: their
    # rooms are named by no record, and their alerts must say so), and a line that is not JSON
    records = (bundle / "gateway" / "gw-a.jsonl").read_bytes() + gzip.decompress(
        (bundle / "gateway" / "gw-b.jsonl.gz").read_bytes()
    )
    gateway = tmp_path / "gateway.jsonl"
    gateway.write_bytes(records + b"{not json\n")
    bad_line = records.count(b"\n") + 1
    named_rooms = {json.loads(x)["bootstrap_room"] for x in records.splitlines()} - {None}
    proc = _watch_cli(str(bundle), "--once", "--gateway", str(gateway), "--alerts", str(tmp_path / "a.jsonl"))
    assert proc.returncode == 0, proc.stderr
    assert f"watch: gateway {gateway} line {bad_line}: not JSON; skipped" in proc.stderr.splitlines()
    truth = {int(r["room"]): r for r in _truth(tmp_path / "sim")[0]}
    alerts = [a for a in _alerts(tmp_path / "a.jsonl") if a["room"] is not None]
    named = [a for a in alerts if a["room"] in named_rooms]
    assert named and len(named) < len(alerts)  # both cases occur
    for a in alerts:
        want = truth[a["room"]]
        if a["room"] in named_rooms:
            assert (a["gateway_request_id"], a["account_id"]) == (want["request_id"], want["account_id"]), a
        else:
            assert (a["gateway_request_id"], a["account_id"]) == (None, None), a
    missing = _watch_cli(str(bundle), "--once", "--gateway", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and f"--gateway {tmp_path / 'nope.jsonl'}: no such file" in missing.stderr


def test_gateway_record_is_read_only_once_whole(tmp_path: Path) -> None:
    from forensics.watch.gateway import GatewayRooms

    path = tmp_path / "g.jsonl"
    path.write_bytes(b'{"request_id": "r1", "account_id": "a1", "bootstrap_room": 7}\n{"request_id": "r2", "acc')
    g = GatewayRooms(path)
    assert g.poll() == 1 and g.name(7) == {"gateway_request_id": "r1", "account_id": "a1"}
    assert g.name(8) == {"gateway_request_id": None, "account_id": None}
    with path.open("ab") as fh:
        fh.write(b'ount_id": "a2", "bootstrap_room": "8"}\n')
    assert g.poll() == 1 and g.name(8) == {"gateway_request_id": "r2", "account_id": "a2"}
    assert g.poll() == 0 and g.notes == []
