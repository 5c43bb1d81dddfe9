"""Transfer links: for each transfer, its room's alloc before and read after it on the receiver, in numpy.

A transfer (logged by the sender) is *ordinary* when its room allocated the slots on the receiver and
read them later without freeing them in between: it landed after that alloc and before that read, and
those stamps bound the clock offset between the two nodes (ownership/queries/clock_bounds.sql).
Per transfer, over the receiver's events of the same room whose slots overlap the transferred ones:
  rseq, rts  the first read or share (lowest seq) and its stamp;
  aseq, ats  the last alloc before rseq;
  ordinary   aseq exists and no free lies strictly between aseq and rseq.
These are a minimum and two maxima. One streamed pass over the receiver's events in seq order (as
instrumentation stores them) finds them all; events in any other order take two passes (reads and
shares, then allocs and frees). Each event finds the transfers of its room through a hash table of
the rooms, compiled with numba: no sort of the events. This replaces three joins and per-transfer
aggregates over every event, which ran out of memory at 1B events (90M transfers), and a sort of each
chunk by room with a binary search per event (2.7x slower).
Reads: page_events, telemetry_nodes. Writes: transfer_links.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import duckdb
import numpy as np
import pyarrow as pa
from numba import njit

from forensics.db import arrow_view, scalar, timed
from forensics.ownership.execution.parallel import receivers, side_by_side
from forensics.ownership.execution.streams import chunks, in_order, rising

SORT_RECEIVERS = 16  # more nodes than this: the transfers are stored sorted by receiver
NONE_HI = np.iinfo(np.int64).max  # no read found
NONE_LO = np.iinfo(np.int64).min  # no alloc / free found


# the link walk's own kinds of receiver event, not forensics.keys' op codes (a read and a share are one
# kind here, and page_events' ops are text): reads and shares (the first counts), allocs and frees
# (before it)
KIND_READ, KIND_ALLOC, KIND_FREE = 0, 1, 2
_OPK = f"CASE WHEN op IN ('read', 'share') THEN {KIND_READ} WHEN op = 'alloc' THEN {KIND_ALLOC} ELSE {KIND_FREE} END"
# per transfer, in group order: its slots, then what the receiver's events say about it
XS, XE, RSEQ, RTS, ASEQ, ATS, FSEQ = range(7)


@njit(cache=True, nogil=True)
def _slot(table, room):  # pragma: no cover
    """Where `room` is, or would go, in the open-addressing room table (rows: room, group or -1 when
    free; a power of two of them, at most 3/4 used)."""
    mask = table.shape[0] - 1
    u = np.uint64(room) * np.uint64(0x9E3779B97F4A7C15)
    h = np.int64(u ^ (u >> np.uint64(32))) & mask
    while table[h, 1] >= 0 and table[h, 0] != room:
        h = (h + 1) & mask
    return h


@njit(cache=True, nogil=True)
def _reset(rec):  # pragma: no cover
    for r in range(rec.shape[0]):
        rec[r, RSEQ] = NONE_HI
        rec[r, RTS] = 0
        rec[r, ASEQ] = NONE_LO
        rec[r, ATS] = 0
        rec[r, FSEQ] = NONE_LO


@njit(cache=True, nogil=True)
def _group(room, xs, xe):  # pragma: no cover
    """Group the transfers by room, groups numbered in order of first transfer (so the groups of
    rooms active at the same time lie close together). Returns (room table, first row of each group
    and one past the last, transfer -> row, rows: xs, xe and the link fields, as _reset sets them)."""
    m = room.size
    size = 16
    while 3 * size < 4 * m:  # at most 3/4 full
        size *= 2
    table = np.empty((size, 2), dtype=np.int64)
    table[:, 1] = -1
    of = np.empty(m, dtype=np.int64)
    count = np.zeros(m + 1, dtype=np.int64)
    groups = 0
    for t in range(m):
        h = _slot(table, room[t])
        if table[h, 1] < 0:
            table[h, 0] = room[t]
            table[h, 1] = groups
            groups += 1
        of[t] = table[h, 1]
        count[of[t] + 1] += 1
    first = np.cumsum(count[: groups + 1])
    fill = first[:groups].copy()
    row = np.empty(m, dtype=np.int64)
    rec = np.empty((m, 7), dtype=np.int64)
    for t in range(m):
        r = fill[of[t]]
        fill[of[t]] += 1
        row[t] = r
        rec[r, XS] = xs[t]
        rec[r, XE] = xe[t]
    _reset(rec)
    return table, first, row, rec


@njit(cache=True, nogil=True)
def _match(table, first, rec, ev_room, ev_seq, ev_t, ev_s, ev_e, ev_k):  # pragma: no cover
    """Match each event (room, seq, stamp, slots, kind KIND_READ/KIND_ALLOC/KIND_FREE) to the transfers of its room
    whose slots it overlaps, through the room table. A read keeps the lowest seq per transfer; an
    alloc or free counts only below the read's seq and keeps the highest. So the events may come in
    any order when every read comes before every alloc and free (two passes), or all together in
    rising seq (one pass: a read's seq is then final for all later events, which lie above it)."""
    for i in range(ev_room.size):
        g = table[_slot(table, ev_room[i]), 1]
        if g < 0:
            continue
        seq = ev_seq[i]
        for r in range(first[g], first[g + 1]):
            if not (rec[r, XS] < ev_e[i] and rec[r, XE] > ev_s[i] and seq < rec[r, RSEQ]):
                continue
            k = ev_k[i]
            if k == KIND_READ:
                rec[r, RSEQ] = seq
                rec[r, RTS] = ev_t[i]
            elif k == KIND_FREE:
                if seq > rec[r, FSEQ]:
                    rec[r, FSEQ] = seq
            elif seq > rec[r, ASEQ]:
                rec[r, ASEQ] = seq
                rec[r, ATS] = ev_t[i]


def _stream(con: duckdb.DuckDBPyConnection, node: str, ops: tuple[str, ...]):
    """The receiver's events of the given ops as stored, in chunks: (room, seq, t, start, end, kind)."""
    return chunks(
        con,
        f"""SELECT room, seq, epoch_us(ts) AS t, start, "end", ({_OPK})::TINYINT AS k
           FROM page_events WHERE node = $node AND op IN ({", ".join(f"'{o}'" for o in ops)})""",
        {"node": node},
        (np.int64, np.int64, np.int64, np.int64, np.int64, np.int8),
    )


def link_receiver(con: duckdb.DuckDBPyConnection, node: str, x: pa.Table) -> pa.Table:
    """transfer_links rows for the transfers `x` into `node` (columns as in xfers, plus the links).
    One pass over the receiver's events when their seqs rise as stored (execution.streams), else two:
    reads and shares, then allocs and frees, in any order."""
    room = np.ascontiguousarray(x.column("room").to_numpy(), dtype=np.int64)
    xs = np.ascontiguousarray(x.column("start").to_numpy(), dtype=np.int64)
    xe = np.ascontiguousarray(x.column("end").to_numpy(), dtype=np.int64)
    grouped = list(_group(room, xs, xe))  # room table, group starts, transfer -> record, records
    del room, xs, xe

    def walk(events: Iterator[list[np.ndarray]]) -> None:
        table, first, _, rec = grouped
        _reset(rec)  # afresh: the stored order may break part way (forensics.ownership.execution.streams.in_order)
        for ev in events:
            _match(table, first, rec, *ev)

    if x.num_rows:
        in_order(
            walk,
            lambda: rising(_stream(con, node, ("read", "share", "alloc", "free")), key=1),
            lambda: chain(_stream(con, node, ("read", "share")), _stream(con, node, ("alloc", "free"))),
        )
    aseq, ats, rseq, rts, no_alloc, no_read, ordinary = _links(grouped[3], grouped[2])
    grouped.clear()  # over 100 bytes per transfer: freed before the Arrow columns are built
    stamp = pa.timestamp("us", tz="UTC")
    return (
        x.append_column("aseq", pa.array(aseq, mask=no_alloc))
        .append_column("ats", pa.array(ats, type=stamp, mask=no_alloc))
        .append_column("rseq", pa.array(rseq, mask=no_read))
        .append_column("rts", pa.array(rts, type=stamp, mask=no_read))
        .append_column("ordinary", pa.array(ordinary))
    )


@njit(cache=True, nogil=True)
def _links(rec, row):  # pragma: no cover
    """Each transfer's links in its own order: aseq, ats, rseq, rts, whether there is no alloc, no
    read, and whether it is ordinary (an alloc counts only before a read; no free in between)."""
    m = row.size
    aseq = np.empty(m, dtype=np.int64)
    ats = np.empty(m, dtype=np.int64)
    rseq = np.empty(m, dtype=np.int64)
    rts = np.empty(m, dtype=np.int64)
    no_alloc = np.empty(m, dtype=np.bool_)
    no_read = np.empty(m, dtype=np.bool_)
    ordinary = np.empty(m, dtype=np.bool_)
    for t in range(m):
        r = row[t]
        read = rec[r, RSEQ] != NONE_HI
        alloc = read and rec[r, ASEQ] != NONE_LO
        aseq[t] = rec[r, ASEQ]
        ats[t] = rec[r, ATS]
        rseq[t] = rec[r, RSEQ]
        rts[t] = rec[r, RTS]
        no_alloc[t] = not alloc
        no_read[t] = not read
        ordinary[t] = alloc and not rec[r, FSEQ] > rec[r, ASEQ]
    return aseq, ats, rseq, rts, no_alloc, no_read, ordinary


def transfer_links(con: duckdb.DuckDBPyConnection) -> None:
    """Create transfer_links: every transfer into a node with telemetry, with its room's alloc and read
    on the receiver and whether it is ordinary. Receivers side by side (forensics.ownership.execution.parallel)."""
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
        with arrow_view(con, "transfer_links_out", table):
            con.execute(
                """INSERT INTO transfer_links
                   SELECT sender, receiver, xseq, xts, room, start, "end", aseq, ats, rseq, rts, ordinary
                   FROM transfer_links_out"""
            )
        del table  # not held while the next receiver is linked (45M transfers each at 1B events)
    con.execute("DROP TABLE xfers")
