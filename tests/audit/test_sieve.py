"""The audit's sieve (forensics.audit.lines.read_log): the single lines it leaves out hold no word any
parse or detect reads, every other logical line is the one the whole read gives, and the audit of a
long log is the audit of it read whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forensics.audit
from forensics import db
from forensics.audit import (
    DETECT_LINES,
    SIEVE,
    ServerInput,
    _relevant,
    audit_engine_dirs,
    audit_paths,
    audit_server,
)
from forensics.audit.lines import _NOT_PLAIN_BYTES, SNIFF_LINES, _prefixed, read_log, split_prefix
from forensics.audit.sieved import read_logs
from forensics.ingest import ingest_into
from tests import support

DATA = support.DATA / "audit"
# a request line the audit's keyword filter keeps ("tokens") and no parse reads: what the sieve drops
FILLER = (
    "[2026-03-25 09:40:{s:02d} TP0] Finish: obj=GenerateReqInput(rid='ab'), out={{'meta_info': "
    "{{'prompt_tokens': 12, 'completion_tokens': 3, 'finish_reason': {{'type': 'stop'}}}}}}"
)
PIECES = [
    FILLER.format(s=7),
    FILLER.format(s=8),
    FILLER.format(s=9),
    "[2026-03-25 09:40:08 TP0] Req Time Stats(rid=ab, input len=12, output len=3, type=decode): forward=0.1",
    "[2026-03-25 09:40:09] KV Cache is allocated. #tokens: 105600, K size: 7.26 GB, V size: 7.26 GB",
    "[2026-03-25 09:40:10] max_total_num_tokens=105600, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "context_len=131072",
    # a wrapped over-length abort: its words split over the break, the second piece without a prefix
    "[2026-03-25 09:40:11 TP0] Finish: obj=GenerateReqInput(rid='x'), out={'meta_info': {'finish_reason': "
    "{'type': 'abort', 'message': 'Input len",
    "gth (200000 tokens) exceeds the maximum allowed length (105594 tokens). Use a shorter input.'}}}",
    "",
    "\x1b[32m[2026-03-25 09:40:12 TP0]\x1b[0m Decode batch, #running-req: 1, #token: 7",
    "[2026-03-25 09:40:13 TP0] Decode batch, #running-req: 1,\t#token: 7",
    "[2026-03-25 09:40:14 TP0] a line a progress bar rewrote\r[2026-03-25 09:40:14 TP0] server warmup done",
    '{"timestamp": "2026-03-25T09:40:15", "event": "request.finished", "rid": "ab", "meta_info": {}}',
    "Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 1, in <module>',
    "[2026-03-25 09:40:16 TP0] vllm.engine is quoted here, and so is [TRT-LLM]",
    "2026-03-25T09:40:17.000000Z [2026-03-25 09:40:17 TP0] Decode batch, #running-req: 2, #token: 9",
]


# the pieces DuckDB sieves (forensics.audit.sieved._sql_plain): no byte that would unmake a plain line
CLEAN = [i for i, p in enumerate(PIECES) if p.encode().translate(None, _NOT_PLAIN_BYTES) == p.encode()]
JSON = [i for i in CLEAN if PIECES[i].startswith("{")] + [PIECES.index("")]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_bytes("".join(f"{ln}\n" for ln in lines).encode())
    return path


def _whole(monkeypatch: pytest.MonkeyPatch, server: ServerInput) -> dict:
    with monkeypatch.context() as m:
        m.setattr(forensics.audit, "SIEVE", None)
        return audit_server(server).to_json()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(range(len(PIECES))), min_size=SNIFF_LINES + 50, max_size=SNIFF_LINES + 400))
def test_the_sieve_leaves_out_only_single_lines_holding_no_word(tmp_path_factory, picks: list[int]) -> None:
    path = _write(tmp_path_factory.mktemp("sieve") / "server.log", [PIECES[i] for i in picks])
    head = 20  # a short head, so that lines past it are sieved too
    whole = read_log(path, keep=_relevant, head=head)
    sieved = read_log(path, keep=_relevant, head=head, sieve=SIEVE)
    left = set(sieved)
    assert [ln for ln in whole if ln in left] == sieved
    for ln in whole:
        if ln not in left:
            assert not any(w in ln.text for w in SIEVE), ln


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([CLEAN, JSON]).flatmap(
        lambda pool: st.lists(st.sampled_from(pool), min_size=SNIFF_LINES + 50, max_size=SNIFF_LINES + 400)
    )
)
def test_duckdb_sieves_as_python_does(tmp_path_factory, picks: list[int]) -> None:
    """DuckDB keeps the lines the Python sieve keeps, or fewer, but only single lines holding no word: of a
    file whose lines cannot join (JSON lines), and in the head of a file whose head it has sniffed
    (forensics.audit.sieved.Sieved: the head is kept only for _logical to sniff it)."""
    path = _write(tmp_path_factory.mktemp("sieve") / "server.log", [PIECES[i] for i in picks])
    head = 20
    whole = read_log(path, keep=_relevant, head=head)
    sieved = read_log(path, keep=_relevant, head=head, sieve=SIEVE)
    by_sql = read_logs([path], _relevant, head, SIEVE, duckdb.connect())[0]
    left = set(by_sql)
    assert [ln for ln in whole if ln in left] == by_sql
    assert [ln for ln in sieved if ln in left] == by_sql
    for ln in whole:
        if ln not in left:
            assert not any(w in ln.text for w in SIEVE), ln


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_a_long_log_audits_as_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Each fixture between thousands of request lines: the sieve drops those, the verdict, reason,
    evidence and notes are those of the whole read."""
    fixture = (DATA / name).read_text(encoding="utf-8", errors="replace").splitlines()
    filler = [FILLER.format(s=i % 60) for i in range(DETECT_LINES + 500)]
    path = _write(tmp_path / name, filler + fixture + filler)
    server = ServerInput(path, None, (path,))
    assert len(read_log(path, keep=_relevant, head=DETECT_LINES, sieve=SIEVE)) < len(fixture) + DETECT_LINES
    whole = _whole(monkeypatch, server)
    assert audit_server(server).to_json() == whole
    assert audit_server(server, con=duckdb.connect()).to_json() == whole


def test_the_fixture_folders_audit_as_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    sieved = [a.to_json() for a in audit_paths([DATA, support.EXAMPLE / "bundle" / "engine"])]
    with monkeypatch.context() as m:
        m.setattr(forensics.audit, "SIEVE", None)
        whole = [a.to_json() for a in audit_paths([DATA, support.EXAMPLE / "bundle" / "engine"])]
    assert sieved == whole


def test_duckdb_sieves_the_fixture_bundle_as_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = support.EXAMPLE / "bundle" / "engine"
    sieved = [a.to_json() for a in audit_engine_dirs(engine, con=duckdb.connect())]
    with monkeypatch.context() as m:
        m.setattr(forensics.audit, "SIEVE", None)
        whole = [a.to_json() for a in audit_engine_dirs(engine)]
    assert sieved == whole


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(range(len(PIECES))), max_size=40), st.integers(0, 3), st.text(max_size=12))
def test_the_head_sniff_counts_as_split_prefix(picks: list[int], transport: int, noise: str) -> None:
    """_prefixed counts a line SGLang's record prefix starts without split_prefix: the count is the one
    split_prefix gives, on the pieces, behind a transport prefix, and with other text before them."""
    lead = ["", "2026-03-25T09:40:07.123Z ", "(EngineCore_DP0 pid=1) ", noise][transport]
    head = [(i + 1, lead + PIECES[p]) for i, p in enumerate(picks)]
    nonblank = [t for _, t in head if t.strip()]
    by_split = bool(nonblank) and 4 * sum(split_prefix(t)[2] for t in nonblank) >= len(nonblank)
    assert _prefixed(head) == by_split


def _node_audit(bundle: Path) -> list[tuple]:
    con = db.connect(":memory:")
    ingest_into(con, bundle)
    rows = con.execute("SELECT * FROM node_audit ORDER BY node").fetchall()
    con.close()
    return rows


def test_ingests_audit_is_the_audit_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """node_audit as ingest stores it, from the lines the bulk reader kept (the heads sieved too, their
    sniff made where each file is scanned), is the audit of the files read whole; on rotated text logs
    with JSON request logs beside them."""
    subprocess.run(
        [sys.executable, "-m", "forensics", "simulate", str(tmp_path / "g"), "--scale", "--requests", "1500"],
        check=True,
        capture_output=True,
    )
    bundle = tmp_path / "g" / "bundle"
    assert list(bundle.rglob("*.jsonl")) and len(list((bundle / "engine" / "decode-0").iterdir())) > 1
    kept = _node_audit(bundle)
    with monkeypatch.context() as m:
        m.setattr(forensics.audit, "SIEVE", None)
        whole = _node_audit(bundle)
    assert kept == whole and len(kept) > 2
    assert all(r[1] != "unknown" for r in kept)
