"""`forensics simulate --engine vllm` writes vLLM 0.33.0's request lines of the run (forensics.simulate.
vllm_logs), and ingest reads them (forensics.engines.vllm) into what the simulator's truth says: every
node is vLLM's; every request the truth routed has its Received request on its prefill and its decode;
the decode's kv_transfer_params name its prefill's engine id (its start-up line, read here from the log
text), its prefill's engine request id (that node's Added request) and the blocks of the room in the
prefill's page events; an aborted request's decode logs its abort."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from forensics.pipeline import ingest_bundle
from forensics.simulate import build_config
from forensics.simulate.run import simulate
from tests import support

PS = 16


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("vsim")
    simulate(out, build_config(seed=7, requests=240, page_size=PS, engine="vllm"))
    res = ingest_bundle(out / "bundle", out / "incident.duckdb")
    return out, support.open_db(res.db)


def _truth(out: Path) -> list[dict[str, str]]:
    with (out / "truth" / "responses.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_every_node_is_read_as_vllm(run: tuple[Path, object]) -> None:
    out, con = run
    nodes = sorted(p.name for p in (out / "bundle" / "engine").iterdir())
    got = con.execute("SELECT node, engine, role, page_size FROM node_config ORDER BY node").fetchall()
    assert got == [(n, "vllm", n.split("-")[0], PS) for n in nodes]
    assert con.execute("SELECT count(*) FROM rejected").fetchone() == (0,)


def test_the_links_are_the_truth(run: tuple[Path, object]) -> None:
    out, con = run
    engines = {}  # the NIXL engine id each node's start-up line names
    for log in (out / "bundle" / "engine").glob("*/server.log"):
        m = re.search(r"Initializing NIXL Scheduler (\S+)", log.read_text())
        assert m
        engines[m[1]] = log.parent.name
    truth = _truth(out)
    assert truth
    checked = aborted = 0
    for t in truth:
        rid = f"cmpl-{t['request_id']}-0"
        rows = con.execute("SELECT node FROM engine_requests WHERE rid = ? AND kind = 'received'", [rid]).fetchall()
        received = {n for (n,) in rows}
        assert t["prefill_node"] in received
        link = con.execute(
            "SELECT node, remote_engine, remote_rid, remote_block_ids FROM engine_request_links WHERE rid = ? "
            "AND role = 'decode'",
            [rid],
        ).fetchall()
        if not link:  # its prefill never ended (a placeholder the prefill refused): the decode never got it
            continue
        ((node, engine, remote_rid, blocks),) = link
        assert node == t["decode_node"] and engines[engine] == t["prefill_node"]
        assert con.execute(
            "SELECT node FROM engine_requests WHERE kind = 'added' AND rid = ?", [remote_rid]
        ).fetchall() == [(t["prefill_node"],)]
        want = con.execute(
            'SELECT DISTINCT unnest(range(start // ?, ("end" - 1) // ? + 1)) AS b FROM page_events '
            "WHERE node = ? AND room = ? AND op IN ('alloc', 'share') ORDER BY b",
            [PS, PS, t["prefill_node"], int(t["room"])],
        ).fetchall()
        assert sorted(json.loads(blocks)) == [b for (b,) in want]
        if t["aborted"] == "1":
            aborted += 1
            assert con.execute(
                "SELECT count(*) FROM engine_requests e JOIN engine_request_links l ON l.node = e.node "
                "WHERE l.rid = ? AND l.role = 'decode' AND e.kind = 'aborted' AND e.rid LIKE ? || '-%'",
                [rid, rid],
            ).fetchone() == (1,)
        checked += 1
    assert checked > len(truth) // 2 and aborted > 0
