"""Ingest picks its readers by the engine each node's logs name (forensics.ingest.startup): a node of
another engine of the registry gives its start-up facts (the config audit's reading of the same lines)
and says that its requests are not read; an SGLang node is read as always, also when its log quotes
another engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forensics.audit import audit_paths
from forensics.engines import ENGINES
from forensics.pipeline import ingest_bundle
from tests import support

AUDIT = support.DATA / "audit"
# one start-up log per engine of the registry besides SGLang (tests/data/audit/README: their sources)
OTHER = {"vllm": "vllm_v1_ok.log", "trtllm": "trtllm_ok.log", "lmdeploy": "lmdeploy_blocks_ok.log"}


def _bundle(tmp_path: Path, node_log: str) -> Path:
    bundle = tmp_path / "bundle"
    shutil.copytree(support.EXAMPLE / "bundle", bundle)
    shutil.copy(AUDIT / node_log, bundle / "engine" / "decode-0" / "server.log")
    return bundle


@pytest.mark.parametrize("engine", sorted(OTHER))
def test_a_node_of_another_engine_gives_its_start_up_facts(tmp_path: Path, engine: str) -> None:
    bundle = _bundle(tmp_path, OTHER[engine])
    res = ingest_bundle(bundle, tmp_path / "incident.duckdb")
    con = support.open_db(res.db)
    rows = con.execute(
        "SELECT node, engine, role, pool_tokens, context_len, page_size FROM node_config ORDER BY node"
    ).fetchall()
    audit = audit_paths([AUDIT / OTHER[engine]])[0]
    assert audit.engine == engine and audit.pool_tokens is not None
    assert rows[0] == ("decode-0", engine, audit.role, audit.pool_tokens, audit.context_len, audit.page_size)
    assert rows[1][:2] == ("prefill-0", "sglang")
    # none of its lines is read as SGLang's: an engine with a line reader of its own (vLLM) reads them
    # through it (its start-up lines are no request lines), the others not at all; and the limit of
    # SGLang's rule is not claimed for it
    reads = ENGINES[engine].requests is not None
    (lines_read,) = con.execute("SELECT count(*) FROM engine_lines WHERE node = 'decode-0'").fetchone()
    assert (lines_read > 0) == reads
    assert con.execute("SELECT count(*) FROM engine_lines WHERE node = 'decode-0' AND kind IS NOT NULL").fetchone() == (
        0,
    )
    assert con.execute("SELECT count(*) FROM engine_requests WHERE node = 'decode-0'").fetchone() == (0,)
    assert con.execute("SELECT node FROM node_limits ORDER BY node").fetchall() == [("prefill-0",)]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    entry = next(e for e in manifest["inputs"] if e["path"] == "engine/decode-0/server.log")
    lines = (bundle / "engine/decode-0/server.log").read_bytes().count(b"\n")
    assert entry["rows_read"] == entry["rows_loaded"] >= lines and entry["rows_rejected"] == 0
    if reads:
        assert any("start-up facts" in n and "request lines are read" in n for n in entry["notes"])
    else:
        assert any("start-up facts" in n and "gateway log alone" in n for n in entry["notes"])


def test_an_sglang_log_quoting_another_engine_stays_sglang(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(support.EXAMPLE / "bundle", bundle)
    log = bundle / "engine" / "decode-0" / "server.log"
    quoted = "".join(
        f"[2026-03-25 10:39:5{i}] WARNING: from vllm.{i} import x failed; vLLM API server version 0.9 EngineCore\n"
        for i in range(9)
    )
    log.write_text(quoted + log.read_text())
    res = ingest_bundle(bundle, tmp_path / "incident.duckdb")
    con = support.open_db(res.db)
    assert con.execute("SELECT engine FROM node_config WHERE node = 'decode-0'").fetchone() == ("sglang",)
    n = con.execute("SELECT count(*) FROM engine_requests WHERE node = 'decode-0'").fetchone()[0]
    assert n > 0


def test_the_report_names_a_node_of_another_engine(tmp_path: Path) -> None:
    from forensics.pipeline import investigate

    bundle = _bundle(tmp_path, OTHER["vllm"])
    investigate(bundle, tmp_path / "out")
    annex = (tmp_path / "out" / "technical_annex.md").read_text()
    assert "decode-0 runs vLLM: only its start-up facts" in annex
    assert "prefill-0 runs" not in annex
    html = (tmp_path / "out" / "technical_annex.html").read_text()
    assert "<strong>decode-0</strong> runs vLLM" in html
