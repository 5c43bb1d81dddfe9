"""Issue #50: the vLLM PD headline as tight as the evidence allows, against the simulator's truth (seed 83,
which no other test uses; Envoy's access log names no room and no decode node, every node has page events):
- a decode's `Received request` line names its gateway record (vLLM's id holds the gateway's) and the
  prefill's blocks it reads; the prefill's page events name the room given those blocks: the record is
  joined to its room (ingest/queries/vllm_block_links.sql), so an exposed room is its record's row, with
  its account, not a row keyed by its room beside the record's (before: every exposed response was a
  "room:" row and its record's NIXL-line row another, the headline "9 to 20" for a true 12);
- every such join is the truth's;
- the least distinct responses: each record is one room's at most, so no more rows are one response with
  another than the largest matching of rooms and records (before: every room with a candidate was
  subtracted, 11 rooms against 9 records); checked on small graphs against a brute-force matching;
- the split by status counts what the range counts (distinct responses), never rows: the truth's confirmed
  and indeterminate distinct responses lie within the printed ranges (before: "(11 confirmed, 9
  indeterminate)" beside "9 to 20", the truth 11 and 1)."""

from __future__ import annotations

import csv
import itertools
import random
import re
from pathlib import Path

import duckdb
import pytest

from benchmarks.vllm_pd_eval import to_truth, truth_ids
from forensics.db import connect, query_rows, run_query
from forensics.findings.bounds import ranged
from forensics.pipeline import InvestigationResult, investigate
from forensics.simulate import build_config
from forensics.simulate.run import simulate

HOW = "vLLM decode line naming the room's prefill blocks"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, InvestigationResult]:
    out = tmp_path_factory.mktemp("link")
    simulate(out, build_config(seed=83, requests=300, engine="vllm", vllm_pd=True, gateway_format="envoy"))
    return out, investigate(out / "bundle", out / "out", as_of="2026-09-10T12:00:00Z")


def _db(out: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(out / "out" / "incident.duckdb"), read_only=True)


def _truth_rows(out: Path) -> dict[str, str]:
    """Each affected row's distinct true response, with the stronger status of its rows (one response in
    two rows is one response)."""
    renamed, rooms = truth_ids(out / "truth")
    with _db(out) as con:
        rows = con.execute("SELECT request_id, room, status FROM internal.affected_responses").fetchall()
    got: dict[str, str] = {}
    for request_id, room, status in rows:
        k = to_truth(renamed, rooms, request_id, room)
        got[k] = "confirmed" if "confirmed" in (status, got.get(k)) else status
    return got


def test_the_block_link_joins_records_to_their_rooms(run: tuple[Path, InvestigationResult]) -> None:
    out, _ = run
    truth = {t["request_id"]: t for t in _read(out / "truth" / "responses.csv")}
    renamed, _ = truth_ids(out / "truth")
    with _db(out) as con:
        joined = con.execute(
            "SELECT g.request_id, j.room FROM internal.gateway_joined j JOIN internal.gateway g USING (file_id, row) "
            "WHERE j.how = ?",
            [HOW],
        ).fetchall()
        rows = con.execute("SELECT request_id, account_id FROM internal.affected_responses").fetchall()
    assert joined
    for request_id, room in joined:  # every join the truth's: the record's request was served in that room
        assert truth[renamed.get(request_id, request_id)]["room"] == str(room), request_id
    exposed = {k for k, t in truth.items() if t["exposed"] == "1"}
    keyed_by_room = [r for r, _ in rows if r.startswith("room:")]
    # most exposed responses are their record's row now (before: every one was a room's row)
    assert len(keyed_by_room) * 2 < len(exposed), keyed_by_room
    for request_id, account in rows:  # a record's row carries its account: the truth's
        t = truth.get(renamed.get(request_id, request_id))
        if t is not None:
            assert account == t["account_id"]


def test_bounds_hold_the_truth_and_the_split_counts_responses(run: tuple[Path, InvestigationResult]) -> None:
    out, result = run
    h = result.headline
    got = _truth_rows(out)
    confirmed = sum(1 for s in got.values() if s == "confirmed")
    assert h["affected"] - h["possible_overlap"] <= len(got) <= h["affected"]
    assert h["confirmed_least"] <= confirmed <= h["confirmed"]
    assert h["indeterminate_least"] <= len(got) - confirmed <= h["indeterminate"]
    # as printed: the range and its split by status, each part holding the truth
    line = next(s for s in result.summary().splitlines() if s.startswith("Affected responses:"))
    m = re.match(r"Affected responses: ([\d to]+) \(([\d to]+) confirmed, ([\d to]+) indeterminate\)", line)
    assert m, line

    def bounds(text: str) -> tuple[int, int]:
        ends = [int(x) for x in text.split(" to ")]
        return ends[0], ends[-1]

    for text, true in ((m[1], len(got)), (m[2], confirmed), (m[3], len(got) - confirmed)):
        lo, hi = bounds(text)
        assert lo <= true <= hi, (line, true)
    assert bounds(m[2])[1] + bounds(m[3])[1] == bounds(m[1])[1]  # the parts' most add up to the whole's
    md = (out / "out" / "report.md").read_text()
    words = ranged(h["customer_least"], h["customer"])
    split = (
        f"{ranged(h['customer_confirmed_least'], h['customer_confirmed'])} confirmed, "
        f"{ranged(h['customer_indeterminate_least'], h['customer_indeterminate'])} indeterminate"
    )
    assert f"**{words}** ({split})" in md


def _matching(rooms: list[str | None], records: list[str | None]) -> int:
    """The largest matching by brute force: a room on node n may be a record of node n or of no node."""
    best = 0
    for k in range(min(len(rooms), len(records)), 0, -1):
        for rs in itertools.combinations(range(len(rooms)), k):
            for gs in itertools.permutations(range(len(records)), k):
                if all(records[g] in (None, rooms[r]) for r, g in zip(rs, gs, strict=True)):
                    return k
    return best


def test_the_least_is_the_rows_less_the_largest_matching(tmp_path: Path) -> None:
    """response_bounds on small made-up graphs (rooms no record names, records that name no room, each on a
    decode node or none) against a brute-force matching; the status split's least likewise for confirmed
    rooms and confirmed records."""
    rng = random.Random(83)
    for case in range(40):
        con = connect(tmp_path / f"b{case}.duckdb")
        nodes = ["decode-0", "decode-1", None]
        rooms = [rng.choice(nodes[:2]) for _ in range(rng.randint(0, 4))]
        records = [rng.choice(nodes) for _ in range(rng.randint(0, 4))]
        r_conf = [rng.random() < 0.5 for _ in rooms]
        g_conf = [rng.random() < 0.3 for _ in records]
        con.execute(
            "CREATE TABLE affected_responses (request_id VARCHAR, account_id VARCHAR, cohort VARCHAR, "
            "status VARCHAR, decode_node VARCHAR, room BIGINT)"
        )
        con.execute("CREATE TABLE gateway (request_id VARCHAR, bootstrap_room BIGINT)")
        con.execute("CREATE TABLE exposures (recipient_request_id VARCHAR)")
        for i, (node, c) in enumerate(zip(rooms, r_conf, strict=True)):
            status = "confirmed" if c else "indeterminate"
            con.execute(
                "INSERT INTO affected_responses VALUES (?, NULL, 'customer', ?, ?, ?)", [f"room:{i}", status, node, i]
            )
        for i, (node, c) in enumerate(zip(records, g_conf, strict=True)):
            status = "confirmed" if c else "indeterminate"
            con.execute(
                "INSERT INTO affected_responses VALUES (?, 'a', 'customer', ?, ?, NULL)", [f"r{i}", status, node]
            )
            con.execute("INSERT INTO gateway VALUES (?, NULL)", [f"r{i}"])
        run_query(con, "findings", "response_overlap")
        (h,) = query_rows(con, "findings", "headline")
        con.close()
        n = len(rooms) + len(records)
        assert h["affected"] == n
        assert h["affected"] - h["possible_overlap"] == n - _matching(rooms, records), (rooms, records)
        conf_rooms = [r for r, c in zip(rooms, r_conf, strict=True) if c]
        conf_records = [g for g, c in zip(records, g_conf, strict=True) if c]
        assert h["confirmed_least"] == sum(r_conf) + sum(g_conf) - _matching(conf_rooms, conf_records)
