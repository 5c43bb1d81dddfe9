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
Landed transfers only: a transfer row with src sent or failed records a send whose landing nothing
proves (findings' room_flags makes the readers of its slots indeterminate).
Reads: page_events, telemetry_nodes. Writes: transfer_links.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, scalar, timed
from forensics.ownership.execution.parallel import receivers, side_by_side
from forensics.ownership.execution.streams import chunks, in_order, rising
from forensics.ownership.kernels import frozen
from forensics.ownership.kernels.transfer_links import (
    KIND_ALLOC,
    KIND_FREE,
    KIND_READ,
    group_by_room,
    links_of,
    match_events,
    reset_links,
)
from forensics.paths import load_query

SORT_RECEIVERS = 16  # more nodes than this: the transfers are stored sorted by receiver


# the walk's kinds of receiver event as SQL (page_events' ops are text)
_OPK = f"CASE WHEN op IN ('read', 'share') THEN {KIND_READ} WHEN op = 'alloc' THEN {KIND_ALLOC} ELSE {KIND_FREE} END"

_EVENT_TYPES = (np.int64, np.int64, np.int64, np.int64, np.int64, np.int8)  # room, seq, t, start, end, kind


def _stream(con: duckdb.DuckDBPyConnection, node: str, ops: tuple[str, ...]):
    """The receiver's events of the given ops as stored, in chunks: (room, seq, t, start, end, kind)."""
    return chunks(
        con,
        f"""SELECT room, seq, epoch_us(ts) AS t, start, "end", ({_OPK})::TINYINT AS k
           FROM page_events WHERE node = $node AND op IN ({", ".join(f"'{o}'" for o in ops)})""",
        {"node": node},
        _EVENT_TYPES,
    )


def link_receiver(con: duckdb.DuckDBPyConnection, node: str, x: pa.Table) -> pa.Table:
    """transfer_links rows for the transfers `x` into `node` (columns as in xfers, plus the links).
    One pass over the receiver's events when their seqs rise as stored (execution.streams), else two:
    reads and shares, then allocs and frees, in any order."""
    room, xs, xe = (frozen(x.column(c).to_numpy()) for c in ("room", "start", "end"))
    grouped = list(group_by_room(room, xs, xe))  # room table, group starts, transfer -> record, records
    del room, xs, xe

    def walk(events: Iterator[list[np.ndarray]]) -> None:
        table, first, _, rec = grouped
        reset_links(rec)  # afresh: the stored order may break part way (forensics.ownership.execution.streams.in_order)
        for ev in events:
            match_events(table, first, rec, *(frozen(c, t) for c, t in zip(ev, _EVENT_TYPES, strict=True)))

    if x.num_rows:
        in_order(
            walk,
            lambda: rising(_stream(con, node, ("read", "share", "alloc", "free")), key=1),
            lambda: chain(_stream(con, node, ("read", "share")), _stream(con, node, ("alloc", "free"))),
        )
    aseq, ats, rseq, rts, no_alloc, no_read, ordinary = links_of(grouped[3], grouped[2])
    grouped.clear()  # over 100 bytes per transfer: freed before the Arrow columns are built
    stamp = pa.timestamp("us", tz="UTC")
    return (
        x.append_column("aseq", pa.array(aseq, mask=no_alloc))
        .append_column("ats", pa.array(ats, type=stamp, mask=no_alloc))
        .append_column("rseq", pa.array(rseq, mask=no_read))
        .append_column("rts", pa.array(rts, type=stamp, mask=no_read))
        .append_column("ordinary", pa.array(ordinary))
    )


def transfer_links(con: duckdb.DuckDBPyConnection) -> None:
    """Create transfer_links: every transfer into a node with telemetry, with its room's alloc and read
    on the receiver and whether it is ordinary. Receivers side by side (forensics.ownership.execution.parallel)."""
    with timed("ownership/transfer_xfers"):
        # each receiver's transfers are read with WHERE receiver = ?: with many receivers, store them
        # sorted so that each read skips the others' row groups; with a few, a scan each is cheaper
        # than sorting (90M transfers at 1B events)
        many = scalar(con, "SELECT count(*) FROM telemetry_nodes") > SORT_RECEIVERS
        xfers = load_query("ownership", "xfers")
        con.execute(f"CREATE OR REPLACE TEMP TABLE xfers AS {xfers}{' ORDER BY receiver' if many else ''}")
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
