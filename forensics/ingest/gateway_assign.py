"""Ingest stage, the gateway join's assignment as a whole: the records no id or time join placed against
the rooms no record claims (assign_edges, ingest/queries/gateway_join/07_assign_edges.sql), and the pairs
the evidence forces among them.

A record that names no engine id (LiteLLM logs an aborted request under its own litellm_call_id) agrees
with every room of its model whose lines fit its time window and whose input length fits its estimate;
one room alone seldom does, so the join by time leaves many records and rooms open. Taken together they
often settle: the graph of open records and open rooms is peeled (`force`), and what stays open lists
its candidates (room_candidates, ingest/queries/gateway_join_end/03_room_candidates.sql).

The rule, and why it is sound. Two facts about the evidence:
- A1: the gateway log names every request the engines served, so each open room's own record is among
  the open records (the rooms other records claim are not open; a record claims one room at most).
- A2: a record's own room agrees with it (the time join's clock bounds and length tolerances hold: the
  truth lies inside them), so each room's edges hold its own record.
Under both, the true pairs are a matching of the graph that covers every open room. A room with a single
edge is then that record's room in every such matching: it is forced. Forcing it takes the record out
of every other room's edges (a record has one room), which may leave another room a single edge: forced
in turn. The peel runs on a queue of rooms whose degree fell to one, each edge looked at a bounded number
of times: linear in the edges, never rooms x records (the edges themselves come from the time join's
range join on sorted time bounds). Where the peel leaves a room of some component without any edge, or a
component holds more rooms than records, no matching covers its rooms: A1 or A2 fails there (a record
lost, a clock bound wrong), and nothing in that component is forced; each of its rooms keeps all of its
candidates. A1 is known false where the gateway log is damaged (a file unread, rows rejected other than
exact repeats): then nothing is forced anywhere, and every open room lists its candidates.

A record is never forced from its own side: one with a single candidate room may have reached no engine
(a 400, a 503, an abort before prefill), and LiteLLM's successes all carry the engine's id.
"""

from __future__ import annotations

from collections import deque

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view


def force(rec: np.ndarray, room: np.ndarray, complete: bool) -> np.ndarray:
    """The forced edges of a bipartite graph (edge i joins record rec[i] and room room[i], both small
    integers): a boolean mask over the edges. `complete`: the gateway log is whole (A1 holds where the
    evidence does not contradict it); otherwise nothing is forced."""
    n = len(rec)
    forced = np.zeros(n, dtype=bool)
    if not complete or n == 0:
        return forced
    n_rec, n_room = int(rec.max()) + 1, int(room.max()) + 1
    by_rec = _adjacency(rec, n_rec)
    by_room = _adjacency(room, n_room)
    rec_alive = np.ones(n_rec, dtype=bool)
    edge_alive = np.ones(n, dtype=bool)
    degree = np.bincount(room, minlength=n_room)
    done = np.zeros(n_room, dtype=bool)
    queue = deque(int(r) for r in np.flatnonzero(degree == 1))
    while queue:
        r = queue.popleft()
        if done[r] or degree[r] != 1:
            continue
        edges = by_room[r]
        e = int(edges[edge_alive[edges]][0])
        done[r] = True
        forced[e] = True
        k = int(rec[e])
        rec_alive[k] = False
        for f in by_rec[k]:  # the record is this room's: no other room may have it
            if edge_alive[f] and f != e:
                edge_alive[f] = False
                other = int(room[f])
                degree[other] -= 1
                if degree[other] == 1 and not done[other]:
                    queue.append(other)
    # a component whose rooms no matching covers contradicts A1 or A2: nothing in it is forced
    comp = _components(rec, room, n_rec, n_room)
    room_comp = np.full(n_room, -1, dtype=np.int64)
    room_comp[room] = comp
    rec_comp = np.full(n_rec, -1, dtype=np.int64)
    rec_comp[rec] = comp
    n_comp = int(comp.max()) + 1
    bad = np.zeros(n_comp, dtype=bool)
    present = np.zeros(n_room, dtype=bool)
    present[room] = True
    starved = present & (degree == 0)
    bad[room_comp[starved]] = True
    rooms_in = np.bincount(room_comp[present], minlength=n_comp)
    recs_in = np.bincount(rec_comp[rec_comp >= 0], minlength=n_comp)
    bad |= rooms_in > recs_in
    forced &= ~bad[comp]
    return forced


def _adjacency(key: np.ndarray, size: int) -> list[np.ndarray]:
    """The edges of each key, as index arrays (one stable sort)."""
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[order], np.arange(size + 1))
    return [order[bounds[i] : bounds[i + 1]] for i in range(size)]


def _components(rec: np.ndarray, room: np.ndarray, n_rec: int, n_room: int) -> np.ndarray:
    """The connected component of each edge (union-find over records and rooms, rooms after records):
    numbered 0.. in the order of their first edge."""
    parent = np.arange(n_rec + n_room)

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    for a, b in zip(rec.tolist(), (room + n_rec).tolist(), strict=True):
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    roots = np.array([root(a) for a in rec.tolist()], dtype=np.int64)
    _, comp = np.unique(roots, return_inverse=True)
    return np.asarray(comp, dtype=np.int64)


def assign_open(con: duckdb.DuckDBPyConnection, complete: bool) -> None:
    """gateway_assigned (file_id, row, room): the forced pairs of assign_edges; assign_open (file_id, row,
    room, length_used): the edges of each room left open, less the records forced to other rooms (under A1
    and A2 those are theirs); in a component where nothing is forced, all of its edges."""
    t = con.sql("SELECT file_id, row, room, length_used FROM assign_edges ORDER BY file_id, row, room").to_arrow_table()
    file_id = np.asarray(t.column("file_id").to_numpy(zero_copy_only=False), dtype=np.int64)
    row = np.asarray(t.column("row").to_numpy(zero_copy_only=False), dtype=np.int64)
    # the edges come sorted by record: a record's number is the count of record changes before it
    change = np.ones(len(t), dtype=bool)
    change[1:] = (file_id[1:] != file_id[:-1]) | (row[1:] != row[:-1])
    rec = np.cumsum(change) - 1
    rooms = np.asarray(t.column("room").to_numpy(zero_copy_only=False), dtype=np.int64)
    room = np.asarray(np.unique(rooms, return_inverse=True)[1], dtype=np.int64).reshape(-1)
    forced = force(rec, room, complete)
    taken_rec = np.zeros(len(t), dtype=bool)
    taken_rec[rec[forced]] = True
    taken_room = np.zeros(len(t), dtype=bool)
    taken_room[room[forced]] = True
    result = t.append_column("forced", pa.array(forced)).append_column(
        "open", pa.array(~taken_room[room] & ~taken_rec[rec])
    )
    with arrow_view(con, "assign_result", result):
        con.execute(
            "CREATE OR REPLACE TEMP TABLE gateway_assigned AS SELECT file_id, row, room FROM assign_result "
            "WHERE forced ORDER BY file_id, row"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE assign_open AS SELECT file_id, row, room, length_used "
            "FROM assign_result WHERE open ORDER BY room, file_id, row"
        )
