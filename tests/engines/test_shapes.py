"""The SGLang line shapes (forensics.engines.sglang.SHAPES) hold what both of ingest's readers rely on:
every line a shape's pattern reads holds one of its literals (else the bulk reader would type it plain
and lose its rows), and every message a bulk pattern admits the Python pattern reads too (the bulk
reader may take fewer lines, never more). Checked on the real lines the tests hold and on the sample's
logs; the differential test of the two readers (tests/ingest/test_bulk_engine.py) checks the rows."""

from __future__ import annotations

import re
from pathlib import Path

from forensics.engines.sglang import PREFIX, PREFIX_BULK, SHAPES, TRIGGERS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    *sorted((ROOT / "tests/data/sglang_lines").glob("*.log")),
    *sorted((ROOT / "tests/data/example/bundle/engine").rglob("*.log")),
    *sorted((ROOT / "tests/data/audit").glob("sglang*.log")),
    *sorted((ROOT / "sample_data/bundle/engine").rglob("*.log")),
]


def _messages() -> list[str]:
    out = []
    for path in SOURCES:
        for text in path.read_text(errors="replace").splitlines():
            m = PREFIX.match(text)
            out.append(m["msg"] if m else text)
    return out


def _reads(kind: str, msg: str) -> bool:
    pattern = SHAPES[kind].pattern
    if kind in ("received", "finished"):  # one pattern, told apart by its event; matched at the start
        m = pattern.match(msg)
        return m is not None and m["event"] == {"received": "Receive", "finished": "Finish"}[kind]
    return pattern.search(msg) is not None


def test_every_line_a_shape_reads_holds_its_literal() -> None:
    msgs = _messages()
    assert len(SOURCES) >= 6 and len(msgs) > 1000
    seen: dict[str, int] = dict.fromkeys(SHAPES, 0)
    for msg in msgs:
        for kind, shape in SHAPES.items():
            if _reads(kind, msg):
                seen[kind] += 1
                assert any(lit in msg for lit in shape.literals), (kind, msg[:200])
                assert any(t in msg for t in TRIGGERS)
    # the check is not vacuous: the shapes every request writes are on these lines
    for kind in ("time_stats", "batch", "overlength", "server_args", "max_total", "kv_pool"):
        assert seen[kind] > 0, kind


def test_bulk_patterns_admit_a_subset() -> None:
    bulk = {kind: re.compile(s.bulk) for kind, s in SHAPES.items() if s.bulk}
    assert set(bulk) == {"received", "finished", "batch", "time_stats"}
    admitted = dict.fromkeys(bulk, 0)
    for msg in _messages():
        for kind, pattern in bulk.items():
            if pattern.search(msg):
                admitted[kind] += 1
                assert _reads(kind, msg), (kind, msg[:200])
    assert admitted["time_stats"] > 0 and admitted["batch"] > 0


def test_bulk_prefix_reads_as_the_python_prefix() -> None:
    bulk = re.compile(PREFIX_BULK)
    n = 0
    for path in SOURCES:
        for text in path.read_text(errors="replace").splitlines():
            if b := bulk.match(text):
                n += 1
                p = PREFIX.match(text)
                assert p is not None and (p["ts"], p["ms"] or "", p["rank"], p["msg"]) == b.groups("")
    assert n > 1000


def test_bulk_shapes_are_told_apart_by_their_first_literal() -> None:
    """The bulk reader's CASE takes a message as a bulk shape by the literal it starts with
    (forensics.ingest.bulk _shape_case): every message a bulk pattern admits starts with one of the
    shape's literals, and no literal of one bulk shape starts another's, so the branches' order is free."""
    bulk = {kind: s for kind, s in SHAPES.items() if s.bulk}
    for kind, shape in bulk.items():
        for other, o in bulk.items():
            if other != kind:
                assert not any(a.startswith(b) or b.startswith(a) for a in shape.literals for b in o.literals)
    n = 0
    for msg in _messages():
        for kind, shape in bulk.items():
            if re.match(shape.bulk or "", msg):
                n += 1
                assert msg.startswith(shape.literals), (kind, msg[:120])
    assert n > 1000


def test_the_per_line_reader_tries_the_table_in_its_order() -> None:
    """A message two shapes' patterns read is the first shape's: a logged request quoting a Req Time
    Stats line is a request, as the table's order says."""
    from forensics.engines.facts import EngineRows
    from forensics.engines.sglang.reader import parse_message

    msg = "Receive: obj=GenerateReqInput(rid='a', text='Req Time Stats(rid=x, input len=1, output len=2, type=decode)')"
    assert SHAPES["time_stats"].pattern.search(msg) and list(SHAPES).index("received") < list(SHAPES).index(
        "time_stats"
    )
    rows = EngineRows()
    base = {"node": "n", "file_id": 1, "line": 1, "ts": None}
    assert parse_message(msg, base, rows) == "received"
    assert [r["kind"] for r in rows.requests] == ["received"]
