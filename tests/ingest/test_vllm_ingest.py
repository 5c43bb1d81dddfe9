"""Ingest reads a vLLM node's request lines (forensics.ingest.startup.read_requests through
forensics.engines.vllm): a prefill and a decode node of one PD request, their start-up lines (a real
vLLM 0.11 start, tests/data/audit) before the request lines of tests/data/vllm_lines, give the rows the
per-line reader gives, in engine_requests and engine_request_links, with the year of bundle.toml
[engine] log_year; without it, their times are NULL and each file says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from forensics.engines.facts import EngineRows
from forensics.engines.vllm.reader import dated
from forensics.errors import InputError
from forensics.intake import load_bundle_config
from forensics.pipeline import ingest_bundle
from tests import support

START = support.DATA / "audit" / "vllm_v1_hybrid_ok.log"
PD = support.DATA / "vllm_lines" / "composed_pd_0.33.0.log"
UTC = ZoneInfo("UTC")


def _bundle(tmp_path: Path, year: int | None) -> tuple[Path, dict[str, bytes]]:
    bundle = tmp_path / "bundle"
    shutil.copytree(support.EXAMPLE / "bundle", bundle)
    lines = PD.read_bytes().splitlines(keepends=True)
    # the prefill's lines (its request, its Added request) on prefill-0, the decode's on decode-0
    logs = {"prefill-0": lines[0] + lines[3], "decode-0": lines[1] + lines[2] + lines[4]}
    for node, body in logs.items():
        (bundle / "engine" / node / "server.log").write_bytes(START.read_bytes() + body)
    toml = bundle / "bundle.toml"
    text = toml.read_text()
    if year is not None:
        assert "[engine]\n" in text
        toml.write_text(text.replace("[engine]\n", f"[engine]\nlog_year = {year}\n"))
    return bundle, logs


def _expected(node: str, body: bytes, year: int | None) -> tuple[list[Any], list[Any]]:
    """The per-line reader's rows of the node's request lines, at their line numbers in its log."""
    first = START.read_bytes().count(b"\n") + 1
    rows, read = EngineRows(), dated(year).text
    for i, raw in enumerate(body.splitlines(keepends=True)):
        assert read(raw, node, 0, first + i, UTC, rows)
    reqs = sorted((r["node"], r["line"], r["kind"], r["rid"], r["ts"], r["detail"]) for r in rows.requests)
    links = [(r["node"], r["line"], r["rid"], r["role"], r["remote_engine"], r["remote_rid"]) for r in rows.links]
    return reqs, links


def test_a_vllm_pd_pair_gives_its_request_and_link_rows(tmp_path: Path) -> None:
    bundle, logs = _bundle(tmp_path, 2026)
    con = support.open_db(ingest_bundle(bundle, tmp_path / "incident.duckdb").db)
    for node, body in logs.items():
        reqs, links = _expected(node, body, 2026)
        got = con.execute(
            "SELECT node, line, kind, rid, ts, detail FROM engine_requests WHERE node = ? ORDER BY line, rid", [node]
        ).fetchall()
        assert got == reqs and got
        got_links = con.execute(
            "SELECT node, line, rid, role, remote_engine, remote_rid FROM engine_request_links WHERE node = ? "
            "ORDER BY line",
            [node],
        ).fetchall()
        assert got_links == links
    # the decode names the prefill's engine request, which the prefill's own Added request line logs
    (remote,) = con.execute("SELECT remote_rid FROM engine_request_links WHERE role = 'decode'").fetchone()
    assert con.execute("SELECT node FROM engine_requests WHERE kind = 'added' AND rid = ?", [remote]).fetchall() == [
        ("prefill-0",)
    ]
    assert con.execute("SELECT DISTINCT engine FROM node_config ORDER BY 1").fetchall() == [("vllm",)]


def test_without_log_year_the_times_are_unknown(tmp_path: Path) -> None:
    bundle, _ = _bundle(tmp_path, None)
    con = support.open_db(ingest_bundle(bundle, tmp_path / "incident.duckdb").db)
    assert con.execute("SELECT count(*), count(ts) FROM engine_requests").fetchone() == (6, 0)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for node in ("prefill-0", "decode-0"):
        entry = next(e for e in manifest["inputs"] if e["path"] == f"engine/{node}/server.log")
        assert any("log_year" in n for n in entry["notes"])
        assert entry["rows_read"] == entry["rows_loaded"] and entry["rows_rejected"] == 0


def test_log_year_must_be_a_year(tmp_path: Path) -> None:
    for bad in ('"2026"', "1969", "true", "2026.0"):
        (tmp_path / "bundle.toml").write_text(f"[engine]\nlog_year = {bad}\n")
        with pytest.raises(InputError, match="log_year"):
            load_bundle_config(tmp_path)
    (tmp_path / "bundle.toml").write_text("[engine]\nlog_year = 2026\n")
    assert load_bundle_config(tmp_path).log_year == 2026
