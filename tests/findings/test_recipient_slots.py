"""recipient_slots (numpy) must equal the window query that defines it (findings/queries/recipient_slots.sql)
on ranges that overlap, nest, touch, repeat and tie, on several nodes, and when the packed key cannot hold
the slot positions (the query then runs instead)."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.db import connect, run_query
from forensics.findings import recipient_slots


def _segments(con, rows: list[tuple]) -> None:
    con.execute("""CREATE OR REPLACE TABLE exposure_segments (node VARCHAR, seg BIGINT, seg_start BIGINT,
        seg_end BIGINT, recipient_room BIGINT, source_room BIGINT, kind VARCHAR, first_ts TIMESTAMPTZ,
        certain BOOLEAN)""")
    if rows:
        con.executemany(
            "INSERT INTO exposure_segments VALUES (?, 0, ?, ?, ?, 0, 'stale', NULL, true)",
            [(n, s, e, r) for n, r, s, e in rows],
        )
    # as ownership/queries/node_index.sql numbers the nodes (there: those of page_events)
    con.execute("""CREATE OR REPLACE TABLE node_index AS
        SELECT node, (row_number() OVER (ORDER BY node))::BIGINT * 1099511627776 AS base
        FROM (SELECT DISTINCT node FROM exposure_segments WHERE node IS NOT NULL)""")


def _both(con) -> tuple[list, list]:
    run_query(con, "findings", "recipient_slots")
    want = con.execute("SELECT * FROM recipient_slots ORDER BY ALL").fetchall()
    recipient_slots(con)
    got = con.execute("SELECT * FROM recipient_slots ORDER BY ALL").fetchall()
    return want, got


@pytest.mark.parametrize("seed", range(6))
def test_numpy_union_equals_the_window_query(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(int(rng.integers(1, 400))):
        node = f"decode-{int(rng.integers(0, 3))}"
        room = int(rng.choice([7, -5, 2**62 + 3, int(rng.integers(0, 2**63 - 1))]))  # rooms shared across nodes
        start = int(rng.integers(0, 300))
        rows.append((node, room, start, start + int(rng.integers(1, 60))))
    rows += [rows[0], (rows[1][0], rows[1][1], rows[1][3], rows[1][3] + 5)]  # a repeat, a touching range
    con = connect(":memory:")
    _segments(con, rows)
    want, got = _both(con)
    assert want == got
    assert len(want) == len({(n, r) for n, r, _, _ in rows})


def test_hand_computed_union() -> None:
    con = connect(":memory:")
    # [0,10) + [5,8) nested + [10,12) touching + [20,30) + [25,40): 12 + 20 = 32; another node apart
    _segments(
        con, [("d", 1, 0, 10), ("d", 1, 5, 8), ("d", 1, 10, 12), ("d", 1, 20, 30), ("d", 1, 25, 40), ("e", 1, 0, 3)]
    )
    recipient_slots(con)
    assert con.execute("SELECT * FROM recipient_slots ORDER BY ALL").fetchall() == [("d", 1, 32), ("e", 1, 3)]


def test_positions_beyond_the_packed_key_take_the_query() -> None:
    con = connect(":memory:")
    _segments(con, [("d", 1, 2**33, 2**33 + 10), ("d", 1, 2**33 + 5, 2**33 + 20)])
    want, got = _both(con)
    assert want == got == [("d", 1, 20)]


def test_no_exposures() -> None:
    con = connect(":memory:")
    _segments(con, [])
    assert _both(con) == ([], [])


def test_a_null_takes_the_query() -> None:
    con = connect(":memory:")
    _segments(con, [("d", 1, 0, 10), ("d", 1, 5, 20), ("d", 2, 3, 4)])
    con.execute("INSERT INTO exposure_segments VALUES (NULL, 0, 0, 7, 1, 0, 'stale', NULL, true)")
    con.execute("INSERT INTO exposure_segments VALUES ('d', 0, 0, 7, NULL, 0, 'stale', NULL, true)")
    want, got = _both(con)
    assert want == got and (None, 1, 7) in got and ("d", None, 7) in got
