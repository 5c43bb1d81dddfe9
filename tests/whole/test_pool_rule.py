"""Issue #35, one fact in one home: a node's KV pool and the clock bounds of a Req Time Stats line are
each one rule (forensics.engines.sglang), and every reader takes it from there:
- the pool: ingest's node_config.pool_tokens (through the macro sglang_rank_pool), the audit's binding
  pool (POOL_PRIORITY) and the watcher's (rank_pool, node_pool) agree on every start-up log of the
  audit's data the three read, sliding-window, draft and disagreeing-rank logs included;
- the macros are the Python functions they mirror, value for value."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from forensics.audit import ServerInput, audit_server
from forensics.db import connect
from forensics.engines.sglang import (
    ALLOC_ROUNDING,
    POOL_SOURCES,
    landing_offset,
    max_req_input_len,
    node_pool,
    pool_from_limit,
    rank_pool,
)
from forensics.ingest import ingest_into
from forensics.watch.detector import Detector
from tests.support.bundlekit import gw, write_jsonl

AUDIT_DATA = Path(__file__).resolve().parents[1] / "data" / "audit"
# log -> the pool the rule gives (tests/audit/test_audit_config.py says why for each)
LOGS = {
    "sglang_swa.log": 100000,  # full_layer_tokens, not the first (SWA) `KV Cache is allocated` line
    "sglang_draft.log": 70000,  # the scheduler's line, not the draft worker's second pool
    "sglang_labeled_draft.log": 50000,  # 0.5.23 names the draft pool
    "sglang_ranks_disagree.log": 120000,  # the smallest rank
    "sglang_21395.log": 105600,
    "sglang_custom_format.log": 681280,  # no record prefix
}


def _ingested_pool(tmp_path: Path, log: Path) -> int | None:
    bundle = tmp_path / "b"
    write_jsonl(bundle / "gateway" / "g.jsonl", [gw("r1", 1)])
    (bundle / "engine" / "n0").mkdir(parents=True)
    shutil.copy(log, bundle / "engine" / "n0" / "server.log")
    con = connect(":memory:")
    ingest_into(con, bundle)
    row = con.execute("SELECT pool_tokens FROM node_config WHERE node = 'n0'").fetchone()
    return row[0] if row else None  # no start-up line of the pool rule


def _watched_pool(log: Path) -> int | None:
    d = Detector()
    for i, raw in enumerate(log.read_bytes().splitlines(keepends=True), start=1):
        d.feed("n0", "server.log", i, raw, jsonl=False)
    return d.nodes["n0"].pool if "n0" in d.nodes else None  # no line the watcher reads


@pytest.mark.parametrize("name", sorted(LOGS))
def test_ingest_audit_and_watcher_decide_the_same_pool(tmp_path: Path, name: str) -> None:
    log = AUDIT_DATA / name
    audited = audit_server(ServerInput(log, "n0", (log,))).pool_tokens
    assert (_ingested_pool(tmp_path, log), audited, _watched_pool(log)) == (LOGS[name],) * 3


def test_the_scheduler_line_outranks_the_allocated_line(tmp_path: Path) -> None:
    """Where the two differ, max_total_num_tokens is the pool: SGLang computes the input limit from it."""
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', context_length=8192, page_size=1, tp_size=1, "
        "disaggregation_mode='prefill')\n"
        "[2026-01-01 00:00:01 TP0] KV Cache is allocated. #tokens: 5000, K size: 1.00 GB, V size: 1.00 GB\n"
        "[2026-01-01 00:00:02 TP0] max_total_num_tokens=4096, chunked_prefill_size=1, max_prefill_tokens=1, "
        "max_running_requests=1, context_len=8192, available_gpu_mem=1.00 GB\n"
    )
    audited = audit_server(ServerInput(log, "n0", (log,))).pool_tokens
    assert (_ingested_pool(tmp_path, log), audited, _watched_pool(log)) == (4096,) * 3


def test_the_pool_macro_is_the_python_rule() -> None:
    con = connect(":memory:")
    values = (None, 0, 4096, 7000)
    for stated in itertools.product(values, repeat=len(POOL_SOURCES)):
        args = ", ".join("NULL::BIGINT" if v is None else str(v) for v in stated)
        (got,) = con.execute(f"SELECT sglang_rank_pool({args})").fetchone()
        assert got == rank_pool(*stated), stated
    assert node_pool([None, 150000, 120000]) == 120000 and node_pool([None]) is None


def test_the_limit_and_the_pool_it_implies_are_inverse() -> None:
    for pool in (4096, 681280):
        assert pool_from_limit(max_req_input_len(1 << 20, pool)) == pool


def test_the_clock_bound_macros_are_the_python_rule() -> None:
    con = connect(":memory:")
    for p_t, p_res, t_land, res in [(1.7e9 + 0.25, 0.001, 1.7e9 + 0.2, 0.001), (1.7e9, 1.0, 1.7e9 - 3.5, 0.001)]:
        lo, hi = con.execute(
            "SELECT landing_offset_lo(?, ?, ?), landing_offset_hi(?, ?, ?)", [p_t, t_land, res, p_t, p_res, t_land]
        ).fetchone()
        assert (lo, hi) == landing_offset(p_t, p_res, t_land, res)
    assert con.execute("SELECT alloc_rounding()").fetchone()[0] == ALLOC_ROUNDING


EVERY_LOG = sorted(
    str(p.relative_to(AUDIT_DATA)) for p in AUDIT_DATA.rglob("*") if p.is_file() and p.name != "README.md"
)
# the one log where they differ, by design: a server restarted with another pool. The audit judges the
# last start (the configuration in force now); ingest's node_config and the watcher hold the node's
# first (where the evidence begins)
RESTARTED = {"sglang_restarted.log": (20000, 90000)}


@pytest.mark.parametrize("name", EVERY_LOG)
def test_every_start_up_log_of_every_engine_gives_one_pool(tmp_path: Path, name: str) -> None:
    """Every log of the audit's data, each engine's: ingest (SGLang's reader, or the start-up reader of
    the engine the log names: forensics.ingest.startup) and the audit give the same pool, and for an
    SGLang log the watcher too."""
    log = AUDIT_DATA / name
    audit = audit_server(ServerInput(log, "n0", (log,)))
    ingested = _ingested_pool(tmp_path, log)
    watched = _watched_pool(log) if audit.engine == "sglang" else ingested
    if name in RESTARTED:
        assert (ingested, audit.pool_tokens) == RESTARTED[name] and watched == ingested
    else:
        assert ingested == audit.pool_tokens == watched, (ingested, audit.pool_tokens, watched)


def test_every_engine_has_a_log_here() -> None:
    engines = {audit_server(ServerInput(AUDIT_DATA / n, "n0", (AUDIT_DATA / n,))).engine for n in EVERY_LOG}
    assert {"sglang", "vllm", "trtllm", "lmdeploy"} <= engines and len(EVERY_LOG) >= 25
