"""telemetry_nodes from ingest's per-file figures (page_file_stats) equals its definition over the
events, and is used only when page_events kept every staged row; ingest's screen of slots beyond the
pools lets the exact check be skipped only when no row could be one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis import Findings

import forensics.ownership as ownership
from forensics.db import run_query
from forensics.simulate import build_config, simulate

TELEMETRY = "SELECT * FROM telemetry_nodes ORDER BY node"


@pytest.mark.parametrize("junk", [False, True])
def test_telemetry_from_file_figures_equals_the_definition(
    tmp_path: Path, junk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    simulate(tmp_path / "sim", build_config("incident", seed=3, requests=200))
    bundle = tmp_path / "sim" / "bundle"
    if junk:  # a page file with one bad row: rejected, so the figures no longer stand for page_events
        row = {
            "node": "decode-0",
            "seq": 1,
            "ts": "2026-08-29T10:00:00Z",
            "op": "teleport",
            "room": 1,
            "start": 0,
            "end": 1,
        }
        (bundle / "pages" / "zz-junk.jsonl").write_text(json.dumps(row) + "\n")
    used: list[str] = []
    real = ownership.run_query
    monkeypatch.setattr(
        ownership, "run_query", lambda con, stage, name, **p: used.append(name) or real(con, stage, name, **p)
    )
    run = Findings(bundle)
    assert used == ["telemetry_nodes" if junk else "telemetry_nodes_files"]
    got = run.rows(TELEMETRY)
    assert len(got) >= 2 and all(r[3] > 0 for r in got)
    run_query(run.con, "ownership", "telemetry_nodes")  # the definition, over the events
    assert run.rows(TELEMETRY) == got
    assert run.rows("SELECT count(*) FROM rejected")[0][0] == (1 if junk else 0)


def test_beyond_pool_screen_counts_what_the_exact_check_rejects(tmp_path: Path) -> None:
    cfg = build_config("incident", seed=3, requests=120)
    simulate(tmp_path / "sim", cfg)
    bundle = tmp_path / "sim" / "bundle"
    run = Findings(bundle)
    pools = dict(run.rows("SELECT node, (pool_tokens // page_size + 1) * page_size FROM node_config"))
    assert run.rows("SELECT coalesce(sum(beyond), 0) FROM page_file_stats")[0][0] == 0
    node = "decode-0"
    row = {
        "node": node,
        "seq": 10**9,
        "ts": "2026-08-29T10:00:00Z",
        "op": "alloc",
        "room": 1,
        "start": pools[node],
        "end": pools[node] + 1,
    }
    (bundle / "pages" / "zz-beyond.jsonl").write_text(json.dumps(row) + "\n")
    run = Findings(bundle)
    assert run.rows("SELECT coalesce(sum(beyond), 0) FROM page_file_stats")[0][0] == 1
    reasons = [r[0] for r in run.rows("SELECT reason FROM rejected")]
    assert len(reasons) == 1 and "beyond the pool" in reasons[0]
