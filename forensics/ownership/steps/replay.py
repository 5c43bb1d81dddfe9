"""Room-local replay: each room's own history on each node, split at that room's own range boundaries.

For every event of a room (alloc, free, write, xfer, read, share, and foreign writes injected into the
room as `inj`), and every piece of its slot range, the state just before it on that piece: the room's
last alloc, free, own write, read and injected write (their keys `k`, and what the findings need of
them), plus the room's next free of the piece (for holdings). Pieces are the room's elementary slot
ranges between the boundaries of all its events, so every event covers whole pieces.

The work is sort + forward fill, done in numpy on arrays fetched from DuckDB through Arrow: events
sorted by (node, room, k); pieces found by binary search in each room's sorted boundaries; rows
re-sorted by piece (stably, so k order holds within a piece); "last X before" is a running maximum
of row indices, reset at piece starts. The output is the table room_state_new; the window-function SQL
it replaced is kept as the reference definition in tests/reference/room_local.sql, and
tests/test_replay.py checks that both agree.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, timed
from forensics.errors import CapacityError
from forensics.keys import OPS
from forensics.paths import load_query

# events per room bucket (a node's rooms are replayed in buckets of about this many events). A quarter
# of a streamed chunk (forensics.ownership.execution.streams.CHUNK_EVENTS): a bucket is held whole, each
# event repeated once per slot piece it covers, with some twenty arrays per row
BUCKET_EVENTS = 2_000_000

# the classes the state tracks (its own numbering, not op codes), per op code (forensics.keys.OPS)
CLASS_ALLOC, CLASS_FREE, CLASS_WRITE, CLASS_READ, CLASS_INJ = 1, 2, 3, 4, 5
_CLASS_OF = {
    "alloc": CLASS_ALLOC, "free": CLASS_FREE, "write": CLASS_WRITE, "xfer": CLASS_WRITE,
    "read": CLASS_READ, "share": CLASS_READ, "inj": CLASS_INJ,
}  # fmt: skip
OP_CLASS = np.array([_CLASS_OF[op] for op in OPS], dtype=np.int8)


def _prev_of(cls_rows: np.ndarray, cls: int, first_row: np.ndarray) -> np.ndarray:
    """Per row: the index of the last earlier row of class `cls` in the same piece, or -1."""
    n = cls_rows.size
    idx = np.where(cls_rows == cls, np.arange(n), -1)
    last = np.maximum.accumulate(idx) if n else idx
    prev = np.empty(n, dtype=np.int64)
    if n:
        prev[0] = -1
        prev[1:] = last[:-1]
    prev[prev < first_row] = -1
    return prev


def _next_of(cls_rows: np.ndarray, cls: int, last_row: np.ndarray) -> np.ndarray:
    """Per row: the index of the first later row of class `cls` in the same piece, or -1."""
    n = cls_rows.size
    big = np.iinfo(np.int64).max
    idx = np.where(cls_rows == cls, np.arange(n), big)
    nxt_incl = np.minimum.accumulate(idx[::-1])[::-1] if n else idx
    nxt = np.full(n, big, dtype=np.int64)
    if n:
        nxt[:-1] = nxt_incl[1:]
    nxt[nxt > last_row] = -1
    return nxt


def _pick(values: np.ndarray, rows: np.ndarray, mask: np.ndarray | None = None, type_=None) -> pa.Array:
    """values[rows] as an Arrow array, null where rows is -1 (or where the picked value is masked)."""
    missing = rows < 0
    picked = values[np.maximum(rows, 0)]
    if mask is not None:
        missing = missing | mask[np.maximum(rows, 0)]
    return pa.array(picked, type=type_, mask=missing if missing.any() else None)


def replay_rooms(con: duckdb.DuckDBPyConnection, holders_only: bool, screened: bool = False) -> None:
    """Create room_state_new (see the module docstring). screened: only the rooms in room_scope
    (forensics.ownership.steps.screen); holders_only: only the rooms foreign writes hit (room_injected)."""
    with timed(f"ownership/replay{' (injected)' if holders_only else ''}"):
        _replay_rooms(con, holders_only, screened)


def _replay_rooms(con: duckdb.DuckDBPyConnection, holders_only: bool, screened: bool) -> None:
    """Node by node, and within a node by room buckets of at most BUCKET_EVENTS events: rooms are
    independent, so memory stays bounded (and one chunk's buffers are reused for the next)."""
    con.execute("DROP TABLE IF EXISTS room_state_new")
    # replay_source: the events replayed, the timeline itself (a view) unless a few rooms are
    if holders_only or screened:  # a few rooms: their events read once (one pass over the timeline), not per query
        rooms = "SELECT node, holder FROM room_injected" if holders_only else "SELECT node, room FROM room_scope"
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE replay_source AS SELECT * FROM timeline WHERE (node, room) IN ({rooms})"
        )
    else:
        con.execute("CREATE OR REPLACE TEMP VIEW replay_source AS SELECT * FROM timeline")
    chunks = con.execute(
        """SELECT x.node, greatest(1, ceil(coalesce(count(t.k), 0) / ?))::BIGINT AS parts
            FROM node_index x LEFT JOIN replay_source t USING (node) GROUP BY x.node ORDER BY x.node""",
        [BUCKET_EVENTS],
    ).fetchall() or [(None, 1)]  # no node at all: one empty chunk makes the typed, empty table
    store = load_query("ownership", "replay_store")  # inserted into room_state_new, made by the first chunk
    made = False
    for node, parts in chunks:
        for part in range(parts):
            out = _replay_chunk(con, {"node": node, "parts": parts, "part": part})
            with arrow_view(con, "replay_out", out):
                con.execute(
                    f"INSERT INTO room_state_new {store}" if made else f"CREATE TABLE room_state_new AS {store}"
                )
                made = True
            del out
    con.execute(f"DROP {'TABLE' if holders_only or screened else 'VIEW'} replay_source")


def _replay_chunk(con: duckdb.DuckDBPyConnection, bucket: dict) -> pa.Table:
    """The replay of one chunk (the rooms of node `bucket["node"]` in bucket `part` of `parts`), as an
    Arrow table."""
    ev = con.execute(load_query("ownership", "replay_events"), bucket).fetchnumpy()
    n = len(ev["k"])
    perm = np.lexsort((ev["k"], ev["room"], ev["node_i"]))  # events by (node, room, k)
    room, node_i = np.asarray(ev["room"])[perm], np.asarray(ev["node_i"])[perm]
    start, end = np.asarray(ev["start"])[perm], np.asarray(ev["end"])[perm]
    # group = (node, room), in sorted order
    new_group = np.ones(n, dtype=bool)
    if n:
        new_group[1:] = (room[1:] != room[:-1]) | (node_i[1:] != node_i[:-1])
    group = np.cumsum(new_group) - 1
    slot_bits = int(max(int(end.max()) if n else 0, 1)).bit_length()
    if n and int(group[-1]).bit_length() + slot_bits > 62:
        raise CapacityError(
            "one node's replay holds more rooms x slots than its 62-bit key can pack: "
            "analyse the archive in parts with --since/--until"
        )
    gk = group.astype(np.int64) << slot_bits
    bounds = np.sort(np.concatenate([gk + start, gk + end]))
    if bounds.size:
        bounds = bounds[np.concatenate([[True], bounds[1:] != bounds[:-1]])]
    lo = np.searchsorted(bounds, gk + start)
    hi = np.searchsorted(bounds, gk + end)
    counts = hi - lo
    total = int(counts.sum())
    ev_of_row = np.repeat(np.arange(n), counts)
    piece = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(total)
    # rows by piece, then (as events were) by k: one sort of packed (piece, row) keys
    row_bits = max(total, 1).bit_length()
    if int(bounds.size).bit_length() + row_bits > 62:
        raise CapacityError(
            "one node's replay has more slot pieces than its 62-bit key can pack: "
            "analyse the archive in parts with --since/--until"
        )
    packed = np.sort((piece.astype(np.int64) << row_bits) | np.arange(total, dtype=np.int64))
    ev_of_row = ev_of_row[packed & ((1 << row_bits) - 1)]
    piece = packed >> row_bits
    mask = (1 << slot_bits) - 1
    seg_start = bounds[piece] & mask
    seg_end = bounds[piece + 1] & mask
    new_piece = np.ones(total, dtype=bool)
    if total:
        new_piece[1:] = piece[1:] != piece[:-1]
    rows = np.arange(total)
    first_row = np.maximum.accumulate(np.where(new_piece, rows, 0)) if total else rows
    piece_end = np.ones(total, dtype=bool)
    if total:
        piece_end[:-1] = new_piece[1:]
    last_row = np.minimum.accumulate(np.where(piece_end, rows, total)[::-1])[::-1] if total else rows
    ev_of_row = perm[ev_of_row]  # from here on, indices into the fetched (unsorted) arrays
    opc = np.asarray(ev["opc"]).astype(np.int64)
    cls_rows = OP_CLASS[opc][ev_of_row]

    def ev_at(prev_rows: np.ndarray) -> np.ndarray:
        return np.where(prev_rows >= 0, ev_of_row[np.maximum(prev_rows, 0)], -1)

    a = ev_at(_prev_of(cls_rows, CLASS_ALLOC, first_row))
    f = ev_at(_prev_of(cls_rows, CLASS_FREE, first_row))
    w = ev_at(_prev_of(cls_rows, CLASS_WRITE, first_row))
    r = ev_at(_prev_of(cls_rows, CLASS_READ, first_row))
    i = ev_at(_prev_of(cls_rows, CLASS_INJ, first_row))
    nf = ev_at(_next_of(cls_rows, CLASS_FREE, last_row))

    def col(name: str) -> tuple[np.ndarray, np.ndarray | None]:
        v = ev[name]
        if isinstance(v, np.ma.MaskedArray):
            return np.asarray(v.data), np.ma.getmaskarray(v)
        return np.asarray(v), None

    k, _ = col("k")
    kg, _ = col("kg")
    amb, amb_m = col("ambiguous")
    ts, ts_m = col("ts_us")
    ts_hi, ts_hi_m = col("ts_hi_us")
    src_room, src_room_m = col("src_room")
    src_opc, src_opc_m = col("src_opc")
    tstz = pa.timestamp("us", tz="UTC")
    out = pa.table(
        {
            "node_i": pa.array(np.asarray(ev["node_i"])[ev_of_row]),
            "room": pa.array(np.asarray(ev["room"])[ev_of_row]),
            "seg_start": pa.array(seg_start),
            "seg_end": pa.array(seg_end),
            "k": pa.array(k[ev_of_row]),
            "kg": pa.array(kg[ev_of_row]),
            "pos": _pick(col("pos")[0], ev_of_row),
            "opc": pa.array(opc[ev_of_row].astype(np.int8)),
            "ambiguous": _pick(amb, ev_of_row, amb_m),
            "ts": _pick(ts, ev_of_row, ts_m, tstz),
            "ts_hi": _pick(ts_hi, ev_of_row, ts_hi_m, tstz),
            "src_room": _pick(src_room, ev_of_row, src_room_m),
            "src_opc": _pick(src_opc, ev_of_row, src_opc_m),
            "a_k": _pick(k, a),
            "f_k": _pick(k, f),
            "w_k": _pick(k, w),
            "w_amb": _pick(amb, w, amb_m),
            "r_k": _pick(k, r),
            "r_ts": _pick(ts, r, ts_m, tstz),
            "i_k": _pick(k, i),
            "i_room": _pick(src_room, i, src_room_m),
            "i_amb": _pick(amb, i, amb_m),
            "nf_k": _pick(k, nf),
            "nf_kg": _pick(kg, nf),
        }
    )
    return out
