"""Screening pass: which rooms the detailed replay must look at.

Most rooms of an incident are ordinary: they allocate slots nobody else holds, their own prefill or
transfer fills them, they read what they wrote and free what they hold. The detailed, room-local
replay (forensics.ownership.steps.replay) and everything after it produce rows only for rooms where something else
happened. This pass walks each node's timeline once, in its event order, over a run map of the slot
space (who holds each run of slots, and whose write is in it), and flags every room that any of
these could concern:

- an alloc of slots another room holds (both rooms: a double allocation); from then on, every event
  on those slots (the replay keeps the first holder's holding open until that room frees it, and a
  lost free keeps it open for good);
- a free, write or transfer into slots the room does not hold (the room, and the holder if any);
- a read or share of slots that are not held by the reader, or whose last write is not the reader's
  own write since its alloc (the reader; whose data it found is the last-writer search's job, over
  every write of the node);
- a transfer whose landing order against another transfer into the same slots nothing proves
  (transfer_landing.conflict, forensics.ownership.steps.conflicts): its room, whose reads of its own transfer the
  findings must see, since the other transfer may have landed last.

Why this is a superset of what the replay reports (so the screened replay reports exactly what the
full one does; tests/test_screen.py checks it on simulated incidents, with seq gaps and a replay
window): a room that is never flagged saw, at every one of its events, runs that were never held by
two rooms at once and that it held (its alloc is the last alloc of those slots, and nobody freed or
wrote them since without being flagged along with it), and it read only its own writes made after
its alloc. Its own history then gives no hazard, no stale or foreign read and no anomalous write;
and a room whose holding another room's write or alloc hit is flagged at that event.

The walk is a compiled loop (numba, forensics.ownership.kernels.runmap) over arrays fetched from DuckDB, a chunk at a
time; this module feeds it each node's events and stores what it flags.
`investigate --full-replay` skips the screen and replays every room.

As it reads every event of its own of each node, the walk also notes the rooms they name
(node_own_rooms, which the findings read instead of a GROUP BY over every event again).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from forensics.db import arrow_view, run_query, scalar, sql_literal, telemetry_node_names, timed
from forensics.ownership.execution.parallel import side_by_side
from forensics.ownership.execution.streams import alongside, chunks, in_order, rising
from forensics.ownership.kernels import frozen
from forensics.ownership.kernels.room_marks import room_marks
from forensics.ownership.kernels.runmap import EVENT_TYPES, RunMap, screen_events

_OPC = "coalesce(op_code(op), -1)"
PROV_BATCH = 4_000_000  # provenance rows buffered before each insert
COLUMN_TYPES = EVENT_TYPES  # k, opc, room, start, end
RECENT = 1 << 15  # rooms remembered by room_marks (512 KB: stays in the core's cache)


def screen_rooms(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    """Create room_scope (node, room): the rooms of each node the detailed replay must cover;
    screen_prov (node, k, s, e, w_k): what each flagged read found, w_k the key of the last write
    (NULL: never written); and fill node_own_rooms (node, room; a room may come more than once): the rooms
    the node's own events name. Returns, per node, whether its events were walked in stored order.

    Nodes are walked side by side (forensics.ownership.execution.parallel); each spools what its reads found to Parquet
    files, stored node by node in name order."""
    with timed("ownership/screen"):
        con.execute("CREATE OR REPLACE TEMP TABLE room_scope (node VARCHAR, room BIGINT)")
        con.execute("CREATE OR REPLACE TEMP TABLE screen_prov (node VARCHAR, k BIGINT, s BIGINT, e BIGINT, w_k BIGINT)")
        _create_own_rooms(con)
        # the nodes of the timeline and the highest slot end of each (1 + it: the run map's size)
        sizes = con.execute("SELECT node, coalesce(max_end, 0) + 1 FROM timeline_keys ORDER BY node").fetchall()
        nodes = [node for node, _ in sizes]
        # timeline is a view over page_events and timeline_xfer (timeline_view.sql) unless ranked
        as_view = bool(scalar(con, "SELECT count(*) FROM duckdb_views() WHERE view_name = 'timeline'"))
        with tempfile.TemporaryDirectory(prefix="kvf-screen-", dir=_spool_parent(con)) as spool:

            def walk(cur: duckdb.DuckDBPyConnection, i: int) -> tuple[np.ndarray, np.ndarray, bool, list[str]]:
                return _screen_node(cur, nodes[i], int(sizes[i][1]), as_view, Path(spool) / f"node{i:05d}")

            order = {}
            for node, (flagged, own_rooms, stored_order, parts) in zip(
                nodes, side_by_side(con, range(len(nodes)), walk), strict=True
            ):
                for table, rooms in (("room_scope", flagged), ("node_own_rooms", own_rooms)):
                    with arrow_view(con, "screen_rooms_out", pa.table({"room": rooms})):
                        con.execute(f"INSERT INTO {table} SELECT ?, room FROM screen_rooms_out", [node])
                del own_rooms
                if parts:
                    files = ", ".join(sql_literal(p) for p in parts)
                    con.execute(
                        f"""INSERT INTO screen_prov SELECT ?, k, s, e, nullif(w_k, -1)
                            FROM read_parquet([{files}])""",
                        [node],
                    )
                order[node] = stored_order
        con.execute(
            "INSERT INTO room_scope SELECT DISTINCT receiver, room FROM transfer_landing WHERE conflict ORDER BY ALL"
        )
        return order


def _create_own_rooms(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE node_own_rooms (node VARCHAR, room BIGINT)")


def own_rooms_by_query(con: duckdb.DuckDBPyConnection) -> None:
    """node_own_rooms without the walk (investigate --full-replay): one aggregate per node
    (ownership/queries/node_own_rooms.sql), each room once."""
    _create_own_rooms(con)
    for node in telemetry_node_names(con):
        run_query(con, "ownership", "node_own_rooms", node=node)


def _spool_parent(con: duckdb.DuckDBPyConnection) -> str | None:
    """The database's temp directory (where DuckDB spills), if it exists: spooled rows go there too."""
    tmp = con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
    if tmp:
        Path(tmp).mkdir(parents=True, exist_ok=True)
        return str(tmp)
    return None


def _screen_node(
    con: duckdb.DuckDBPyConnection, node: str, slots: int, as_view: bool, spool: Path
) -> tuple[np.ndarray, np.ndarray, bool, list[str]]:
    """Walk the node's timeline in event order, a chunk (streams.CHUNK_EVENTS) at a time: its own events as
    stored merged with the transfers that landed in it when the stored order rises
    (forensics.ownership.execution.streams), else one sorted read of the timeline. Returns (flagged
    rooms, the rooms of its own events (room_marks: a room may come more than once), whether stored
    order served, the Parquet files under `spool` holding the provenance rows k, s, e, w_k in walk
    order). `con`: a connection of this node's own
    (nodes may be walked in parallel threads)."""
    spool.mkdir(parents=True, exist_ok=True)
    params = {"node": node}
    parts: list[str] = []

    def stored():
        own = chunks(
            con,
            f"""SELECT own_key(seq) AS k, ({_OPC})::TINYINT AS opc, room, start, "end"
                FROM page_events WHERE node = $node AND op <> 'transfer'""",
            params,
            COLUMN_TYPES,
        )
        landed = con.execute(
            f"""SELECT kv_key(pos, sub) AS k, ({_OPC})::TINYINT AS opc, room, start, "end"
                FROM timeline_xfer WHERE node = $node ORDER BY k""",
            params,
        ).fetchnumpy()
        return alongside(
            rising(own), [np.ascontiguousarray(landed[c], dtype=t) for c, t in zip(landed, COLUMN_TYPES, strict=True)]
        )

    def ordered():
        stream = chunks(
            con,
            f"""SELECT k, ({_OPC})::TINYINT AS opc, room, start, "end" FROM timeline WHERE node = $node ORDER BY k""",
            params,
            COLUMN_TYPES,
        )
        return ((chunk, None) for chunk in stream)  # every event in one sorted read: nothing alongside

    def store(pending: list[np.ndarray]) -> None:
        prov = np.concatenate(pending)
        path = spool / f"prov{len(parts):06d}.parquet"
        pq.write_table(pa.table({"k": prov[:, 0], "s": prov[:, 1], "e": prov[:, 2], "w_k": prov[:, 3]}), path)
        parts.append(str(path))

    def walk(stream) -> tuple[np.ndarray, np.ndarray]:
        for path in parts:  # a restarted walk
            Path(path).unlink()
        parts.clear()
        runmap = RunMap(slots)
        rooms: list[np.ndarray] = []
        own: list[np.ndarray] = []
        recent, used = np.zeros(RECENT, dtype=np.int64), np.zeros(RECENT, dtype=np.bool_)
        marks = np.empty(0, dtype=np.int64)  # reused: fresh memory costs more than the walk here
        pending: list[np.ndarray] = []  # provenance rows, spooled a few million at a time
        for (k, opc, room, start, end), landed in stream:
            side = None if landed is None else tuple(landed)
            flagged, prov = screen_events(k, opc, room, start, end, runmap, side=side)
            rooms.append(flagged)
            if marks.size < room.size:
                marks = np.empty(room.size, dtype=np.int64)
            own.append(marks[: room_marks(frozen(opc, np.int8), frozen(room), recent, used, marks)].copy())
            if len(prov):
                pending.append(prov)
                if sum(len(p) for p in pending) >= PROV_BATCH:
                    store(pending)
                    pending = []
        if pending:
            store(pending)
        none = np.empty(0, dtype=np.int64)
        return (np.unique(np.concatenate(rooms)) if rooms else none), (np.concatenate(own) if own else none)

    (flagged, own_rooms), stored_order = in_order(walk, stored, ordered) if as_view else (walk(ordered()), False)
    return flagged, own_rooms, stored_order, parts
