"""Fuzz the log-line parsers: random text, random bytes and mutations of real SGLang lines.

No exception may escape, and what comes out must fit the typed tables (int64 columns, UTC timestamps).
Bounded for CI: a few hundred examples per parser.
"""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.audit.lines import clean, logical_lines, split_prefix
from forensics.engines import ENGINES
from forensics.engines.facts import Facts, LogLine
from forensics.engines.sglang import reader
from forensics.ingest import engine
from forensics.intake import InputFile
from tests.support import DATA

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_FILES = settings(FUZZ, max_examples=150)  # each example writes a file or builds many lines
# zones at both ends of the offsets: a local time near year 1 or 9999 must not overflow
ZONES = [ZoneInfo(z) for z in ("UTC", "Pacific/Kiritimati", "Etc/GMT+12", "Europe/Berlin")]
INT64 = (-(1 << 63), (1 << 63) - 1)


def _real_lines() -> list[str]:
    lines: list[str] = []
    for p in sorted((DATA / "example" / "bundle" / "engine").rglob("*.log")) + sorted((DATA / "audit").glob("sglang*")):
        if p.is_file():
            lines += p.read_text(encoding="utf-8", errors="replace").splitlines()[:40]
    lines += [
        "[2026-08-29 10:40:00.123 DP1 TP3] Input length (5000 tokens) exceeds the maximum allowed length "
        "(4090 tokens). "
        "Use a shorter input or enable --allow-auto-truncate., self.rid='p0b'",
        '[2026-08-29 10:40:00] Prefill transfer failed for request rank=0 req.rid="x" req.bootstrap_room=5 '
        "with exception KVTransferError(bootstrap_room=5): boom",
    ]
    return [ln for ln in lines if ln.strip()]


REAL = _real_lines()
DIGITS = st.text("0123456789", min_size=1, max_size=40)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A real line with random edits: characters replaced, inserted, deleted, numbers blown up."""
    line = draw(st.sampled_from(REAL))
    for _ in range(draw(st.integers(0, 6))):
        pos = draw(st.integers(0, len(line)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "digits", "cut"]))
        junk = draw(st.text(max_size=8))
        if op == "insert":
            line = line[:pos] + junk + line[pos:]
        elif op == "delete":
            line = line[:pos] + line[pos + draw(st.integers(1, 10)) :]
        elif op == "replace":
            line = line[:pos] + junk + line[pos + len(junk) :]
        elif op == "digits":  # any run of digits may become huge or negative
            line = line[:pos] + draw(st.sampled_from(["", "-"])) + draw(DIGITS) + line[pos:]
        else:
            line = line[:pos]
    return line


LINES = st.one_of(st.text(max_size=300), mutated())
BYTES = st.one_of(
    st.binary(max_size=400),
    mutated().map(lambda s: s.encode("utf-8", errors="surrogatepass")),
    st.lists(mutated(), max_size=5).map(lambda ls: "\n".join(ls).encode()),
)


def _check_engine_rows(rows: engine.EngineRows) -> None:
    # exactly what `store` does with them: any overflow or wrong type raises here
    pa.Table.from_pylist(rows.lines, schema=engine.LINE_SCHEMA)
    pa.Table.from_pylist(rows.requests, schema=engine.REQ_SCHEMA)
    pa.Table.from_pylist(rows.config, schema=engine.CFG_SCHEMA)
    for r in rows.requests + rows.config:
        for key in (
            "room",
            "input_len",
            "output_len",
            "max_input_len",
            "page_size",
            "context_len",
            "full_layer_tokens",
            "max_total_num_tokens",
            "allocated_tokens",
            "tp_size",
        ):
            v = r.get(key)
            assert v is None or (type(v) is int and INT64[0] <= v <= INT64[1]), (key, v)
    for ln in rows.lines:
        assert isinstance(ln["message"], str) and isinstance(ln["line"], int)
        assert ln["ts"] is None or (isinstance(ln["ts"], datetime) and ln["ts"].utcoffset().total_seconds() == 0)
    for file_id, row, reason in rows.rejected:
        assert isinstance(file_id, int) and isinstance(row, int) and isinstance(reason, str) and reason


@FUZZ
@given(msg=LINES)
def test_engine_message_parser(msg: str) -> None:
    rows = engine.EngineRows()
    base = {"node": "decode-0", "file_id": 1, "line": 1, "ts": None}
    try:
        kind = reader.parse_message(msg, base, rows)
    except ValueError:  # out-of-range numbers: parse_log turns this into a rejected row
        return
    assert kind is None or isinstance(kind, str)
    _check_engine_rows(rows)


def _input(data: bytes, suffix: str) -> InputFile:
    path = Path(tempfile.mkstemp(prefix="kvf-fuzz-", suffix=suffix)[1])
    path.write_bytes(data)
    return InputFile(1, "engine_log", path, "engine/decode-0/x" + suffix, "decode-0")


@FUZZ_FILES
@given(data=BYTES, zone=st.sampled_from(ZONES))
def test_engine_log_file_parser(data: bytes, zone: ZoneInfo) -> None:
    f = _input(data, ".log")
    rows = engine.EngineRows()
    try:
        engine.parse_log(f, zone, rows)
    finally:
        f.path.unlink()
    assert (
        f.rows_read == f.rows_loaded + f.rows_rejected == data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    )
    assert len(rows.rejected) == f.rows_rejected and len(rows.lines) == f.rows_loaded
    _check_engine_rows(rows)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)
RECORDS = st.fixed_dictionaries(
    {"event": st.sampled_from(["request.finished", "request.received"])},
    optional={
        "timestamp": st.one_of(
            st.just("0001-01-01T00:00:00"), st.just("9999-12-31T23:59:59"), st.text(max_size=30), JSON_VALUES
        ),
        "rid": JSON_VALUES,
        "obj": st.one_of(JSON_VALUES, st.fixed_dictionaries({"bootstrap_room": JSON_VALUES})),
        "out": st.one_of(
            JSON_VALUES,
            st.fixed_dictionaries(
                {
                    "meta_info": st.one_of(
                        JSON_VALUES,
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "prompt_tokens": JSON_VALUES,
                                "completion_tokens": JSON_VALUES,
                                "finish_reason": JSON_VALUES,
                            },
                        ),
                    )
                }
            ),
        ),
    },
)


@FUZZ_FILES
@given(
    records=st.lists(st.one_of(RECORDS.map(lambda r: json.dumps(r).encode()), st.binary(max_size=60)), max_size=4),
    zone=st.sampled_from(ZONES),
)
def test_engine_requests_jsonl_parser(records: list[bytes], zone: ZoneInfo) -> None:
    data = b"".join(r.replace(b"\n", b" ") + b"\n" for r in records)
    f = _input(data, ".jsonl")
    rows = engine.EngineRows()
    try:
        engine.parse_requests_jsonl(f, zone, rows)
    finally:
        f.path.unlink()
    assert f.rows_read == len(records) == f.rows_loaded + f.rows_rejected
    _check_engine_rows(rows)


@FUZZ
@given(text=LINES)
def test_audit_prefix_and_clean(text: str) -> None:
    cleaned = clean(text)
    assert isinstance(cleaned, str)
    msg, rank, found = split_prefix(cleaned)
    assert isinstance(msg, str) and isinstance(rank, str) and isinstance(found, bool)


@FUZZ_FILES
@given(chunks=st.lists(BYTES, max_size=6))
def test_audit_logical_lines_and_engine_parsers(chunks: list[bytes]) -> None:
    physical = b"\n".join(chunks).split(b"\n")
    data = [p + b"\n" for p in physical]
    lines = list(logical_lines("fuzz.log", data))
    for ln in lines:
        assert isinstance(ln, LogLine) and isinstance(ln.text, str) and isinstance(ln.rank, str)
        assert 1 <= ln.line <= len(data)
    for entry in ENGINES.values():
        assert isinstance(entry.parse(lines), Facts)
