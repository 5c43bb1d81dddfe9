# ruff: noqa: E501  (log lines as they are written)
"""The watcher's bulk chunk reader (forensics.watch.chunks, issue #36) against the per-line path it stands
for (KVF_WATCH_READER=python): the same candidate lines, line numbers and rows (the fields the detector
reads) on simulated bundles, a simulate --scale bundle, the real-line corpus and hand-made odd lines, whole
and cut into chunks anywhere between lines; the same alerts on simulated bundles; and the detector reads
no field of a request row but chunks.ROW_KEYS."""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from forensics.engines.facts import EngineRows
from forensics.engines.sglang.reader import parse_request_line, parse_text_line
from forensics.simulate import build_config, simulate
from forensics.watch import chunks, run
from forensics.watch.detector import JSON_LITERALS, JSON_MARKER_RE, TEXT_LITERALS, TEXT_MARKERS, Detector

ROOT = Path(__file__).resolve().parents[2]
TZ = ZoneInfo("UTC")
P = "[2026-08-29 10:00:00.589 TP0] "
TS = "Req Time Stats(rid=abc, bootstrap_room=5, input len=10, output len=2, type=decode): "
TAIL = "prealloc_duration=0.0009, transfer_duration=0.0301, queue_duration=0.0004, forward_duration=0.0983, start_time=1787997600.460"
ODD_TEXT = [
    P + TS + TAIL,
    TS + TAIL,  # no record prefix
    "[2026-08-29 10:00:01 DP0 TP1] Req Time Stats(rid='q', bootstrap_room=None, input len=1, output len=1, type=prefill): bootstrap_duration=1.5ms, queue_duration=2ms, forward_duration=3, forward_duration=4",
    "[2026-08-29 10:00:02.123456 TP0] Req Time Stats(rid=x, input len=3, output len=0, type=prefill)",
    "[2026-08-29 10:00:03 TP0] Req Time Stats(rid=caf\u00e9, bootstrap_room=6, input len=3, output len=1, type=decode): forward_duration=1",
    "[2026-08-29 10:00:03 TP0] Req Time Stats(rid=a\x00b, bootstrap_room=7, input len=3, output len=1, type=decode): forward_duration=1",
    "[2026-08-29 10:00:04 TP0] Req Time Stats(rid=r, bootstrap_room=99999999999999999999, input len=5, output len=1, type=decode)",
    "[2026-08-29 10:00:04 TP0] Req Time Stats(rid=r, bootstrap_room=9223372036854775807, input len=5, output len=1, type=decode)",
    "[2026-08-29 10:00:04 TP0] Req Time Stats(rid=r, bootstrap_room=-9223372036854775808, input len=5, output len=1, type=decode)",
    "[2026-08-29 10:00:04 TP0] Req Time Stats(rid=r, bootstrap_room=-5, input len=99999999999999999999, output len=1, type=decode)",
    "[2026-13-45 10:00:05 TP0] " + TS + TAIL,
    "[0000-01-01 00:00:00 TP0] " + TS + TAIL,
    "[2026-08-29 10:00:06 TP0] " + TS + "queue_duration=0.1, max_total_num_tokens=5, forward_duration=0.2",
    "[2026-08-29 10:00:06 TP0] " + TS + "queue_duration=-0.1, forward_duration=0.2",
    "[2026-08-29 10:00:06 TP0] " + TS + "forward_duration=0.2 ",
    "[2026-08-29 10:00:07 TP0] "
    + TS
    + "forward_duration=0.2 Req Time Stats(rid=b, bootstrap_room=8, input len=1, output len=1, type=decode)",
    "[2026-08-29 10:00:08 TP0] ReqTimeStats(rid=z1, bootstrap_room=9, input_len=7, cached_input_len=0, output_len=3, attempts=1, type=decode): entry_time=1787997600.1, queue_duration=0.5ms, forward_duration=12.5ms",
    "[2026-08-29 10:00:09 TP0] Req Time Stats(rid=z2, bootstrap_room=10, input len=7, output len=3, type=decode): prealloc_queue_duration(12.34ms) = bootstrap(1.00ms) + alloc_wait(11.34ms); transfer_duration=0.5ms, forward_duration=1ms",
    "Receive: obj=GenerateReqInput(rid='p', text='Req Time Stats(rid=evil, bootstrap_room=1, input len=1, output len=1, type=prefill)', bootstrap_room=11)",
    "[2026-08-29 10:00:10 TP0] Input length (9000 tokens) exceeds the maximum allowed length (4090 tokens). Use a shorter input or enable --allow-auto-truncate., self.rid='ov1'",
    "[2026-08-29 10:00:10 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='f1' decode_req.req.bootstrap_room=12 with exception KVTransferError(bootstrap_room=12): Aborted by AbortReq.",
    "[2026-08-29 10:00:11 TP0] KV Cache is allocated. #tokens: 32768, KV size: 2.28 GB",
    "[2026-08-29 10:00:11 TP0] max_total_num_tokens=32768, chunked_prefill_size=8192, context_len=8192",
    "[2026-08-29 10:00:11 TP0] server_args=ServerArgs(model_path='m', context_length=8192, page_size=16, tp_size=1, disaggregation_mode='decode')",
    "[2026-08-29 10:00:12 TP0] Use Sliding window memory pool. full_layer_tokens=1000, swa_layer_tokens=4000",
    "[2026-08-29 10:00:12 TP0] Decode batch, #running-req: 3, #token: 2600, token usage: 0.05, cuda graph: True, gen throughput (token/s): 30.1, #queue-req: 0",
    "[2026-08-29 10:00:13 TP0] nothing to read here",
    "",
]
ROOM = '"bootstrap_room": 5, "bootstrap_port": 8998'
META = '"id": "m1", "finish_reason": {"type": "stop", "matched": 151329}, "prompt_tokens": 12, "completion_tokens": 3, "e2e_latency": 0.1'


def _fin(rid: str = "j1", obj: str = ROOM, meta: str = META, ts: str = "2026-08-29T10:00:00.589673") -> str:
    return f'{{"timestamp": "{ts}", "event": "request.finished", "rid": "{rid}", "obj": {{{obj}}}, "out": {{"meta_info": {{{meta}}}}}}}'


ODD_JSON = [
    _fin(),
    _fin(obj='"rid": "j1", "sampling_params": {"temperature": 0.7, "stop": ["a", "b"], "n": null}, ' + ROOM),
    _fin(obj='"sampling_params": {"bootstrap_room": 3}'),
    _fin(obj='"bootstrap_room": 3, "bootstrap_room": 4'),
    _fin(obj='"bootstrap_room": null'),
    _fin(obj=""),
    _fin(obj='"bootstrap_room": true'),
    _fin(obj='"bootstrap_room": 1.0'),
    _fin(obj='"bootstrap_room": -0'),
    _fin(obj='"bootstrap_room": 9223372036854775808'),
    _fin(obj='"bootstrap_room": 9223372036854775807'),
    _fin(obj='"bootstrap_room": -9223372036854775808'),
    _fin(rid=""),
    _fin(meta='"id": "m1"'),
    _fin(meta='"prompt_tokens": null'),
    _fin(meta='"prompt_tokens": true'),
    _fin(meta='"prompt_tokens": 5.0'),
    _fin(meta='"prompt_tokens": 1e3'),
    _fin(meta='"prompt_tokens": 9223372036854775808'),
    _fin(meta='"prompt_tokens": 1, "prompt_tokens": 2'),
    _fin(meta='"finish_reason": null, "prompt_tokens": 1'),
    _fin(meta='"finish_reason": "abort", "prompt_tokens": 1'),
    _fin(meta='"finish_reason": {"type": "abort", "message": "Aborted by AbortReq."}, "prompt_tokens": 1'),
    _fin(meta='"finish_reason": {"type": "stop", "matched": [1, 2], "a": -0, "b": 1.50}, "prompt_tokens": 1'),
    _fin(meta='"finish_reason": ["abort"], "prompt_tokens": 1'),
    _fin(meta='"finish_reason": 7, "prompt_tokens": 1'),
    _fin(meta='"finish_reason": 1e999, "prompt_tokens": 1'),
    _fin(meta='"finish_reason": {"type": "a", "type": "abort"}, "prompt_tokens": 1'),
    _fin(meta='"finish_reason": {}, "prompt_tokens": 1'),
    _fin(meta='"finish_reason": "stop", "finish_reason": "abort", "prompt_tokens": 1'),
    _fin(meta='"x": {"finish_reason": "abort"}, "prompt_tokens": 1'),
    _fin(meta='"x": {"prompt_tokens": 3}, "prompt_tokens": 1'),
    _fin(meta='"x": {"prompt_tokens": 3}'),
    _fin(ts="2026-08-29T10:00:00+02:00"),
    _fin(ts="2026-08-29T10:00:00Z"),
    _fin(ts="2026-08-29 10:00:00"),
    _fin(ts="nope"),
    _fin(ts="2026-13-01T00:00:00"),
    _fin(ts="0001-01-01T00:00:00+05:00"),
    _fin(rid="request.finished"),
    _fin(rid="caf\u00e9"),
    _fin(rid='a\\"b'),
    _fin(obj='"bootstrap_room": NaN'),
    _fin(meta=META + ', "x": NaN'),
    _fin(meta=META + ', "deep": {"a": {"b": 1}}'),
    _fin(obj=ROOM + ', "text": "q\\u00e9"'),
    _fin() + " ",
    _fin().replace('"event": "request.finished", ', "") + ', "event": "request.finished"}',
    _fin().replace(', "out": {"meta_info"', ', "out": {"text": "hi", "meta_info"'),
    _fin().replace(", ", ","),
    _fin(meta='"prompt_tokens": 01'),
    '{"timestamp": "2026-08-29T10:00:00", "event": "request.received", "rid": "r1", "obj": {"text": "\\"request.finished\\"", "bootstrap_room": 1}}',
    '{"timestamp": "2026-08-29T10:00:00", "event": "request.received", "rid": "r2", "obj": {"text": "x", "y": "request.finished", "bootstrap_room": 2}}',
    '{"event": "request.finished"',
    "",
]


def _typed_rows(t: chunks.Typed) -> tuple[Any, ...]:
    lineno, raw, requests, config, res = t
    return lineno, raw, [{k: r.get(k) for k in chunks.ROW_KEYS} for r in requests], config, res


def _both(data: bytes, jsonl: bool, tz: ZoneInfo = TZ, cuts: int = 0, seed: int = 0) -> tuple[list, list]:
    """(per-line, bulk) candidate lines of `data`, the bulk reader handed the data in `cuts` + 1 chunks."""
    marker, lits = (JSON_MARKER_RE, JSON_LITERALS) if jsonl else (TEXT_MARKERS, TEXT_LITERALS)
    ref = [_typed_rows(t) for t in chunks.per_line(data, 0, marker, jsonl, tz)]
    lines = data.splitlines(keepends=True)
    at = sorted(random.Random(seed).sample(range(1, len(lines)), min(cuts, len(lines) - 1))) if len(lines) > 1 else []
    got: list[tuple[Any, ...]] = []
    for lo, hi in zip([0, *at], [*at, len(lines)], strict=True):
        got += [_typed_rows(t) for t in chunks.typed(b"".join(lines[lo:hi]), lo, jsonl, tz, lits)]
    return ref, got


def _assert_same(data: bytes, jsonl: bool, tz: ZoneInfo = TZ, cuts: int = 0) -> list:
    ref, got = _both(data, jsonl, tz, cuts)
    assert len(got) == len(ref)
    for a, b in zip(ref, got, strict=True):
        assert a == b
    return got


def _files(bundle: Path) -> list[tuple[Path, bool]]:
    """The engine logs of a bundle, rotated parts included, compressed ones left out: (path, JSON lines)."""
    out = []
    for p in sorted((bundle / "engine").rglob("*")):
        if p.is_file() and (".log" in p.name or ".jsonl" in p.name) and p.suffix not in (".gz", ".zst"):
            out.append((p, ".jsonl" in p.name))
    return out


@pytest.mark.parametrize("tz", ["UTC", "America/New_York"])
def test_odd_lines_give_the_per_line_rows(tz: str) -> None:
    zone = ZoneInfo(tz)
    text = ("\n".join(ODD_TEXT) + "\n").encode()
    got = _assert_same(text, False, zone)
    assert len(got) >= 20
    crlf = ("\r\n".join(ODD_TEXT) + "\r\n").encode()
    _assert_same(crlf, False, zone)
    _assert_same(("\n".join(ODD_JSON) + "\n").encode(), True, zone)
    # every line on its own, so that no other line's literal changes the path it takes
    for line in ODD_TEXT:
        _assert_same((line + "\n").encode(), False, zone)
    for line in ODD_JSON:
        _assert_same((line + "\n").encode(), True, zone)


def test_the_strict_patterns_take_the_lines_they_are_meant_for() -> None:
    """Not vacuous: the common shapes go through the strict patterns, the odd ones do not."""
    taken = [
        bool(chunks.TIME_STATS_LINE.fullmatch(x.encode())) and x.isascii() and "\x00" not in x for x in ODD_TEXT[:4]
    ]
    assert all(taken)
    assert chunks.FINISHED_LINE.fullmatch(_fin().encode())
    assert chunks.FINISHED_LINE.fullmatch(ODD_JSON[1].encode())
    for line in (ODD_TEXT[17], ODD_TEXT[18], ODD_JSON[-6], ODD_JSON[-8]):
        assert not (chunks.TIME_STATS_LINE.fullmatch(line.encode()) or chunks.FINISHED_LINE.fullmatch(line.encode()))


def test_the_time_stats_pattern_admits_what_the_shape_bulk_pattern_admits() -> None:
    """chunks.TIME_STATS_LINE is SHAPES['time_stats'].bulk (behind PREFIX_BULK) written for Python's engine."""
    import re

    from forensics.engines.sglang import PREFIX, SHAPES

    bulk = re.compile(SHAPES["time_stats"].bulk or "")
    msgs = [*ODD_TEXT, *(x.replace("\x00", "") for x in ODD_TEXT)]
    for sim in sorted((ROOT / "sample_data" / "bundle" / "engine").rglob("*.log")):
        msgs += sim.read_text().splitlines()
    for text in msgs:
        m = PREFIX.match(text)
        msg = m["msg"] if m else text
        ours = chunks.TIME_STATS_LINE.fullmatch(text.encode())
        if ours is not None and text.isascii():
            assert bulk.match(msg), text
        if bulk.match(msg) and text.isascii() and (m or not text.startswith("[")):
            assert ours is not None, text


SIM_CASES: dict[str, dict[str, Any]] = {
    "seed3-default": dict(seed=3, requests=300),
    "seed21-dark-aborts": dict(seed=21, requests=300, page_size=8, abort_rate=0.2, dark_aborts=True, no_telemetry="decode-1"),
    "seed22-skew-0.4.9-batch": dict(seed=22, requests=300, page_size=64, clock_skew_ms=3000, release="0.4.9", batch_lines="0.4.9"),
    "seed23-smg-batch": dict(seed=23, requests=300, page_size=16, gateway_format="smg", batch_lines="0.5.23"),
}  # fmt: skip


def _simulated(tmp: Path, case: str) -> Path:
    simulate(tmp / "sim", build_config("default", **SIM_CASES[case]))
    return tmp / "sim" / "bundle"


def _alerts(bundle: Path, out: Path, reader: str, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    monkeypatch.setattr(chunks, "READER", reader)
    run(bundle, once=True, alerts=out)
    got = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    for a in got:
        a.pop("detected_at")
    return got


@pytest.mark.parametrize("case", sorted(SIM_CASES))
def test_simulated_bundles_rows_and_alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    bundle = _simulated(tmp_path, case)
    for path, jsonl in _files(bundle):
        _assert_same(path.read_bytes(), jsonl, cuts=7)
    ref = _alerts(bundle, tmp_path / "python.jsonl", "python", monkeypatch)
    got = _alerts(bundle, tmp_path / "bulk.jsonl", "bulk", monkeypatch)
    assert ref, "the incident must raise alerts for the comparison to mean anything"
    assert got == ref


def test_log_timezone_and_logs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text logs read in the bundle's zone (not UTC), no page events: the same alerts."""
    bundle = _simulated(tmp_path, "seed3-default")
    shutil.rmtree(bundle / "pages")
    toml = bundle / "bundle.toml"
    toml.write_text(toml.read_text().replace('log_timezone = "UTC"', 'log_timezone = "Europe/Berlin"'))
    ref = _alerts(bundle, tmp_path / "python.jsonl", "python", monkeypatch)
    got = _alerts(bundle, tmp_path / "bulk.jsonl", "bulk", monkeypatch)
    assert ref and got == ref
    assert any(a["kind"] == "placeholder_signature" for a in got)


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="simulate --scale needs numba")
def test_scale_bundle_rows(tmp_path: Path) -> None:
    """Text --log-requests lines (Receive, Finish), JSON records and Req Time Stats as simulate --scale
    writes them, rotated: the same rows, file by file."""
    from typer.testing import CliRunner

    from forensics.cli import app

    out = tmp_path / "g"
    res = CliRunner().invoke(app, ["simulate", str(out), "--scale", "--requests", "800", "--seed", "2",
                                   "--release", "0.5.23", "--rotation", "numbered"])  # fmt: skip
    assert res.exit_code == 0, res.output
    n = 0
    for path, jsonl in _files(out / "bundle"):
        n += len(_assert_same(path.read_bytes(), jsonl, cuts=3))
    assert n > 1000


def test_real_line_corpus_rows() -> None:
    for path in sorted((ROOT / "tests" / "data" / "sglang_lines").glob("*.log")):
        _assert_same(path.read_bytes(), False)
    for path in sorted((ROOT / "sample_data" / "bundle" / "engine").rglob("*")):
        if path.is_file():
            _assert_same(path.read_bytes(), path.suffix == ".jsonl", cuts=5)


class _Recording(dict):
    """A request row that notes which fields are read."""

    read: set[str] = set()

    def __getitem__(self, k: str) -> Any:
        _Recording.read.add(k)
        return super().__getitem__(k)

    def get(self, k: str, default: Any = None) -> Any:
        _Recording.read.add(k)
        return super().get(k, default)


def test_the_detector_reads_no_other_field_of_a_request_row(tmp_path: Path) -> None:
    bundle = _simulated(tmp_path, "seed21-dark-aborts")
    d = Detector(TZ)
    _Recording.read = set()
    n = 0
    for path, jsonl in _files(bundle):
        for i, raw in enumerate(path.read_bytes().splitlines(keepends=True), start=1):
            rows = EngineRows()
            if (parse_request_line if jsonl else parse_text_line)(raw, "n", 0, i, TZ, rows):
                res = rows.lines[0].get("ts_resolution_ms") if rows.lines else None
                n += len(
                    d.apply(
                        path.parent.name, path.name, i, raw, [_Recording(r) for r in rows.requests], rows.config, res
                    )
                )
    assert n and _Recording.read and _Recording.read <= set(chunks.ROW_KEYS), _Recording.read - set(chunks.ROW_KEYS)


def _ev_line(**kw: Any) -> str:
    e = {"node": "n1", "seq": 1, "ts": "2026-08-29T10:00:00.000001Z", "op": "write", "room": 7, "start": 0, "end": 4}
    return json.dumps(e | kw)


ODD_PAGES = [
    _ev_line(),
    _ev_line(op="write", room=8, start=2, end=6, src="prefill"),
    _ev_line(op="read", room=9, start=0, end=8),
    _ev_line(op="transfer", room=10, start=4, end=12, peer="n2"),
    _ev_line(node="n2", op="share", room=11, start=4, end=12),
    _ev_line(op="transfer", room=12, start=4, end=12, peer="n2"),
    _ev_line(op="transfer", room=21, start=0, end=16, src="sent", peer="n2"),  # the plugin's send rows
    _ev_line(op="transfer", room=21, start=0, end=16, src="failed", peer="n2"),
    _ev_line(node="n2", op="read", room=11, start=0, end=16),
    _ev_line(op="free", room=9, start=0, end=8),
    _ev_line(op="transfer", room=13, start=4, end=12),  # no peer
    _ev_line(room="14", op="read", start=0, end=3),
    _ev_line(room=15.0, op="read", start=0, end=3),
    _ev_line(room=True, op="read", start=0, end=3),
    _ev_line(start=5, end=5),
    _ev_line(start=-1, end=5),
    _ev_line(node="n\u00e9", op="read", room=16, start=0, end=2),
    _ev_line(node='n"3', op="read", room=16, start=0, end=2),
    json.dumps({"op": "read", "node": "n1", "room": 17, "start": 0, "end": 2, "seq": 2, "ts": "t"}),
    _ev_line().replace(", ", ","),
    _ev_line(op="read", room=18, start=0, end=4) + "\r",
    _ev_line(op="read", room=19, start=0, end=4, ts=None),
    _ev_line(seq=-0, op="read", room=20, start=0, end=4),
    "not json",
    "",
    "{}",
]


def _page_run(data: bytes, reader: str, cuts: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[dict], dict]:
    from forensics.watch import pages

    monkeypatch.setattr(chunks, "READER", reader)
    pw = pages.PageWatch()
    lines = data.splitlines(keepends=True)
    at = sorted(random.Random(cuts).sample(range(1, len(lines)), min(cuts, len(lines) - 1)))
    alerts = []
    for lo, hi in zip([0, *at], [*at, len(lines)], strict=True):
        alerts += [a.to_json() for a in pw.feed_chunk("pages/x.jsonl", lo, b"".join(lines[lo:hi]))]
    return alerts, {k: v.tolist() for k, v in (pw.writer | {f"r/{n}": a for n, a in pw.reader.items()}).items()}


def test_page_events_read_in_bulk_as_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datas = [("\n".join(ODD_PAGES) + "\n").encode()]
    bundle = _simulated(tmp_path, "seed3-default")
    datas += [p.read_bytes() for p in sorted((bundle / "pages").glob("*.jsonl"))]
    assert len(datas) > 1
    for data in datas:
        ref = _page_run(data, "python", 0, monkeypatch)
        assert ref == _page_run(data, "bulk", 0, monkeypatch)
        assert ref == _page_run(data, "bulk", 9, monkeypatch)
    from forensics.watch.pages import PAGE_LINE

    assert len(PAGE_LINE.findall(datas[1])) == datas[1].count(b"\n")  # the writer's lines all taken
    assert _page_run(datas[0], "python", 0, monkeypatch)[0]  # the odd lines raise alerts too


@pytest.mark.parametrize("reader", ["python", "bulk"])
def test_a_send_is_no_landing_a_landed_transfer_is(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin records a transfer when sent, when its room fails and when the sender concludes it
    (src sent / failed / concluded): none of them says the KV landed, so none writes the receiver's
    slots or raises an alert; the landed row (no src) into the same held slots does."""
    held = _ev_line(node="n2", op="share", room=11, start=4, end=12)
    sends = [
        _ev_line(op="transfer", room=10, start=4, end=12, src=s, peer="n2") for s in ("sent", "failed", "concluded")
    ]
    landed = _ev_line(op="transfer", room=10, start=4, end=12, peer="n2")
    alerts, maps = _page_run(("\n".join([held, *sends]) + "\n").encode(), reader, 0, monkeypatch)
    assert alerts == [] and set(maps["n2"]) == {-1}
    alerts, maps = _page_run(("\n".join([held, *sends, landed]) + "\n").encode(), reader, 0, monkeypatch)
    assert [(a["kind"], a["room"]) for a in alerts] == [("exposure", 11)], alerts
    assert "foreign_write" in alerts[0]["summary"] and maps["n2"][4:12] == [10] * 8
