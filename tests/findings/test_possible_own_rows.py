"""possible_reach leaves each response's own rows (the sources of its room, or of its request id, that the
rule pairs with it) out of its count by a sort of the sources and binary searches
(forensics.findings.possible._own), not by a join: on random pools (unknown rooms, request ids and times
on either side, rooms and ids shared by several rows, start-ups) the count equals what the rule itself
gives, written as the plain correlated count over the node with the OR as its filter."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from forensics.db import connect
from forensics.findings.possible import possible_reach
from forensics.findings.rules import define_rules
from tests.support import insert_rows

T0 = 1_790_000_000_000_000  # epoch microseconds

# the count as it is defined: every row of the node's pool that the rule pairs with the response, less
# those of its own room or request id (a NULL matches nothing)
PLAIN = """SELECT w.rowid, (
        SELECT count(*) FROM possible_pool p
        WHERE p.node = w.node AND possible_pair(p.started, p.gone_at, w.started, w.finished)
          AND NOT coalesce(p.room = w.recipient_room OR p.request_id = w.recipient_request_id, false))
    FROM possible_windows w ORDER BY 1"""

_time = st.one_of(st.none(), st.integers(0, 40).map(lambda s: T0 + s * 1_000_000))
_room = st.one_of(st.none(), st.integers(0, 6))
_rid = st.one_of(st.none(), st.integers(0, 6).map(lambda i: f"req-{i}"))
_node = st.sampled_from(("d0", "d1"))
_source = st.tuples(_node, _room, _rid, _time, st.one_of(st.none(), st.sampled_from((T0 + 10**7, T0 + 3 * 10**7))))
_window = st.tuples(_rid, _node, _room, _time, _time)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[list[tuple], list[tuple]]:
    """A pool, and responses that take the node and the room, the request id or both of a pool row
    (independent draws seldom meet on all three)."""
    sources = draw(st.lists(_source, min_size=1, max_size=40))
    windows = []
    for _ in range(draw(st.integers(1, 12))):
        rid, node, room, started, finished = draw(_window)
        keep = draw(st.sampled_from(("both", "room", "request id", "neither")))
        if keep != "neither":
            s = draw(st.sampled_from(sources))
            node = s[0]
            room = s[1] if keep in ("both", "room") else room
            rid = s[2] if keep in ("both", "request id") else rid
        windows.append((rid, node, room, started, finished))
    return sources, windows


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables=_tables())
@example(tables=([("d0", 1, "req-1", None, None), ("d0", 2, "req-2", None, None)], [("req-1", "d0", 1, None, None)]))
def test_own_rows_left_out_as_the_rule_says(tables: tuple[list[tuple], list[tuple]]) -> None:
    sources, windows = tables
    con = connect(":memory:", threads=1)
    define_rules(con)  # possible_pair
    con.execute("""CREATE TABLE possible_pool (node VARCHAR, room BIGINT, request_id VARCHAR, started TIMESTAMPTZ,
        gone_at TIMESTAMPTZ, reachable BOOLEAN)""")
    con.execute("""CREATE TABLE possible_windows (recipient_request_id VARCHAR, node VARCHAR, recipient_room BIGINT,
        started TIMESTAMPTZ, finished TIMESTAMPTZ, sources BIGINT)""")
    stamped = "c0, c1, c2, make_timestamptz(c3::BIGINT), make_timestamptz(c4::BIGINT), NULL"
    insert_rows(con, "possible_pool", sources, stamped)
    insert_rows(con, "possible_windows", windows, stamped)
    want = con.execute(PLAIN).fetchall()
    possible_reach(con)
    assert con.execute("SELECT rowid, sources FROM possible_windows ORDER BY 1").fetchall() == want
