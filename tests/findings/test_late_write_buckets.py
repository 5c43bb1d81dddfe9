"""late_write_rule finds its pairs by node and time bucket (findings/queries/late_write_rule.sql), not by
a join on the node alone: on random lifecycles (landings without end, rooms held far longer than most,
unknown times and resolutions, rooms whose recorded times run backwards, several nodes) it gives the
rows of the rule itself, written as that plain join."""

from __future__ import annotations

import random

import pytest

from forensics.db import connect
from forensics.paths import load_query
from tests.support import insert_rows

# the rule as the file's header states it: every finished room of the node that holds pages while the
# aborted room's transfer may land (the definition the buckets must reproduce, row for row)
RULE = """
WITH landing AS (
    SELECT node, room AS source_room, t_free,
           greatest(t_free, coalesce(t_land_lo, t_free)) AS lo, coalesce(t_land_hi, 'infinity'::DOUBLE) AS hi
    FROM node_lifecycle WHERE aborted
)
SELECT l.node, v.room, l.source_room, l.lo, l.hi
FROM landing l JOIN node_lifecycle v ON v.node = l.node AND NOT v.aborted AND v.room <> l.source_room
WHERE l.hi >= l.t_free AND v.t_alloc - alloc_rounding() <= l.hi AND v.t_end + v.res >= l.lo"""


def _lifecycles(seed: int, rooms: int) -> list[tuple[object, ...]]:
    rng = random.Random(seed)
    t0 = 1_790_000_000.0
    rows = []
    for room in range(rooms):
        t = t0 + room * rng.choice((0.002, 0.05, 0.4))
        held = rng.choice((0.5, 3.0, 8.0)) if rng.random() > 0.03 else rng.uniform(300, 3000)
        t_alloc = None if rng.random() < 0.03 else t + rng.uniform(0, 0.01)
        t_end = None if rng.random() < 0.03 else t + held * (-0.1 if rng.random() < 0.02 else 1)
        res = rng.choice((None, 0.001, 1.0))
        aborted = rng.random() < 0.15
        t_free = t + rng.uniform(0, 2)
        lo = None if rng.random() < 0.1 else t + rng.uniform(-1, 3)
        hi = None if rng.random() < 0.1 else (lo or t) + rng.choice((-0.5, 0.2, 2.0, 900.0))
        rows.append((f"decode-{room % 3}", room, t_alloc, t_end, res, aborted, t_free, lo, hi))
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_buckets_give_the_rule_rows(seed: int) -> None:
    con = connect(":memory:")
    con.execute("""CREATE TEMP TABLE node_lifecycle (node VARCHAR, room BIGINT, t_alloc DOUBLE, t_end DOUBLE,
        res DOUBLE, aborted BOOLEAN, t_free DOUBLE, t_land_lo DOUBLE, t_land_hi DOUBLE)""")
    insert_rows(con, "node_lifecycle", _lifecycles(seed, 3000))
    con.execute(load_query("findings", "late_write_rule"))
    got = con.execute("SELECT * FROM late_write_rule ORDER BY ALL").fetchall()
    want = con.execute(f"SELECT * FROM ({RULE}) ORDER BY ALL").fetchall()
    assert want, "the lifecycles must hold rooms a late transfer may have hit"
    assert any(h == float("inf") for *_, h in want), "and landings without end"
    assert got == want
