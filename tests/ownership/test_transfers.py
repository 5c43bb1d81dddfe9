"""Transfer links (forensics.ownership.steps.transfers) against their definition in SQL: the joins and aggregates the
numpy passes replaced, run on the same events. Random event streams hit the edge cases (several
transfers per room, re-allocs, frees between alloc and read, no read at all, events in any order,
any chunking); simulated incidents check the real flow."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest

import forensics.ownership.execution.streams as streams
import forensics.ownership.kernels.transfer_links as transfer_links
import forensics.ownership.steps.transfers as transfers
from forensics.db import connect
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

# the definition: what the numpy passes must equal (the SQL they replaced)
REFERENCE = """
CREATE OR REPLACE TABLE ref_links AS
WITH x AS (
    SELECT node AS sender, peer AS receiver, seq AS xseq, ts AS xts, room, start, "end"
    FROM page_events WHERE op = 'transfer' AND peer IN (SELECT node FROM telemetry_nodes)
      AND coalesce(src, '') NOT IN ('sent', 'failed')
), r AS (
    SELECT x.sender, x.xseq, min(p.seq) AS rseq, arg_min(p.ts, p.seq) AS rts
    FROM x JOIN page_events p ON p.node = x.receiver AND p.room = x.room AND p.op IN ('read', 'share')
        AND p.start < x."end" AND p."end" > x.start
    GROUP BY x.sender, x.xseq
), a AS (
    SELECT x.sender, x.xseq, max(p.seq) AS aseq, arg_max(p.ts, p.seq) AS ats
    FROM x JOIN r USING (sender, xseq)
    JOIN page_events p ON p.node = x.receiver AND p.room = x.room AND p.op = 'alloc'
        AND p.start < x."end" AND p."end" > x.start AND p.seq < r.rseq
    GROUP BY x.sender, x.xseq
), f AS (
    SELECT DISTINCT x.sender, x.xseq
    FROM x JOIN r USING (sender, xseq) JOIN a USING (sender, xseq)
    JOIN page_events p ON p.node = x.receiver AND p.room = x.room AND p.op = 'free'
        AND p.start < x."end" AND p."end" > x.start AND p.seq > a.aseq AND p.seq < r.rseq
)
SELECT x.*, a.aseq, a.ats, r.rseq, r.rts, (a.aseq IS NOT NULL AND f.xseq IS NULL) AS ordinary
FROM x LEFT JOIN r USING (sender, xseq) LEFT JOIN a USING (sender, xseq) LEFT JOIN f USING (sender, xseq);
"""
ALL = "SELECT * FROM {} ORDER BY sender, xseq"


def random_events(con: duckdb.DuckDBPyConnection, seed: int, stored: str = "random()") -> None:
    rng = np.random.default_rng(seed)
    n = 3000
    ops = np.array(["alloc", "free", "read", "share", "write", "transfer"])
    node = rng.choice(["a", "b", "c"], n)
    op = ops[rng.choice(6, n, p=[0.25, 0.15, 0.2, 0.05, 0.1, 0.25])]
    start = rng.integers(0, 60, n)
    con.execute(
        """CREATE TABLE page_events AS SELECT * FROM (
           SELECT unnest($node) AS node, unnest($seq) AS seq,
                  TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_microseconds(unnest($us)) AS ts, unnest($op) AS op,
                  unnest($room) AS room, unnest($start) AS start, unnest($end) AS "end", unnest($peer) AS peer,
                  NULL::VARCHAR AS src)
           ORDER BY """
        + stored,
        {
            "node": node.tolist(),
            "seq": rng.permutation(n).tolist(),  # unique per node: unique overall
            "us": rng.integers(0, 10**9, n).tolist(),
            "op": op.tolist(),
            "room": rng.integers(0, 12, n).tolist(),
            "start": start.tolist(),
            "end": (start + rng.integers(1, 12, n)).tolist(),
            "peer": [rng.choice(["a", "b", "c", "z"]) if o == "transfer" else None for o in op],
        },
    )
    con.execute("CREATE TABLE telemetry_nodes AS SELECT DISTINCT node FROM page_events")


@pytest.mark.parametrize("seed", range(8))
def test_links_match_the_definition_on_random_events(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    con = connect(":memory:")
    in_seq = seed >= 6  # stored in seq order: one pass over each receiver's events, else two
    random_events(con, seed, "seq" if in_seq else "random()")
    passes: list[tuple[str, ...]] = []
    stream = transfers._stream
    monkeypatch.setattr(transfers, "_stream", lambda c, n, ops: passes.append(ops) or stream(c, n, ops))
    if seed % 2:  # small chunks: each pass sees the events in many pieces
        monkeypatch.setattr(streams, "CHUNK_EVENTS", 97)
    if seed % 3 == 2:  # transfers stored sorted by receiver (as with many nodes)
        monkeypatch.setattr(transfers, "SORT_RECEIVERS", 0)
    transfers.transfer_links(con)
    con.execute(REFERENCE)
    got = con.execute(ALL.format("transfer_links")).fetchall()
    assert got == con.execute(ALL.format("ref_links")).fetchall()
    kinds = con.execute(
        """SELECT count(*) FILTER (WHERE ordinary), count(*) FILTER (WHERE rseq IS NOT NULL AND NOT ordinary),
                  count(*) FILTER (WHERE rseq IS NULL) FROM transfer_links"""
    ).fetchone()
    assert all(k > 0 for k in kinds), kinds  # every kind of outcome occurs
    assert (("read", "share") in passes) != in_seq, passes


@pytest.mark.parametrize("seed", range(3))
def test_room_table_finds_every_room_and_only_those(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 5000))
    pool = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, m // 3 + 1, dtype=np.int64)
    pool[0] = np.iinfo(np.int64).min  # the extremes and zero are rooms like any other
    pool[-1] = 0
    room = rng.choice(pool, m)
    xs = rng.integers(0, 100, m)
    table, first, row, rec = transfer_links.group_by_room(room, xs, xs + 1)
    groups = {}
    for t in range(m):
        groups.setdefault(int(room[t]), []).append(t)
    assert len(first) == len(groups) + 1
    for g, (r, members) in enumerate(groups.items()):  # groups numbered in order of first transfer
        assert table[transfer_links.room_slot(table, r), 1] == g
        assert sorted(row[members]) == list(range(first[g], first[g + 1]))
        assert (rec[row[members], transfer_links.XS] == xs[members]).all()
    absent = np.setdiff1d(rng.integers(-(2**62), 2**62, 2000, dtype=np.int64), room)
    assert all(table[transfer_links.room_slot(table, int(r)), 1] < 0 for r in absent)


def test_links_match_the_definition_on_a_simulated_incident(tmp_path: Path) -> None:
    simulate(tmp_path / "sim", build_config("incident", seed=5, requests=700))
    run = Findings(tmp_path / "sim" / "bundle")
    run.con.execute(REFERENCE)
    got = run.rows(ALL.format("transfer_links"))
    assert got == run.rows(ALL.format("ref_links"))
    assert run.rows("SELECT count(*) FILTER (WHERE ordinary), count(*) FROM transfer_links")[0][0] > 100


def test_receivers_side_by_side_stay_within_the_thread_and_transfer_bounds() -> None:
    from forensics.ownership.execution.parallel import SIDE_BY_SIDE_WEIGHT, waves

    big = SIDE_BY_SIDE_WEIGHT
    weights = [10, 20, 30, big, 5]
    assert waves(weights, 1) == [[0], [1], [2], [3], [4]]
    assert waves(weights, 2) == [[0, 1], [2], [3], [4]]  # 2 and 3 together would exceed the bound
    assert waves(weights, 8) == [[0, 1, 2], [3], [4]]
    assert [i for wave in waves(weights, 3) for i in wave] == [0, 1, 2, 3, 4]  # order kept


def test_side_by_side_returns_results_in_item_order_on_separate_cursors() -> None:
    import threading

    import duckdb

    from forensics.ownership.execution.parallel import side_by_side

    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("CREATE TEMP TABLE hidden AS SELECT 1 AS v")  # temp: only `prepare` (on con) sees it
    seen_threads: set[int] = set()
    used: list[object] = []

    def prepare(i: int) -> tuple[int, int]:
        return i, con.execute("SELECT v FROM hidden").fetchall()[0][0]

    def fn(cur: duckdb.DuckDBPyConnection, job: tuple[int, int]) -> int:
        seen_threads.add(threading.get_ident())
        used.append(cur)
        i, v = job
        return cur.execute("SELECT ? * 10 + ?", [i, v]).fetchall()[0][0]

    got = list(side_by_side(con, list(range(7)), fn, prepare=prepare))
    assert got == [i * 10 + 1 for i in range(7)]
    assert all(cur is not con for cur in used)
    assert len(seen_threads) >= 2  # waves of two ran in two threads


def test_side_by_side_holds_no_result_while_the_next_wave_runs() -> None:
    import weakref

    import duckdb

    from forensics.ownership.execution.parallel import side_by_side

    class Result:
        pass

    con = duckdb.connect()
    con.execute("SET threads = 1")  # one item per wave
    refs: list[weakref.ref] = []
    alive: list[bool] = []

    def fn(cur: duckdb.DuckDBPyConnection, i: int) -> Result:
        alive.append(any(r() is not None for r in refs))
        return Result()

    for item in side_by_side(con, list(range(3)), fn):
        refs.append(weakref.ref(item))
        del item  # stored: the caller lets go (as transfer_links does)
    assert alive == [False, False, False]
