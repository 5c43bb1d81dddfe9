"""Findings stage, the allocator model's walk (used by forensics.findings.likelihood): one decode node's
request lifecycle (node_lifecycle.sql) replayed through a port of its page allocator
(forensics.ownership.kernels.allocator), MEMBERS times, each with the times drawn within what the log
allows, under the policy forensics.findings.allocator_policy chose.

The walk reads node_lifecycle, transfer_anchors.sql (the pages the prefills' transfer events name),
engine_lines (start-ups) and batch_stats (forensics.findings.batch_constraints); it
writes nothing: forensics.findings.likelihood stores what it finds.
"""

from __future__ import annotations

import hashlib
import zlib
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

import duckdb
import numpy as np

from forensics.db import thread_count
from forensics.engines.sglang import DURATION_ROUNDING
from forensics.findings import batch_constraints
from forensics.ownership.execution.walks import walk_executor
from forensics.ownership.kernels import allocator as alloc
from forensics.paths import load_query

# replays per node: the first with the logged times, the others with times drawn within what the log allows
MEMBERS = 8


@dataclass
class Lifecycle:
    """One decode node's rooms (node_lifecycle.sql), as arrays in room order."""

    room: np.ndarray
    n_read: np.ndarray
    n_xfer: np.ndarray
    n_out: np.ndarray
    aborted: np.ndarray
    times: dict[str, np.ndarray]  # t_alloc, t_land, t_read, t_end, t_free (NaN: unknown)
    unc_alloc: np.ndarray
    unc_land: np.ndarray
    res: np.ndarray

    @property
    def placeholder(self) -> np.ndarray:
        """Rooms decoded over more tokens than their transfer wrote (the prompt replaced by a placeholder):
        the recipients whose attention the walk follows."""
        return ~self.aborted & (self.n_xfer < self.n_read)


def lifecycle(con: duckdb.DuckDBPyConnection, node: str) -> Lifecycle:
    t = con.execute("SELECT * FROM node_lifecycle WHERE node = ? ORDER BY room", [node]).fetchnumpy()

    def col(name: str, dtype: type) -> np.ndarray:
        v = t[name]
        if np.ma.isMaskedArray(v):
            v = v.filled(np.nan if dtype is float else 0)
        return np.asarray(v, dtype=dtype)

    return Lifecycle(
        room=col("room", np.int64),
        n_read=col("n_read", np.int64),
        n_xfer=col("n_xfer", np.int64),
        n_out=col("n_out", np.int64),
        aborted=col("aborted", bool),
        times={k: col(k, float) for k in ("t_alloc", "t_land", "t_read", "t_end", "t_free")},
        unc_alloc=col("unc_alloc", float),
        unc_land=col("unc_land", float),
        res=col("res", float),
    )


def pages_of(start: np.ndarray, end: np.ndarray, ps: int) -> tuple[np.ndarray, np.ndarray]:
    """The pages each slot range [start, end) touches, concatenated, and how many per range."""
    first, last = start // ps, (end - 1) // ps
    counts = np.maximum(last - first + 1, 0)
    step = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(first, counts) + step, counts


def _anchors(con: duckdb.DuckDBPyConnection, node: str, lc: Lifecycle, ps: int, n_pages: int) -> tuple[np.ndarray, ...]:
    """Per room (CSR over lc's order): the pages of its pre-allocation the prefill's transfer events name,
    and the exact slot ranges its transfer wrote."""
    t = con.execute(load_query("findings", "transfer_anchors"), {"node": node}).fetchnumpy()
    room = np.asarray(t["room"], dtype=np.int64)
    start, end = np.asarray(t["start"], dtype=np.int64), np.asarray(t["end"], dtype=np.int64)
    idx = np.searchsorted(lc.room, room)
    ok = (idx < len(lc.room)) & (start >= 0) & (end > start) & (end <= (n_pages + 1) * ps)
    ok[ok] &= lc.room[idx[ok]] == room[ok]
    idx, start, end = idx[ok], start[ok], end[ok]
    order = np.lexsort((start, idx))
    idx, start, end = idx[order], start[order], end[order]
    x_ptr = np.zeros(len(lc.room) + 1, dtype=np.int64)
    np.add.at(x_ptr, idx + 1, 1)
    x_ptr = np.cumsum(x_ptr)
    # the pages those ranges touch, per room (ascending), at most its pre-allocation's page count
    page, counts = pages_of(start, end, ps)
    key = np.unique(np.repeat(idx, counts) * (n_pages + 2) + page)
    owner, page = key // (n_pages + 2), key % (n_pages + 2)
    heads = np.searchsorted(owner, owner)  # the first of each room's pages
    rank = np.arange(len(owner)) - heads
    keep = (page >= 1) & (page <= n_pages) & (rank < (-(-lc.n_read // ps))[owner])
    owner, page = owner[keep], page[keep]
    a_ptr = np.zeros(len(lc.room) + 1, dtype=np.int64)
    np.add.at(a_ptr, owner + 1, 1)
    return np.cumsum(a_ptr), page.astype(np.int32), x_ptr, start, end


def _events(lc: Lifecycle, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """The walk's events in time order: the logged times (rng None), or each drawn within what the log
    allows. A finished room's times all come from one line (its time) and its durations, so they move
    together by the line's resolution, and each by its duration's rounding; an aborted room's
    pre-allocation and landing are estimates of their own spread."""
    n = len(lc.room)
    t = {k: v.copy() for k, v in lc.times.items()}
    if rng is not None:
        shift = rng.uniform(-0.5, 0.5, n) * lc.res
        for k in ("t_alloc", "t_land", "t_read", "t_end", "t_free"):
            t[k] += shift + rng.uniform(-DURATION_ROUNDING, DURATION_ROUNDING, n) * (k != "t_free")
        ab = lc.aborted
        t["t_alloc"][ab] += rng.uniform(-1, 1, int(ab.sum())) * lc.unc_alloc[ab]
        t["t_land"][ab] += rng.uniform(-1, 1, int(ab.sum())) * lc.unc_land[ab]
    # a room's own events keep their order: pre-allocation first, then landing before decode starts
    later = np.fmin(np.fmin(t["t_land"], t["t_read"]), np.fmin(t["t_end"], t["t_free"]))
    t["t_alloc"] = np.fmin(t["t_alloc"], later - 1e-7)
    finished = ~lc.aborted
    t["t_land"][finished] = np.fmin(t["t_land"][finished], t["t_read"][finished] - 1e-8)
    kinds = [
        (alloc.LC_ALLOC_IN, t["t_alloc"]),
        (alloc.LC_LAND, t["t_land"]),
        (alloc.LC_READ, np.where(finished, t["t_read"], np.nan)),
        (alloc.LC_END, np.where(finished, t["t_end"], np.nan)),
        (alloc.LC_FREE, np.where(lc.aborted, t["t_free"], np.nan)),
    ]
    time = np.concatenate([v for _, v in kinds])
    kind = np.concatenate([np.full(n, k, dtype=np.int8) for k, _ in kinds])
    room = np.tile(np.arange(n, dtype=np.int32), len(kinds))
    known = ~np.isnan(time)
    time, kind, room = time[known], kind[known], room[known]
    order = np.lexsort((room, kind, time))
    return kind[order], room[order]


def tokens_before(con: duckdb.DuckDBPyConnection, node: str, lc: Lifecycle) -> np.ndarray:
    """Per room: the tokens the node's other rooms were given (prompt and output) after its last start-up
    and before this room's pre-allocation, by the logged times: how far the pool may have been written
    when the room got its pages (said beside a signature the model cannot show written over)."""
    starts = np.sort(
        np.asarray(
            [
                r[0]
                for r in con.execute(
                    """SELECT epoch_us(ts) / 1e6 FROM engine_lines
                    WHERE node = ? AND kind IN ('server_args', 'startup') AND ts IS NOT NULL""",
                    [node],
                ).fetchall()
            ],
            dtype=float,
        )
    )
    t = np.nan_to_num(lc.times["t_alloc"], nan=np.inf)
    order = np.argsort(t, kind="stable")
    given = (lc.n_read + lc.n_out)[order]
    cum = np.concatenate(([0], np.cumsum(given)))  # cum[i]: the tokens of the rooms before the i-th
    epoch = np.searchsorted(starts, t[order], side="right")  # the start-ups before each room
    first = np.searchsorted(epoch, epoch, side="left")  # the first room after the same start-up
    out = np.empty(len(t), dtype=np.int64)
    out[order] = cum[np.arange(len(t))] - cum[first]
    return out


@dataclass
class Walks:
    """The ensemble's result on one node: per (recipient, source) index pair, the members that found it."""

    recipient: np.ndarray
    source: np.ndarray
    hits: np.ndarray
    batch_basis: str = ""  # what the node's printed batch lines showed (forensics.findings.batch_constraints)
    # per room (lc's order): the members in whose replay some other room's KV was in its pages
    covered: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def walk_pool(con: duckdb.DuckDBPyConnection) -> Executor:
    """The threads the walks run in: the walk releases the GIL, so members run side by side, in as many
    threads as the run was given, while this thread prepares the next node's events (with --executor ray,
    a Ray task each: forensics.ownership.execution.walks)."""
    return walk_executor(thread_count(con))


@dataclass
class PendingWalks:
    """One node's members, submitted to a walk_pool: result() waits for them and merges what they found."""

    rooms: int
    members: list[Future[np.ndarray]]
    batch_basis: str

    def result(self) -> Walks:
        n = self.rooms
        found = [f.result() for f in self.members]
        keys, hits = np.unique(np.concatenate(found), return_counts=True)
        covered = np.zeros(n, dtype=np.int64)
        for f in found:
            covered[np.unique(f // n)] += 1
        return Walks(keys // n, keys % n, hits, self.batch_basis, covered)


def walk_node(
    con: duckdb.DuckDBPyConnection,
    node: str,
    lc: Lifecycle,
    ps: int,
    n_pages: int,
    policies: list[tuple[int, int]],
    pool: Executor,
) -> PendingWalks:
    """Submits node's MEMBERS replays to `pool` and returns without waiting for them."""
    # --- batch lines: the node's printed pool occupancy against this lifecycle, and the aborted rooms'
    # pre-allocation times it settles (forensics.findings.batch_constraints; nothing without the lines)
    lc, batch_basis = batch_constraints.constrain(con, node, lc, ps)
    a_ptr, a_pages, x_ptr, x_start, x_end = _anchors(con, node, lc, ps, n_pages)
    n_in = -(-lc.n_read // ps)
    watch = ~lc.aborted  # placeholders read others' data; any room may receive a late write
    rng = np.random.default_rng(zlib.crc32(node.encode()))  # the same bundle gives the same likelihoods
    # the walk is deterministic: a member whose draws leave the events in an order walked already
    # (events far apart for the log's resolution) shares that walk's result
    walked: dict[tuple[int, int, bytes], Future[np.ndarray]] = {}
    members: list[Future[np.ndarray]] = []

    def one(pol: int, window: int, kind: np.ndarray, room: np.ndarray) -> np.ndarray:
        pairs = alloc.walk(
            n_pages, ps, pol, window, kind, room, n_in, lc.n_read, lc.n_xfer, lc.n_out, watch,
            a_ptr, a_pages, x_ptr, x_start, x_end,
        )  # fmt: skip
        return np.unique(pairs[:, 0].astype(np.int64) * len(lc.room) + pairs[:, 1])

    for m in range(MEMBERS):
        kind, room = _events(lc, None if m == 0 else rng)
        pol, window = policies[m % len(policies)]
        order = (pol, window, hashlib.sha256(kind.tobytes() + room.tobytes()).digest())
        if order not in walked:
            walked[order] = pool.submit(one, pol, window, kind, room)
        members.append(walked[order])
    return PendingWalks(len(lc.room), members, batch_basis)
