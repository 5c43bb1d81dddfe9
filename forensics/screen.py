"""Screening pass: which rooms the detailed replay must look at.

Most rooms of an incident are ordinary: they allocate slots nobody else holds, their own prefill or
transfer fills them, they read what they wrote and free what they hold. The detailed, room-local
replay (forensics.replay) and everything after it produce rows only for rooms where something else
happened. This pass walks each node's timeline once, in its event order, over a run map of the slot
space (who holds each run of slots, and whose write is in it), and flags every room that any of
these could concern:

- an alloc of slots another room holds (both rooms: a double allocation); from then on, every event
  on those slots (the replay keeps the first holder's holding open until that room frees it, and a
  lost free keeps it open for good);
- a free, write or transfer into slots the room does not hold (the room, and the holder if any);
- a read or share of slots that are not held by the reader, or whose last write is not the reader's
  own write since its alloc (the reader; whose data it found is the last-writer search's job, over
  every write of the node).

Why this is a superset of what the replay reports (so the screened replay reports exactly what the
full one does; tests/test_screen.py checks it on simulated incidents, with seq gaps and a replay
window): a room that is never flagged saw, at every one of its events, runs that were never held by
two rooms at once and that it held (its alloc is the last alloc of those slots, and nobody freed or
wrote them since without being flagged along with it), and it read only its own writes made after
its alloc. Its own history then gives no hazard, no stale or foreign read and no anomalous write;
and a room whose holding another room's write or alloc hit is flagged at that event.

The walk is a compiled loop (numba) over arrays fetched from DuckDB; its state is one record per run
start (holder and last writer) and a two-level bitset of run starts, so each event costs a few word operations plus
the runs it covers. Adjacent runs with equal state are merged, which keeps the map small.
`investigate --full-replay` skips the screen and replays every room.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numba import njit

from forensics.db import scalar, timed
from forensics.parallel import side_by_side
from forensics.paths import sql_literal
from forensics.streams import chunks, in_order, merge, rising

# op codes of the walk (timeline op names in this order)
OPS = ("alloc", "free", "write", "xfer", "read", "share")
_OPC = "CASE op " + " ".join(f"WHEN '{o}' THEN {i}" for i, o in enumerate(OPS)) + " ELSE -1 END"

# events per chunk of the stream (the run map carries over between chunks: memory stays bounded)
CHUNK_EVENTS = 8_000_000
PROV_BATCH = 4_000_000  # provenance rows buffered before each insert
COLUMN_TYPES = (np.int64, np.int8, np.int64, np.int64, np.int64)  # k, opc, room, start, end

# columns of RunMap.rec
HOLD_K, HOLD_ROOM, WROTE_K, WROTE_ROOM, SHARED = 0, 1, 2, 3, 4

_ONE = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, inline="always")
def _msb(x: np.uint64) -> int:
    """Index of the highest set bit of a nonzero word."""
    n = 0
    if x >= np.uint64(1 << 32):
        x >>= np.uint64(32)
        n += 32
    if x >= np.uint64(1 << 16):
        x >>= np.uint64(16)
        n += 16
    if x >= np.uint64(1 << 8):
        x >>= np.uint64(8)
        n += 8
    if x >= np.uint64(1 << 4):
        x >>= np.uint64(4)
        n += 4
    if x >= np.uint64(4):
        x >>= np.uint64(2)
        n += 2
    if x >= np.uint64(2):
        n += 1
    return n


@njit(cache=True, inline="always")
def _lsb(x: np.uint64) -> int:
    return _msb(x & (~x + _ONE))


@njit(cache=True, inline="always")
def _mask_le(b: int) -> np.uint64:
    """Bits 0..b of a word (b in 0..63)."""
    if b >= 63:
        return _ALL
    return (_ONE << np.uint64(b + 1)) - _ONE


@njit(cache=True, inline="always")
def _prev_set(words: np.ndarray, summary: np.ndarray, x: int) -> int:
    """The largest run start <= x (slot 0 always starts a run)."""
    w = x >> 6
    m = words[w] & _mask_le(x & 63)
    if m != np.uint64(0):
        return (w << 6) + _msb(m)
    ww = w - 1
    sw = ww >> 6
    sm = summary[sw] & _mask_le(ww & 63)
    while sm == np.uint64(0):
        sw -= 1
        sm = summary[sw]
    w2 = (sw << 6) + _msb(sm)
    return (w2 << 6) + _msb(words[w2])


@njit(cache=True, inline="always")
def _next_set(words: np.ndarray, summary: np.ndarray, x: int) -> int:
    """The smallest run start > x (the sentinel at the end of the slot space always is one)."""
    w = x >> 6
    b = x & 63
    m = np.uint64(0) if b >= 63 else words[w] & ~_mask_le(b)
    if m != np.uint64(0):
        return (w << 6) + _lsb(m)
    ww = w + 1
    sw = ww >> 6
    b2 = ww & 63
    sm = summary[sw] & (_ALL if b2 == 0 else ~_mask_le(b2 - 1))
    while sm == np.uint64(0):
        sw += 1
        sm = summary[sw]
    w2 = (sw << 6) + _lsb(sm)
    return (w2 << 6) + _lsb(words[w2])


@njit(cache=True, inline="always")
def _set(words: np.ndarray, summary: np.ndarray, x: int) -> None:
    w = x >> 6
    words[w] |= _ONE << np.uint64(x & 63)
    summary[w >> 6] |= _ONE << np.uint64(w & 63)


@njit(cache=True, inline="always")
def _clear(words: np.ndarray, summary: np.ndarray, x: int) -> None:
    w = x >> 6
    words[w] &= ~(_ONE << np.uint64(x & 63))
    if words[w] == np.uint64(0):
        summary[w >> 6] &= ~(_ONE << np.uint64(w & 63))


@njit(cache=True, inline="always")
def _same(rec: np.ndarray, p: int, q: int) -> bool:
    """Runs starting at p and q hold the same state (so they can be one run)."""
    return rec[p, HOLD_K] == rec[q, HOLD_K] and rec[p, WROTE_K] == rec[q, WROTE_K] and rec[p, SHARED] == rec[q, SHARED]


@njit(cache=True, inline="always")
def _emit(prov: np.ndarray, npv: int, ki: int, s: int, e: int, w: int) -> int:
    prov[npv, 0] = ki
    prov[npv, 1] = s
    prov[npv, 2] = e
    prov[npv, 3] = w
    return npv + 1


class RunMap:
    """The walk's state for one node's slot space [0, slots): a two-level bitset of run starts, and at
    each run start the holder's alloc (key k and room), the last write (k and room), and whether two
    rooms have held it at once (1 or 0). It carries over from one chunk of events to the next.

    The five values of a run start are one record (a row of `rec`, 40 bytes): the walk touches run
    starts all over a slot space larger than the CPU's caches, and one record costs about one memory
    access where five arrays cost five (1.7x faster walk at 100M events)."""

    def __init__(self, slots: int):
        self.slots = slots
        nwords = (slots + 1) // 64 + 2
        self.words = np.zeros(nwords, dtype=np.uint64)
        self.summary = np.zeros(nwords // 64 + 2, dtype=np.uint64)
        self.rec = np.zeros((slots + 1, 5), dtype=np.int64)
        self.rec[:, HOLD_K] = -1
        self.rec[:, WROTE_K] = -1
        _set(self.words, self.summary, 0)
        _set(self.words, self.summary, slots)  # sentinel: the end of the slot space

    def state(self) -> tuple:
        return (self.words, self.summary, self.rec)


@njit(cache=True, nogil=True)
def screen_chunk(
    state: tuple,
    k: np.ndarray,
    opc: np.ndarray,
    room: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    i0: int,
    flagged: np.ndarray,
    prov: np.ndarray,
) -> tuple[int, int, int]:
    """Walk events i0.. of a chunk (timeline order) over the run map; returns (next event, rooms
    written to `flagged`, rows written to `prov`). It stops early, before an event, when the buffers
    may not hold that event's output (at most slots + 1 entries each): drain them and call again.

    flagged: rooms the detailed replay must cover (with repeats). prov (rows of k, s, e, w_k): for
    every flagged read or share, its range split into maximal runs of one last write (w_k, -1 where
    nothing was ever written): the content it found."""
    words, summary, rec = state
    slots = rec.shape[0] - 1
    nf = 0
    npv = 0
    n = k.shape[0]
    i = i0
    while i < n:
        if flagged.shape[0] - nf < slots + 2 or prov.shape[0] - npv < slots + 2:
            break
        op = opc[i]
        a = start[i]
        b = end[i]
        r = room[i]
        ki = k[i]
        i += 1
        if op < 0 or a < 0 or b > slots:
            flagged[nf] = r  # not something this pass models: replay the room
            nf += 1
            continue
        if b <= a:
            continue
        for x in (a, b):  # runs must start at a and at b
            if x < slots:
                p = _prev_set(words, summary, x)
                if p != x:
                    _set(words, summary, x)
                    rec[x, 0] = rec[p, 0]
                    rec[x, 1] = rec[p, 1]
                    rec[x, 2] = rec[p, 2]
                    rec[x, 3] = rec[p, 3]
                    rec[x, SHARED] = rec[p, SHARED]
        me = False  # this event's room is flagged
        if op >= 4:  # read, share: the state does not change
            s = a
            while s < b:
                e = _next_set(words, summary, s)
                h = rec[s, HOLD_K]
                clean = h >= 0 and rec[s, HOLD_ROOM] == r and rec[s, WROTE_K] > h and rec[s, WROTE_ROOM] == r
                if rec[s, SHARED] or not clean:
                    me = True
                    if rec[s, SHARED] and h >= 0:
                        flagged[nf] = rec[s, HOLD_ROOM]
                        nf += 1
                s = e
            if me:  # what it found there, as maximal runs of one last write
                s = a
                run_s = a
                run_w = rec[a, WROTE_K]
                while s < b:
                    e = _next_set(words, summary, s)
                    if rec[s, WROTE_K] != run_w:
                        npv = _emit(prov, npv, ki, run_s, s, run_w)
                        run_s = s
                        run_w = rec[s, WROTE_K]
                    s = e
                npv = _emit(prov, npv, ki, run_s, b, run_w)
            # undo the splits at a and b where they separate equal runs
            for x in (a, b):
                if 0 < x < slots:
                    p = _prev_set(words, summary, x - 1)
                    if _same(rec, p, x):
                        _clear(words, summary, x)
        else:
            prev = _prev_set(words, summary, a - 1) if a > 0 else -1
            s = a
            while s < b:
                e = _next_set(words, summary, s)
                h = rec[s, HOLD_K]
                held = h >= 0 and rec[s, HOLD_ROOM] == r
                other = h >= 0 and not held
                if rec[s, SHARED]:  # the earlier holder may never have freed it: its holding stays open
                    me = True
                    if h >= 0:
                        flagged[nf] = rec[s, HOLD_ROOM]
                        nf += 1
                if op == 0:  # alloc
                    if other:
                        me = True
                        rec[s, SHARED] = 1
                        flagged[nf] = rec[s, HOLD_ROOM]
                        nf += 1
                    rec[s, HOLD_K] = ki
                    rec[s, HOLD_ROOM] = r
                elif op == 1:  # free
                    if held:
                        rec[s, HOLD_K] = -1
                    else:
                        me = True
                        if other:
                            flagged[nf] = rec[s, HOLD_ROOM]
                            nf += 1
                else:  # write, xfer
                    if not held:
                        me = True
                        if other:
                            flagged[nf] = rec[s, HOLD_ROOM]
                            nf += 1
                    rec[s, WROTE_K] = ki
                    rec[s, WROTE_ROOM] = r
                if prev >= 0 and _same(rec, prev, s):
                    _clear(words, summary, s)
                else:
                    prev = s
                s = e
            if b < slots and prev >= 0 and _same(rec, prev, b):
                _clear(words, summary, b)
        if me:
            flagged[nf] = r
            nf += 1
    return i, nf, npv


def screen_events(
    k: np.ndarray,
    opc: np.ndarray,
    room: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    runmap: RunMap,
    buffer: int = 1 << 20,
) -> tuple[np.ndarray, np.ndarray]:
    """Walk one chunk of a node's events (timeline order) on `runmap`, which carries over to the next
    chunk. Returns (flagged rooms, unique; provenance rows k, s, e, w_k)."""
    state = runmap.state()
    size = max(buffer, runmap.slots + 2)
    flagged = np.empty(size, dtype=np.int64)
    prov = np.empty((size, 4), dtype=np.int64)
    rooms: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    i = 0
    while True:
        i, nf, npv = screen_chunk(state, k, opc, room, start, end, i, flagged, prov)
        rooms.append(np.unique(flagged[:nf]))
        rows.append(prov[:npv].copy())
        if i >= k.shape[0]:
            break
    return np.unique(np.concatenate(rooms)), np.concatenate(rows)


def screen_rooms(con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
    """Create room_scope (node, room): the rooms of each node the detailed replay must cover; and
    screen_prov (node, k, s, e, w_k): what each flagged read found, w_k the key of the last write
    (NULL: never written). Returns, per node, whether its events were walked in stored order.

    Nodes are walked side by side (forensics.parallel); each spools what its reads found to Parquet
    files, stored node by node in name order."""
    with timed("ownership/screen"):
        con.execute("CREATE OR REPLACE TEMP TABLE room_scope (node VARCHAR, room BIGINT)")
        con.execute("CREATE OR REPLACE TEMP TABLE screen_prov (node VARCHAR, k BIGINT, s BIGINT, e BIGINT, w_k BIGINT)")
        nodes = [r[0] for r in con.execute("SELECT DISTINCT node FROM timeline ORDER BY node").fetchall()]
        # timeline is a view over page_events and timeline_xfer (timeline_view.sql) unless ranked
        as_view = bool(scalar(con, "SELECT count(*) FROM duckdb_views() WHERE view_name = 'timeline'"))
        with tempfile.TemporaryDirectory(prefix="kvf-screen-", dir=_spool_parent(con)) as spool:

            def walk(cur: duckdb.DuckDBPyConnection, i: int) -> tuple[np.ndarray, bool, list[str]]:
                return _screen_node(cur, nodes[i], as_view, Path(spool) / f"node{i:05d}")

            order = {}
            for node, (flagged, stored_order, parts) in zip(
                nodes, side_by_side(con, range(len(nodes)), walk), strict=True
            ):
                con.register("screen_rooms_out", pa.table({"room": flagged}))
                try:
                    con.execute("INSERT INTO room_scope SELECT ?, room FROM screen_rooms_out", [node])
                finally:
                    con.unregister("screen_rooms_out")
                if parts:
                    files = ", ".join(sql_literal(p) for p in parts)
                    con.execute(
                        f"""INSERT INTO screen_prov SELECT ?, k, s, e, nullif(w_k, -1)
                            FROM read_parquet([{files}])""",
                        [node],
                    )
                order[node] = stored_order
        return order


def _spool_parent(con: duckdb.DuckDBPyConnection) -> str | None:
    """The database's temp directory (where DuckDB spills), if it exists: spooled rows go there too."""
    tmp = con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
    if tmp:
        Path(tmp).mkdir(parents=True, exist_ok=True)
        return str(tmp)
    return None


def _screen_node(
    con: duckdb.DuckDBPyConnection, node: str, as_view: bool, spool: Path
) -> tuple[np.ndarray, bool, list[str]]:
    """Walk the node's timeline in event order, CHUNK_EVENTS at a time: its own events as stored merged
    with the transfers that landed in it when the stored order rises (forensics.streams), else one
    sorted read of the timeline. Returns (flagged rooms, whether stored order served, the Parquet
    files under `spool` holding the provenance rows k, s, e, w_k in walk order). `con`: a connection
    of this node's own (nodes may be walked in parallel threads)."""
    spool.mkdir(parents=True, exist_ok=True)
    slots = 1 + scalar(con, 'SELECT coalesce(max("end"), 0) FROM timeline WHERE node = ?', [node])
    params = {"node": node}
    parts: list[str] = []

    def stored():
        own = chunks(
            con,
            f"""SELECT seq * 2 * 1048576 AS k, ({_OPC})::TINYINT AS opc, room, start, "end"
                FROM page_events WHERE node = $node AND op <> 'transfer'""",
            params,
            COLUMN_TYPES,
            CHUNK_EVENTS,
        )
        landed = con.execute(
            f"""SELECT pos * 1048576 + sub AS k, ({_OPC})::TINYINT AS opc, room, start, "end"
                FROM timeline_xfer WHERE node = $node ORDER BY k""",
            params,
        ).fetchnumpy()
        return merge(
            rising(own), [np.ascontiguousarray(landed[c], dtype=t) for c, t in zip(landed, COLUMN_TYPES, strict=True)]
        )

    def ordered():
        return chunks(
            con,
            f"""SELECT k, ({_OPC})::TINYINT AS opc, room, start, "end" FROM timeline WHERE node = $node ORDER BY k""",
            params,
            COLUMN_TYPES,
            CHUNK_EVENTS,
        )

    def store(pending: list[np.ndarray]) -> None:
        prov = np.concatenate(pending)
        path = spool / f"prov{len(parts):06d}.parquet"
        pq.write_table(pa.table({"k": prov[:, 0], "s": prov[:, 1], "e": prov[:, 2], "w_k": prov[:, 3]}), path)
        parts.append(str(path))

    def walk(stream) -> np.ndarray:
        for path in parts:  # a restarted walk
            Path(path).unlink()
        parts.clear()
        runmap = RunMap(int(slots))
        rooms: list[np.ndarray] = []
        pending: list[np.ndarray] = []  # provenance rows, spooled a few million at a time
        for k, opc, room, start, end in stream:
            flagged, prov = screen_events(k, opc, room, start, end, runmap)
            rooms.append(flagged)
            if len(prov):
                pending.append(prov)
                if sum(len(p) for p in pending) >= PROV_BATCH:
                    store(pending)
                    pending = []
        if pending:
            store(pending)
        return np.unique(np.concatenate(rooms)) if rooms else np.empty(0, dtype=np.int64)

    flagged, stored_order = in_order(walk, stored, ordered) if as_view else (walk(ordered()), False)
    return flagged, stored_order, parts
