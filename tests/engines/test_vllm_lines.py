"""vLLM's request lines (forensics.engines.vllm): every fixture under tests/data/vllm_lines read into the
rows its expected.json states (read by hand from each line), and the renderers' lines of both releases
read back into the fields they were given, whatever the prompt, output and request id hold."""

from __future__ import annotations

import json
import re
import string
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import hypothesis.strategies as st
from hypothesis import given, settings

from forensics.engines import ENGINES
from forensics.engines.facts import EngineRows
from forensics.engines.vllm.reader import dated
from forensics.engines.vllm.shapes import (
    RELEASES,
    SHAPES,
    render_aborted,
    render_added,
    render_generated,
    render_received,
    render_record,
)
from tests import support

DIR = support.DATA / "vllm_lines"
UTC = ZoneInfo("UTC")
LINK_KEYS = ("line", "rid", "role", "remote_engine", "remote_rid", "remote_host", "remote_port", "remote_block_ids")


def _read(data: bytes, year: int | None, tz: ZoneInfo = UTC) -> tuple[EngineRows, list[bool]]:
    rows, read = EngineRows(), dated(year).text
    ok = [read(raw, "n", 1, i, tz, rows) for i, raw in enumerate(data.splitlines(keepends=True), start=1)]
    return rows, ok


def test_every_fixture_gives_its_expected_rows() -> None:
    expected = json.loads((DIR / "expected.json").read_text())
    assert {p.name for p in DIR.glob("*.log")} == set(expected)
    for name, want in expected.items():
        rows, ok = _read((DIR / name).read_bytes(), want["year"])
        assert all(ok) and not rows.rejected, name
        got = [[r["line"], r["kind"], r["rid"], r["ts"].isoformat(), r["detail"]] for r in rows.requests]
        assert got == want["requests"], name
        assert [[r[k] for k in LINK_KEYS] for r in rows.links] == want["links"], name
        # nothing vLLM's lines do not state: no room, no token counts (docs/vllm-lines.md)
        assert all(r["room"] is None and r["input_len"] is None and r["output_len"] is None for r in rows.requests)


def test_without_a_year_a_text_line_has_no_time() -> None:
    rows, ok = _read((DIR / "issue_34503.log").read_bytes(), None)
    assert all(ok) and [r["ts"] for r in rows.requests] == [None, None]
    assert {ln["ts_resolution_ms"] for ln in rows.lines} == {None}


def test_local_times_are_read_in_the_log_zone() -> None:
    rows, _ = _read((DIR / "issue_34503.log").read_bytes(), 2026, ZoneInfo("Asia/Shanghai"))
    assert rows.requests[0]["ts"] == datetime(2026, 2, 13, 3, 33, 33, tzinfo=UTC)


def test_a_request_line_that_does_not_read_is_rejected() -> None:
    line = (DIR / "composed_pd_0.10.2.log").read_bytes().splitlines()[1]
    doubled = line.replace(b"params: SamplingParams(", b"params: SamplingParams((")
    for cut in (line[: len(line) // 2], line[:-1], doubled):
        rows, ok = _read(cut + b"\n", 2025)
        assert ok == [False] and not rows.requests and len(rows.rejected) == 1


def test_the_entry_reads_vllm_logs() -> None:
    entry = ENGINES["vllm"]
    assert entry.requests is dated(None) and entry.dated is dated


TEXT = st.text(string.printable + "é'\"\\:,()[]{}", max_size=40)
RIDS = st.text(string.ascii_letters + string.digits + "-_:.", min_size=1, max_size=30).filter(
    lambda r: ": params: " not in r and ": prompt: " not in r and ": output: " not in r and not r.endswith(":")
)
KV = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "do_remote_prefill": st.booleans(),
            "do_remote_decode": st.booleans(),
            "remote_block_ids": st.one_of(st.none(), st.lists(st.integers(0, 10**6), max_size=6)),
            "remote_engine_id": st.one_of(st.none(), st.uuids().map(str)),
            "remote_request_id": st.one_of(st.none(), TEXT),
            "remote_host": st.one_of(st.none(), st.just("10.0.0.7")),
            "remote_port": st.one_of(st.none(), st.integers(1, 65535), st.integers(1, 65535).map(str)),
        }
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(RELEASES), RIDS, TEXT, st.lists(st.integers(0, 200_000), max_size=8), st.integers(1, 4096), KV,
    TEXT, st.sampled_from(["stop", "length", "abort", "None"]), st.sampled_from(["", "delta", "complete"]),
)  # fmt: skip
def test_rendered_lines_read_back(
    release: str,
    rid: str,
    prompt: str,
    ids: list[int],
    max_tokens: int,
    kv: dict[str, Any] | None,
    output: str,
    reason: str,
    stream: str,
) -> None:
    message = render_received(release, rid, prompt, ids, max_tokens, kv)
    received = render_record("03-01 09:15:00", "logger.py:43", message)
    generated = render_generated(release, rid, output, ids, reason, stream)
    rows, ok = _read(f"{received}\n{render_record('03-01 09:15:01', 'logger.py:76', generated)}\n".encode(), 2026)
    assert ok == [True, True] and not rows.rejected
    start = datetime(2026, 3, 1, 9, 15, tzinfo=UTC)
    want = [("received", rid, start, None)]
    if stream != "delta":
        want.append(("finished", rid, start.replace(second=1), json.dumps(reason)))
    assert [(r["kind"], r["rid"], r["ts"], r["detail"]) for r in rows.requests] == want
    assert [ln["kind"] for ln in rows.lines] == ["received", "response_delta" if stream == "delta" else "finished"]
    if kv is None:
        assert rows.links == []
        return
    (link,) = rows.links
    role = "decode" if kv["do_remote_prefill"] else "prefill" if kv["do_remote_decode"] else None
    port = kv["remote_port"]
    assert link == {
        "node": "n", "file_id": 1, "line": 1, "rid": rid, "role": role, "remote_engine": kv["remote_engine_id"],
        "remote_rid": kv["remote_request_id"], "remote_host": kv["remote_host"],
        "remote_port": None if port is None else int(port),
        "remote_block_ids": None if kv["remote_block_ids"] is None else json.dumps(kv["remote_block_ids"]),
    }  # fmt: skip


def test_the_shapes_start_with_their_literals() -> None:
    for shape in SHAPES.values():
        assert re.sub(r"\\(.)", r"\1", shape.pattern.pattern).startswith(shape.literal)


@given(st.lists(RIDS.filter(lambda r: "," not in r and not r.endswith(".")), min_size=1, max_size=4))
def test_added_and_aborted_read_back(rids: list[str]) -> None:
    lines = [render_record("03-01 09:15:00", "async_llm.py:587", render_added(r)) for r in rids]
    lines.append(render_record("03-01 09:15:00", "async_llm.py:959", render_aborted(rids)))
    rows, ok = _read(("\n".join(lines) + "\n").encode(), 2026)
    assert all(ok) and not rows.rejected
    want = [("added", r) for r in rids] + [("aborted", r) for r in rids]
    assert [(r["kind"], r["rid"]) for r in rows.requests] == want
