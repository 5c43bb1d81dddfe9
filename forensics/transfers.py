"""Transfer links: for each transfer, its room's alloc before and read after it on the receiver, in numpy.

A transfer (logged by the sender) is *ordinary* when its room allocated the slots on the receiver and
read them later without freeing them in between: it landed after that alloc and before that read, and
those stamps bound the clock offset between the two nodes (queries/ownership/clock_bounds.sql).
Per transfer, over the receiver's events of the same room whose slots overlap the transferred ones:
  rseq, rts  the first read or share (lowest seq) and its stamp;
  aseq, ats  the last alloc before rseq;
  ordinary   aseq exists and no free lies strictly between aseq and rseq.
These are a minimum and two maxima, so the receiver's events can come in any order: two streamed
passes (reads and shares, then allocs and frees), each event matched to the transfers of its room by
a binary search over them, compiled with numba. This replaces three joins and per-transfer aggregates
over every event, which ran out of memory at 1B events (90M transfers).
Reads: page_events, telemetry_nodes. Writes: transfer_links.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

from forensics.db import scalar, timed
from forensics.parallel import receivers, side_by_side
from forensics.streams import chunks

# receiver events per streamed chunk (memory stays bounded however many events a node has)
CHUNK_EVENTS = 8_000_000
SORT_RECEIVERS = 16  # more nodes than this: the transfers are stored sorted by receiver
NONE_HI = np.iinfo(np.int64).max  # no read found
NONE_LO = np.iinfo(np.int64).min  # no alloc / free found


@njit(cache=True, nogil=True)
def _match(rooms, order, xs, xe, ev, eo, reads, rseq, rts, aseq, ats, fseq):  # pragma: no cover
    """Match each event (ev: room, seq, t, start, end, is_free arrays; visited in the order eo, which
    sorts them by room) to the transfers of its room whose slots it overlaps (rooms: the transfers'
    rooms sorted; order: their indices). Events come sorted by room, so each search gallops forward
    from the last one. reads: the events are reads and shares (keep the lowest seq per transfer),
    else allocs and frees before that read (keep the highest seq of each)."""
    ev_room, ev_seq, ev_t, ev_s, ev_e, ev_free = ev
    n = rooms.size
    at = 0  # first transfer whose room is not below the current event's
    for k in range(eo.size):
        i = eo[k]
        r = ev_room[i]
        if at < n and rooms[at] < r:
            lo, step = at, 1  # rooms[lo] < r
            while lo + step < n and rooms[lo + step] < r:
                lo += step
                step *= 2
            at = lo + 1 + np.searchsorted(rooms[lo + 1 : min(lo + step, n)], r)
        j = at
        while j < n and rooms[j] == r:
            t = order[j]
            j += 1
            if not (xs[t] < ev_e[i] and xe[t] > ev_s[i] and ev_seq[i] < rseq[t]):
                continue
            if reads:
                rseq[t] = ev_seq[i]
                rts[t] = ev_t[i]
            elif ev_free[i]:
                fseq[t] = max(fseq[t], ev_seq[i])
            elif ev_seq[i] > aseq[t]:
                aseq[t] = ev_seq[i]
                ats[t] = ev_t[i]


def _stream(con: duckdb.DuckDBPyConnection, node: str, ops: tuple[str, ...]):
    """The receiver's events of the given ops, in chunks, as (room, seq, t, start, end, is_free) arrays."""
    return chunks(
        con,
        f"""SELECT room, seq, epoch_us(ts) AS t, start, "end", op = 'free' AS is_free
           FROM page_events WHERE node = $node AND op IN ({", ".join(f"'{o}'" for o in ops)})""",
        {"node": node},
        (np.int64, np.int64, np.int64, np.int64, np.int64, np.bool_),
        CHUNK_EVENTS,
    )


def link_receiver(con: duckdb.DuckDBPyConnection, node: str, x: pa.Table) -> pa.Table:
    """transfer_links rows for the transfers `x` into `node` (columns as in xfers, plus the links)."""
    room = x.column("room").to_numpy()
    xs = np.ascontiguousarray(x.column("start").to_numpy(), dtype=np.int64)
    xe = np.ascontiguousarray(x.column("end").to_numpy(), dtype=np.int64)
    order = np.argsort(room, kind="stable")
    rooms = np.ascontiguousarray(room[order], dtype=np.int64)
    m = room.size
    rseq = np.full(m, NONE_HI, dtype=np.int64)
    rts = np.zeros(m, dtype=np.int64)
    aseq = np.full(m, NONE_LO, dtype=np.int64)
    ats = np.zeros(m, dtype=np.int64)
    fseq = np.full(m, NONE_LO, dtype=np.int64)
    if m:  # reads first: the allocs and frees that count are those before the first read
        for reads, ops in ((True, ("read", "share")), (False, ("alloc", "free"))):
            for ev in _stream(con, node, ops):
                eo = np.argsort(ev[0])  # any order within a room: the kernel keeps minima and maxima
                _match(rooms, order, xs, xe, tuple(ev), eo, reads, rseq, rts, aseq, ats, fseq)
    read = rseq != NONE_HI
    alloc = read & (aseq != NONE_LO)  # an alloc counts only before a read
    ordinary = alloc & ~(fseq > aseq)
    return (
        x.append_column("aseq", pa.array(aseq, mask=~alloc))
        .append_column("ats_us", pa.array(ats, mask=~alloc))
        .append_column("rseq", pa.array(rseq, mask=~read))
        .append_column("rts_us", pa.array(rts, mask=~read))
        .append_column("ordinary", pa.array(ordinary))
    )


def transfer_links(con: duckdb.DuckDBPyConnection) -> None:
    """Create transfer_links: every transfer into a node with telemetry, with its room's alloc and read
    on the receiver and whether it is ordinary. Receivers side by side (forensics.parallel)."""
    with timed("ownership/transfer_xfers"):
        # each receiver's transfers are read with WHERE receiver = ?: with many receivers, store them
        # sorted so that each read skips the others' row groups; with a few, a scan each is cheaper
        # than sorting (90M transfers at 1B events)
        many = scalar(con, "SELECT count(*) FROM telemetry_nodes") > SORT_RECEIVERS
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE xfers AS
               SELECT node AS sender, peer AS receiver, seq AS xseq, ts AS xts, room, start, "end"
               FROM page_events WHERE op = 'transfer' AND peer IN (SELECT node FROM telemetry_nodes)
               {"ORDER BY receiver" if many else ""}"""
        )
    con.execute(
        """CREATE OR REPLACE TABLE transfer_links (sender VARCHAR, receiver VARCHAR, xseq BIGINT,
           xts TIMESTAMPTZ, room BIGINT, start BIGINT, "end" BIGINT, aseq BIGINT, ats TIMESTAMPTZ,
           rseq BIGINT, rts TIMESTAMPTZ, ordinary BOOLEAN)"""
    )
    nodes, weights = receivers(con, "xfers")

    def fetch(node: str) -> tuple[str, pa.Table]:  # xfers is a temp table: read on `con`
        x = con.sql(
            'SELECT sender, receiver, xseq, xts, room, start, "end" FROM xfers WHERE receiver = $node',
            params={"node": node},
        ).to_arrow_table()
        return node, x

    def link(cur: duckdb.DuckDBPyConnection, job: tuple[str, pa.Table]) -> pa.Table:
        return link_receiver(cur, *job)

    for table in side_by_side(con, nodes, link, prepare=fetch, weights=weights):
        con.register("transfer_links_out", table)
        try:
            con.execute(
                """INSERT INTO transfer_links
                   SELECT sender, receiver, xseq, xts, room, start, "end", aseq,
                          make_timestamp(ats_us)::TIMESTAMPTZ, rseq, make_timestamp(rts_us)::TIMESTAMPTZ, ordinary
                   FROM transfer_links_out"""
            )
        finally:
            con.unregister("transfer_links_out")
    con.execute("DROP TABLE xfers")
