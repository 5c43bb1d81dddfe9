"""`forensics simulate --live`: a simulated bundle's engine logs replayed into a folder over real time
(forensics.simulate.live), checked from the files it wrote, the lines it reported and a concurrent reader."""

from __future__ import annotations

import csv
import json
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from typer.testing import CliRunner

from forensics.cli import app
from forensics.simulate import build_config, simulate
from forensics.simulate.live import TICK, Written, replay

SPEED = 600.0  # the default preset's ~9 min of traffic in about a second
DELAY = 0.2
ROTATE = 40
PAGE = 4096  # the page cache's unit: a write may become visible a page at a time


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("live") / "sim"
    simulate(out, build_config("default", seed=5, requests=150))
    return out


class Reader(threading.Thread):
    """Polls every file under a folder while it is written; keeps what it saw that was not whole lines."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root, self.stop, self.polls = root, threading.Event(), 0
        self.partial: list[tuple[str, int]] = []  # (file name, size seen) of reads ending inside a line

    def run(self) -> None:
        while not self.stop.is_set():
            for f in self.root.glob("*/*/*"):
                try:
                    data = f.read_bytes()
                except FileNotFoundError:  # renamed away between glob and open
                    continue
                if data and not data.endswith(b"\n"):
                    self.partial.append((f.name, len(data)))
            self.polls += 1
            time.sleep(0.001)


class Timed(NamedTuple):
    target: Path
    summary: dict[str, Any]
    written: list[Written]
    reader: Reader


@pytest.fixture(scope="module")
def timed(sim: Path, tmp_path_factory: pytest.TempPathFactory) -> Timed:
    """One replay over real time, with rotation, page events, a truth record and a reader beside it."""
    target = tmp_path_factory.mktemp("timed") / "live"
    target.mkdir()
    written: list[Written] = []
    reader = Reader(target)
    reader.start()
    try:
        summary = replay(
            sim / "bundle",
            target,
            SPEED,
            start_delay=DELAY,
            rotate_every=ROTATE,
            pages=True,
            on_line=written.append,
            truth=sim / "live_truth.jsonl",
        )
    finally:
        reader.stop.set()
        reader.join()
    return Timed(target, summary, written, reader)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _engine_files(bundle: Path, pages: bool = True) -> list[str]:
    rels = [str(p.relative_to(bundle)) for p in sorted((bundle / "engine").glob("*/*")) if p.is_file()]
    return rels + ([str(p.relative_to(bundle)) for p in sorted((bundle / "pages").glob("*.jsonl"))] if pages else [])


def test_at_full_speed_every_file_is_byte_identical(sim: Path, tmp_path: Path) -> None:
    bundle = sim / "bundle"
    s = replay(bundle, tmp_path / "t", 0, start_delay=0, pages=True)
    rels = _engine_files(bundle)
    assert any(r.startswith("pages/") for r in rels) and any(r.endswith("requests.jsonl") for r in rels)
    for rel in rels:
        assert (tmp_path / "t" / rel).read_bytes() == (bundle / rel).read_bytes(), rel
    assert (tmp_path / "t" / "bundle.toml").read_bytes() == (bundle / "bundle.toml").read_bytes()
    assert not list((tmp_path / "t").glob("pages/*.parquet")) and not (tmp_path / "t" / "gateway").exists()
    assert s["files"] == {rel: len(_lines(bundle / rel)) for rel in rels}
    assert s["rotations"] == {}  # no rotate_every: nothing rotates


def test_page_events_only_when_asked(sim: Path, tmp_path: Path) -> None:
    replay(sim / "bundle", tmp_path / "t", 0, start_delay=0)
    assert (tmp_path / "t" / "engine").is_dir() and not (tmp_path / "t" / "pages").exists()


def test_rotation_keeps_the_last_part_and_restarts_line_numbers(sim: Path, timed: Timed) -> None:
    bundle, target, s = sim / "bundle", timed.target, timed.summary
    rotated = 0
    for rel in _engine_files(bundle):
        src = _lines(bundle / rel)
        cur = _lines(target / rel)
        old = target / (rel + ".1")
        if not rel.endswith("server.log"):
            assert cur == src and not old.exists(), rel
            continue
        n_rot = (len(src) - 1) // ROTATE
        assert s["rotations"][rel] == n_rot, rel
        assert len(cur) == len(src) - n_rot * ROTATE, rel
        if n_rot:
            rotated += 1
            parts = _lines(old) + cur
            assert len(_lines(old)) == ROTATE and parts == src[-len(parts) :], rel
        else:
            assert cur == src and not old.exists(), rel
    assert rotated >= 3  # every node's server.log here has more than ROTATE lines
    for w in timed.written:
        if w.file.endswith("server.log"):
            assert w.line == (w.bundle_line - 1) % ROTATE + 1, w
        else:
            assert w.line == w.bundle_line, w


def test_lines_go_in_log_time_order_across_files(sim: Path, timed: Timed) -> None:
    written, s = timed.written, timed.summary
    assert len(written) == s["lines"] and len(written) > 1000
    assert {(w.file, w.bundle_line) for w in written} == {
        (rel, i) for rel in _engine_files(sim / "bundle") for i in range(1, len(_lines(sim / "bundle" / rel)) + 1)
    }
    start, first = s["started_at"], s["first_log_us"]
    startup = [w for w in written if w.log_us is not None and w.log_us < first]
    # the start-up lines (4 a node) first, at once; the traffic after the delay
    assert len(startup) == 4 * 5 and all(w.file.endswith("server.log") for w in startup)
    assert written[: len(startup)] == startup and all(w.written_at < start + DELAY for w in startup)
    traffic = written[len(startup) :]
    # a line of a later log time is never written before one of an earlier (ties: at the same moment)
    by_log = sorted(traffic, key=lambda w: (w.log_us, w.file, w.bundle_line))
    assert all(a.written_at <= b.written_at for a, b in zip(by_log, by_log[1:], strict=False))
    late = []
    for w in traffic:
        assert w.log_us is not None
        due = start + DELAY + (w.log_us - first) / 1e6 / SPEED
        assert w.written_at >= due - TICK - 0.005, w  # never early (a tick, and the two clocks' jitter)
        late.append(w.written_at - due)
    late.sort()
    assert late[len(late) // 2] < 0.25 and late[-1] < 2.0  # loose: a busy CI machine may fall behind a little


def test_the_replay_takes_the_log_span_over_speed(timed: Timed) -> None:
    s = timed.summary
    assert 400 < s["log_span_s"] < 700  # the default preset: 10 minutes of traffic
    expected = DELAY + s["log_span_s"] / SPEED
    assert 0.9 * expected <= s["elapsed_s"] <= expected + 2.0


def test_a_concurrent_reader_sees_only_whole_lines(timed: Timed) -> None:
    """Each line goes in one write call with its newline. Linux copies a write into the page cache a page
    at a time and may show the file grown to a page boundary before the rest is copied: that cut, and no
    other, a reader may see (rarely; a follower holds back an unterminated tail)."""
    reader = timed.reader
    assert reader.polls > 50  # it did read while the files grew
    assert [x for x in reader.partial if x[1] % PAGE] == []


def test_truth_record_gives_each_leaking_rooms_deciding_line(sim: Path, timed: Timed) -> None:
    recs = [json.loads(line) for line in (sim / "live_truth.jsonl").read_text().splitlines()]
    s = timed.summary
    assert len(recs) == s["truth_records"]
    by_key = {(w.file, w.line, w.bundle_line): w for w in timed.written}
    for r in recs:
        w = by_key[(r["file"], r["line"], r["bundle_line"])]  # the record names a line that was written
        assert abs(r["written_at"] - w.written_at) < 1e-5 and r["log_us"] == w.log_us
        assert r["log_ts"] is not None and w.data.startswith(b"[" + r["log_ts"].encode())
        if r["room"] is not None:
            assert f"bootstrap_room={r['room']}".encode() in w.data
    kinds = {r["kind"] for r in recs}
    assert {"startup", "prefill_stats", "decode_stats", "over_length"} <= kinds
    with (sim / "truth" / "responses.csv").open(newline="") as fh:
        truth = list(csv.DictReader(fh))
    decided = {}
    for r in recs:
        if r["kind"] == "decode_stats":
            assert r["room"] not in decided  # one per room
            decided[r["room"]] = r
    leaking = [int(t["room"]) for t in truth if t["exposed"] == "1" and t["status"] == "200"]
    assert leaking  # the seed leaks
    for room in leaking:
        r = decided[room]
        assert (
            r["file"].startswith("engine/decode-")
            and b"type=decode" in by_key[(r["file"], r["line"], r["bundle_line"])].data
        )
    aborted = {int(t["room"]) for t in truth if t["aborted"] == "1"}
    assert aborted <= {r["room"] for r in recs if r["kind"] == "transfer_failed"}


def test_a_target_already_written_is_refused(sim: Path, tmp_path: Path) -> None:
    replay(sim / "bundle", tmp_path / "t", 0, start_delay=0)
    with pytest.raises(ValueError, match="already holds"):
        replay(sim / "bundle", tmp_path / "t", 0, start_delay=0)
    with pytest.raises(ValueError, match="speed"):
        replay(sim / "bundle", tmp_path / "u", -1)
    with pytest.raises(ValueError, match="rotate_every"):
        replay(sim / "bundle", tmp_path / "u", 0, rotate_every=0)


def test_cli_simulates_then_replays_and_reuses(tmp_path: Path) -> None:
    runner = CliRunner()
    out, live = tmp_path / "sim", tmp_path / "live"
    args = ["simulate", str(out), "--requests", "60", "--live", str(live), "--speed", "0", "--start-delay", "0"]
    res = runner.invoke(app, [*args, "--rotate-every", "20"])
    assert res.exit_code == 0, res.output
    assert "replayed" in res.output and (live / "engine" / "decode-0" / "server.log.1").exists()
    assert (out / "truth" / "live.jsonl").stat().st_size > 0
    for rel in _engine_files(out / "bundle", pages=False):
        if not rel.endswith("server.log"):
            assert (live / rel).read_bytes() == (out / "bundle" / rel).read_bytes()
    res = runner.invoke(app, [*args, "--reuse"])  # the same TARGET again: refused before anything is done
    assert res.exit_code != 0 and "already holds" in str(res.exception)
    again = ["simulate", str(out), "--live", str(tmp_path / "again"), "--speed", "0", "--reuse"]
    res = runner.invoke(app, [*again, "--live-truth", str(tmp_path / "t.jsonl")])
    assert res.exit_code == 0, res.output
    assert "wrote" not in res.output and (tmp_path / "t.jsonl").exists()
    res = runner.invoke(app, ["simulate", str(out), "--reuse"])
    assert res.exit_code != 0 and "--live" in str(res.exception)
