# ruff: noqa: E501  (log lines as they are written)
"""The bulk engine-log reader (forensics.ingest.bulk, issue #36) against the per-line Python reader it
stands for: the same engine_lines, engine_requests, batch_stats, node_config, rejected and files rows, in
the same order, on simulated bundles (seeds, batch-line releases, gateway formats), simulate --scale bundles
(text and JSON request logs, rotation) and the real-line corpus of tests/data/sglang_lines with odd lines
added (CRLF, NUL, bad times, broken JSON)."""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from forensics import db
from forensics.ingest import bulk, ingest_into
from forensics.simulate import build_config, simulate

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "sglang_lines"
TABLES = ("engine_lines", "engine_requests", "batch_stats", "node_config", "rejected")


def _tables(bundle: Path, reader: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple]]:
    monkeypatch.setattr(bulk, "READER", reader)
    con = db.connect(":memory:")
    ingest_into(con, bundle)
    # in table order, but node_config: a GROUP BY's rows, in no order on either path
    out = {
        t: con.execute(f"SELECT * FROM {t}" + (" ORDER BY node" if t == "node_config" else "")).fetchall()
        for t in TABLES
    }
    out["files"] = con.execute("SELECT * EXCLUDE (sha256) FROM files ORDER BY file_id").fetchall()
    con.close()
    return out


def assert_same(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple]]:
    ref = _tables(bundle, "python", monkeypatch)
    got = _tables(bundle, "bulk", monkeypatch)
    for t in ref:
        assert len(got[t]) == len(ref[t]), t
        for a, b in zip(ref[t], got[t], strict=True):
            assert a == b, (t, a, b)
    return got


@pytest.mark.parametrize(
    ("seed", "batch", "gateway"),
    [
        (1, "", "kvf"),
        (2, "0.4.9", "litellm_spendlogs"),
        (3, "0.5.4", "envoy"),
        (4, "0.5.11", "smg"),
        (5, "0.5.23", "litellm_payload"),
    ],
)
def test_simulated_bundles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, batch: str, gateway: str
) -> None:
    cfg = build_config(
        "default", seed=seed, requests=200, page_size=16, batch_lines=batch or None, gateway_format=gateway
    )
    simulate(tmp_path / "sim", cfg)
    got = assert_same(
        tmp_path / "sim" / "bundle" if (tmp_path / "sim" / "bundle").is_dir() else tmp_path / "sim", monkeypatch
    )
    assert got["engine_requests"]


def _scale(out: Path, *args: str) -> Path:
    """simulate --scale in this process (the readers are under test here, not the command's process)."""
    from typer.testing import CliRunner

    from forensics.cli import app

    res = CliRunner().invoke(app, ["simulate", str(out), "--scale", "--requests", "1500", *args])
    assert res.exit_code == 0, res.output
    return out / "bundle"


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="simulate --scale needs numba")
@pytest.mark.parametrize("args", [("--seed", "1"), ("--seed", "2", "--release", "0.5.23", "--rotation", "numbered")])
def test_scale_bundles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]) -> None:
    got = assert_same(_scale(tmp_path / "g", *args), monkeypatch)
    kinds = {r[3] for r in got["engine_requests"]}
    assert {"received", "finished", "time_stats"} <= kinds


ODD_TEXT = [
    "",
    "[2026-08-29 10:00:00 TP0] Decode batch, #running-req: 1, #token: full=100, swa=50, token usage: 0.01",
    "[2026-08-29 10:00:01 TP0] Decode batch, #running-req: 1, #running-req: 2, token usage: 0.01",
    "[2026-08-29 10:00:02 TP0] Decode batch, #running-req: x, token usage: 0.01",
    "[2026-08-29 10:00:03 TP0] Prefill batch, #new-seq: 1, #new-token: 99999999999999999999, #cached-token: 0",
    "[2026-13-45 10:00:03 TP0] Decode batch, #running-req: 1, token usage: 0.01",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, #token: 5",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, token usage: 0.01, cuda graph: Maybe",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, token usage: 0.01, cuda graph: False, cpu graph: True",
    "[2026-08-29 10:00:04 TP0] Decode batch, nameless, #running-req: 1, token usage: 0.01",
    "[2026-08-29 10:00:04 TP0] Decode batch, accept len: 1, accept len: 2, #running-req: 3, token usage: 0.5, ",
    # read by template (bulk.batch_template): a name that differs from another only in digits (one
    # group), padded, empty or comma values, overflows, inf, the padding at the end, regex characters
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.01",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, #token2: 5, token usage: 0.01",
    "[2026-08-29 10:00:04 TP0] Decode batch [7], #running-req:  2, token usage: 0.01",
    "[2026-08-29 10:00:04 TP0] Decode batch [7], #running-req: 2 , token usage: 0.01",
    "[2026-08-29 10:00:04 TP0] Decode batch [99999999999999999999], #running-req: 2, token usage: 0.01",
    "[2026-08-29 10:00:04 TP0] Decode batch. #running-req: 2, token usage: 1e-05, #queue-req: 3, , ",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, accept len: , token usage: 0.1",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, spec (a|b)[1]: x,y, token usage: 0.1",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, spec (a|b)[1]: x y, token usage: 0.5e+3, gen throughput (token/s): inf",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, token usage: 0.1, cuda graph: True, cuda graph: False",
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, token usage: 0.1, #queue-req: 9223372036854775808",
    "[2026-08-29 10:00:04 TP0] Prefill batch, #new-seq: 1, #new-token: 2, #cached-token: 0, token usage: 1e999",
    "[2026-08-29 10:00:04 TP0] Prefill batch, #new-seq: 1, #new-token: 2, #cached-token: 0, #new-token: 3",
    "[2026-08-29 10:00:04 TP0] Prefill batch, #new-seq: 1, #cached-token: 0",
    "[2026-08-29 10:00:04.5 DP0 TP1] Req Time Stats(rid=abc, bootstrap_room=None, input len=5, output len=1, "
    "type=prefill): bootstrap_queue_duration=1.5ms, queue_duration=0.1, forward_duration=2, start_time=5.0",
    "[2026-08-29 10:00:05.123456 TP0] Req Time Stats(rid='q', bootstrap_room=7, input len=5, output len=2, "
    "type=decode): bootstrap_duration=0.5, alloc_wait_duration=0.25, transfer_duration=1ms, start_time=1787967440.2215",
    "[2026-08-29 10:00:06 TP0] Req Time Stats(rid=r, bootstrap_room=99999999999999999999, input len=5, output len=1, type=decode)",
    # split, not captured (bulk.TEXT_TIME_STATS): a tail whose later pair follows `: ` (the per-line
    # reader's), a name given twice (the first), ms and seconds, entry_time, a rid holding `=`, every
    # optional field of the head
    "[2026-08-29 10:00:06 TP0] Req Time Stats(rid=t1, bootstrap_room=3, input len=5, output len=1, "
    "type=decode): prealloc_duration=1: transfer_duration=2ms, forward_duration=3",
    "[2026-08-29 10:00:06 TP0] Req Time Stats(rid=t2, input len=5, output len=1, type=decode): "
    "forward_duration=1ms, forward_duration=2, queue_duration=0.5ms, entry_time=1787967440.5",
    "[2026-08-29 10:00:06 TP0] ReqTimeStats(rid=t=3, bootstrap_room=-4, input_len=5, cached_input_len=2, "
    "output_len=1, attempts=2, type=prefill), bootstrap_queue_duration=7ms, start_time=1787967440.25ms",
    # a batch line taken by its literal whose unread field is not ASCII: no template, the per-line reader's
    "[2026-08-29 10:00:04 TP0] Decode batch, #running-req: 1, note: caf\u00e9, token usage: 0.01",
    "Receive: obj=GenerateReqInput(rid='a1', bootstrap_room=None)",
    "Receive: obj=GenerateReqInput(rid=['a', 'b'], bootstrap_room=[1, 2])",
    "Receive: obj=GenerateReqInput(rid=None, bootstrap_room=3)",
    "Finish: obj=GenerateReqInput(rid='a1', bootstrap_room=3), out={'meta_info': {'id': 'm', 'finish_reason': None, "
    "'prompt_tokens': 3, 'completion_tokens': None}}",
    "Finish: obj=GenerateReqInput(rid='', bootstrap_room=3), out={'meta_info': {'id': 'm', 'finish_reason': "
    "{'type': 'abort', 'message': 'x y', 'status_code': 400, 'ok': True}, 'prompt_tokens': 0, 'completion_tokens': 07}}",
    "Finish: obj=GenerateReqInput(rid='a2'), out={'meta_info': {'prompt_tokens': 012}}",
    "Finish: obj=GenerateReqInput(rid='a3'), out={'meta_info': {'id': 'x', 'id': 'y', 'prompt_tokens': 1}}",
    # meta sliced after the last `=`: an earlier field whose name ends in `out` and holds a dict
    "Finish: obj=GenerateReqInput(rid='a4'), xout={'meta_info': 1}, out={'meta_info': {'id': 'z', 'prompt_tokens': 2}}",
    "[2026-08-29 10:00:07 TP0] KV Cache is allocated. #tokens: 1,024, K size: 1 GB",
    "[2026-08-29 10:00:08 TP0] some other line with nothing to read",
    "[2026-08-29 10:00:09 TP0] nul \x00 byte",
    "   ",
]
ODD_JSON = [
    '{"timestamp": "2026-08-29T10:00:00", "event": "request.received", "rid": "j1", "obj": {"bootstrap_room": 5, "input_ids": [1, 2, 3]}}',
    '{"timestamp": "2026-08-29T10:00:00.123", "event": "request.received", "rid": "j2", "obj": {"input_ids": []}}',
    '{"timestamp": "2026-08-29T10:00:00", "event": "request.received", "rid": "j3", "obj": {"input_ids": [1, "..."]}}',
    '{"timestamp": "2026-08-29T10:00:00", "event": "request.received", "rid": 5, "obj": {}}',
    '{"timestamp": "2026-08-29T10:00:00+02:00", "event": "request.finished", "rid": "j4", "obj": {"bootstrap_room": 6},'
    ' "out": {"meta_info": {"prompt_tokens": 4, "completion_tokens": 2, "finish_reason": {"type": "length", "length": 2}}}}',
    '{"timestamp": "2026-08-29T10:00:01", "event": "request.finished", "rid": "", "headers": {"X-Request-Id": "fw-1"},'
    ' "out": {"meta_info": {"id": "mid", "prompt_tokens": 4, "completion_tokens": 2.0, "finish_reason": "stop"}}}',
    '{"timestamp": "2026-08-29T10:00:01", "event": "request.finished", "rid": "j5", "headers": {"x-correlation-id": "c"},'
    ' "out": {"meta_info": {"prompt_tokens": 4, "finish_reason": {"type": "stop", "matched": [1, 2]}}}}',
    '{"timestamp": "2026-08-29T10:00:01", "event": "request.finished", "rid": "j6", "out": {"meta_info": {"prompt_tokens": true}}}',
    '{"timestamp": "2026-08-29T10:00:01", "event": "request.finished", "rid": "j7", "rid": "j8", "out": {"meta_info": {"prompt_tokens": 1}}}',
    '{"event": "request.finished", "rid": "j9"}',
    '{"timestamp": "2026-08-29T10:00:01", "event": "other"}',
    "[1, 2]",
    "not json",
    "",
    '{"timestamp": "2026-08-29T10:00:01", "event": "request.received", "rid": "j10", "obj": {"bootstrap_room": 18446744073709551615}}',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.finished", "rid": "j11"',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.received", "rid": "j12", "obj": {"bootstrap_room": null, "input_ids": [5, 0, 7]}}',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.received", "rid": "j13", "obj": {"input_ids": [1, 9223372036854775808]}}',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.received", "rid": "j14", "obj": {"bootstrap_room": 9223372036854775807}}',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.finished", "rid": "j15", "obj": {"bootstrap_room": 9223372036854775808},'
    ' "out": {"meta_info": {"prompt_tokens": 4}}}',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.finished", "rid": "j16",'
    ' "out": {"meta_info": {"prompt_tokens": 9, "completion_tokens": 18446744073709551615, "finish_reason": {"type": "stop", "matched": 151329}}}}',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.finished", "rid": "j17",'
    ' "out": {"meta_info": {"prompt_tokens": 9223372036854775808}}}',
    '{"timestamp": "2026-08-29T10:00:02", "event": "request.finished", "rid": "j18", "out": {"meta_info": {"prompt_tokens": 3, "finish_reason": 7}}}',
    # a finish reason's key holding a quote (hypothesis found it: it failed the query's JSON path)
    '{"timestamp": "2026-08-29T10:00:07.123456", "event": "request.finished", "rid": "0", "obj": {"bootstrap_room": "0", "input_ids": []}, "out": {"meta_info": {"id": "0", "prompt_tokens": null, "completion_tokens": "u8a0zrbm9lq", "finish_reason": {"type": null, "k\\"": null}}}}',
    '{"timestamp": "2026-08-29T10:00:07", "event": "request.finished", "rid": "j19", "out": {"meta_info": {"prompt_tokens": 3, "finish_reason": {"type": "stop", "k\\"": 1}}}}',
]


def _corpus(root: Path) -> Path:
    sim = root / "sim"
    simulate(sim, build_config("default", seed=7, requests=30, page_size=16))
    bundle = root / "b"
    shutil.copytree(sim / "bundle" if (sim / "bundle").is_dir() else sim, bundle)
    shutil.rmtree(bundle / "pages", ignore_errors=True)
    node = bundle / "engine" / "decode-0"
    node.mkdir(parents=True, exist_ok=True)
    real = "".join(p.read_text() for p in sorted(DATA.glob("*.log")))
    (node / "real.log").write_text(real + "\n".join(ODD_TEXT) + "\n")
    (node / "odd.jsonl").write_text("\n".join(ODD_JSON))  # no newline at the end
    (node / "crlf.log").write_bytes(("\r\n".join(ODD_TEXT[:8]) + "\r\n").encode())
    (node / "latin1.log").write_bytes(b"[2026-08-29 10:00:00 TP0] caf\xe9\n" + ODD_TEXT[1].encode() + b"\n")
    return bundle


def test_real_and_odd_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = assert_same(_corpus(tmp_path), monkeypatch)
    assert got["rejected"]


def test_compressed_rotated_files_read_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """server.log.1.gz and requests.jsonl.2.zst give the rows the plain files give (file ids aside)."""
    plain = _corpus(tmp_path / "p")
    node = plain / "engine" / "decode-0"
    (node / "crlf.log").unlink()  # DuckDB's reader splits at a carriage return: plain files only
    (node / "latin1.log").unlink()  # a compressed line that is not UTF-8 is rejected whole
    (node / "odd.jsonl").write_text("\n".join(ODD_JSON) + "\n")
    ref = _tables(plain, "python", monkeypatch)
    packed = tmp_path / "z"
    shutil.copytree(plain, packed)
    node = packed / "engine" / "decode-0"
    for p in sorted(node.glob("*.log")):
        (node / (p.name + ".1.gz")).write_bytes(gzip.compress(p.read_bytes()))
        p.unlink()
    zstd = shutil.which("zstd")
    for p in sorted(node.glob("*.jsonl")) if zstd else []:
        subprocess.run([str(zstd), "-q", "--rm", str(p), "-o", str(node / (p.name + ".2.zst"))], check=True)
    got = _tables(packed, "bulk", monkeypatch)
    file_col = {"engine_lines": 1, "engine_requests": 9, "batch_stats": 1, "rejected": 0}
    for t, i in file_col.items():

        def key(rows: list[tuple], i: int = i) -> list[str]:
            return sorted(repr(r[:i] + r[i + 1 :]) for r in rows)

        assert key(got[t]) == key(ref[t]), t
    assert any(r[2].endswith(".1.gz") for r in got["files"])


def _python_reads(monkeypatch: pytest.MonkeyPatch, parser: str) -> list[bytes]:
    """The bulk reader set to read, and the raw lines it hands the per-line Python `parser` (appended as
    it goes)."""
    lines: list[bytes] = []
    field = {"parse_text_line": "text", "parse_request_line": "json"}[parser]
    real = getattr(bulk.LINES, field)

    def counted(raw: bytes, *args: Any, **kwargs: Any) -> bool:
        lines.append(raw)
        return real(raw, *args, **kwargs)

    monkeypatch.setattr(bulk, "LINES", dataclasses.replace(bulk.LINES, **{field: counted}))
    monkeypatch.setattr(bulk, "READER", "bulk")
    return lines


def test_request_records_are_read_in_sql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's request.received/finished records (positive rooms, token ids and counts, DuckDB's
    UBIGINT) are read by the SQL, none by the per-line Python reader: the bulk path is the one taken."""
    sim = tmp_path / "sim"
    simulate(sim, build_config("default", seed=3, requests=60, page_size=16))
    bundle = sim / "bundle"
    jsonl = sum(1 for p in (bundle / "engine").rglob("*.jsonl") for _ in p.open())
    assert jsonl > 100
    calls = _python_reads(monkeypatch, "parse_request_line")
    con = db.connect(":memory:")
    ingest_into(con, bundle)
    assert con.execute("SELECT count(*) FROM engine_requests").fetchone()[0] > 100
    con.close()
    assert len(calls) == 0


@pytest.mark.parametrize("release", ["", "0.4.9", "0.5.4", "0.5.11", "0.5.23"])
def test_batch_lines_are_read_in_sql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: str) -> None:
    """Every release's batch lines (bar 0.4.9's hybrid `#token: full=N, swa=M`) are read by their
    templates in SQL, none by the per-line Python reader."""
    sim = tmp_path / "sim"
    simulate(sim, build_config("default", seed=4, requests=60, page_size=16, batch_lines=release or None))
    bundle = sim / "bundle" if (sim / "bundle").is_dir() else sim
    lines = _python_reads(monkeypatch, "parse_text_line")
    con = db.connect(":memory:")
    ingest_into(con, bundle)
    assert con.execute("SELECT count(*) FROM batch_stats").fetchone()[0] > 50
    con.close()
    assert not [r for r in lines if b" batch" in r and b"full=" not in r]
