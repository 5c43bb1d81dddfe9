"""Findings stage, possible sources without their pairs: which requests are a possible source of some
response (possible_pool.reachable), and how many possible sources each response has
(possible_windows.sources), by the rule of queries/possible_sources/00_possible_pair.sql, counted from
sorted times instead of the pairs.

The pairs grow as recipients x requests in their windows (1.6M rows at 24,000 requests, billions at a
14-day cluster's volume); the accounts, the notifications and the bounds need only these two figures.
A source s and a response r pair unless s entered after r's decode finished (s.started > r.finished) or a
start-up emptied the pool after s's last line and no later than r's start (s.gone_at <= r.started).
gone_at takes few values per node (its start-ups, or none), so the sources fall into a few groups by
gone_at; within a group the rule is one comparison of s.started against r.finished, over the responses
that started before the group's gone_at: a sorted count per response, and the two latest-finishing
responses (of different rooms) per group for reachability. Unknown times prove nothing: they become
the bound that keeps the pair.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view

LO, HI = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _us(v: np.ndarray, null: int) -> np.ndarray:
    """Epoch microseconds, with `null` for an unknown time."""
    if np.ma.isMaskedArray(v):
        v = v.filled(null)
    return np.asarray(v, dtype=np.int64)


def _codes(*cols: np.ndarray) -> list[np.ndarray]:
    """Shared integer codes for text values across the columns; NULL gets -1 (distinct from every value,
    and from another NULL: a NULL room or request id identifies nothing)."""
    filled = [np.asarray(c.filled(None) if np.ma.isMaskedArray(c) else c, dtype=object) for c in cols]
    values = sorted({v for c in filled for v in c.tolist() if v is not None}, key=str)
    index = {v: i for i, v in enumerate(values)}
    return [np.array([index.get(v, -1) if v is not None else -1 for v in c.tolist()], dtype=np.int64) for c in filled]


def _node(src: dict[str, np.ndarray], rec: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(reachable per source, possible sources per recipient, its own rows included) on one node."""
    s_start, s_gone = src["started"], src["gone"]
    r_start, r_fin = rec["started"], rec["finished"]
    reach = np.zeros(len(s_start), dtype=bool)
    count = np.zeros(len(r_start), dtype=np.int64)
    order = np.argsort(r_start, kind="stable")  # recipients by start: those before a gone_at are a prefix
    r_sorted = r_start[order]
    for g in np.unique(s_gone):
        members = np.flatnonzero(s_gone == g)
        started = np.sort(s_start[members])
        eligible = r_start < g  # gone_at <= r.started rules the group out for r
        count[eligible] += np.searchsorted(started, r_fin[eligible], side="right")
        prefix = order[: int(np.searchsorted(r_sorted, g, side="left"))]
        if not len(prefix):
            continue
        # the latest-finishing eligible recipient, and the latest of another room: a source is reachable if
        # one of them that is not itself finished at or after it started
        fin = r_fin[prefix]
        best = prefix[int(np.argmax(fin))]
        other = prefix[rec["room"][prefix] != rec["room"][best]]
        second = other[int(np.argmax(r_fin[other]))] if len(other) else -1
        for cand in (best, second):
            if cand < 0:
                continue
            self_ = (src["room"][members] == rec["room"][cand]) | (src["rid"][members] == rec["rid"][cand])
            reach[members] |= (s_start[members] <= r_fin[cand]) & ~self_
        # both excluded as the source itself (a request id shared across rooms): every eligible recipient
        for m in members[~reach[members]]:
            if s_start[m] > fin.max():
                continue
            ok = (fin >= s_start[m]) & (rec["room"][prefix] != src["room"][m]) & (rec["rid"][prefix] != src["rid"][m])
            reach[m] = bool(ok.any())
    return reach, count


def possible_reach(con: duckdb.DuckDBPyConnection) -> None:
    """possible_pool.reachable and possible_windows.sources (the possible sources of each response, its
    own rows excluded as the view possible_sources excludes them)."""
    s = con.execute("""SELECT rowid AS id, node, room::VARCHAR AS room, request_id, epoch_us(started) AS started,
        epoch_us(gone_at) AS gone FROM possible_pool ORDER BY node, id""").fetchnumpy()
    r = con.execute("""SELECT rowid AS id, node, recipient_room::VARCHAR AS room, recipient_request_id AS rid,
        epoch_us(started) AS started, epoch_us(finished) AS finished
        FROM possible_windows ORDER BY node, id""").fetchnumpy()
    s_room, r_room, s_rid, r_rid = _codes(s["room"], r["room"], s["request_id"], r["rid"])
    r_room[r_room < 0], r_rid[r_rid < 0] = -2, -2  # a recipient's unknown id is not a source's unknown id
    src = {"room": s_room, "rid": s_rid, "started": _us(s["started"], LO), "gone": _us(s["gone"], HI)}
    rec = {"room": r_room, "rid": r_rid, "started": _us(r["started"], LO), "finished": _us(r["finished"], HI)}
    s_node, r_node = np.asarray(s["node"], dtype=object), np.asarray(r["node"], dtype=object)
    reach = np.zeros(len(s_node), dtype=bool)
    count = np.zeros(len(r_node), dtype=np.int64)
    for node in sorted(set(r_node.tolist())):
        si, ri = np.flatnonzero(s_node == node), np.flatnonzero(r_node == node)
        reach[si], count[ri] = _node({k: v[si] for k, v in src.items()}, {k: v[ri] for k, v in rec.items()})
    with (
        arrow_view(con, "reach_out", pa.table({"id": np.asarray(s["id"], dtype=np.int64), "reachable": reach})),
        arrow_view(con, "count_out", pa.table({"id": np.asarray(r["id"], dtype=np.int64), "n": count})),
    ):
        con.execute("""UPDATE possible_pool SET reachable = o.reachable
            FROM reach_out o WHERE o.id = possible_pool.rowid""")
        # the recipient's own rows (its room, or its request id) keep the rule too and are not its sources
        con.execute("""UPDATE possible_windows SET sources = o.n - (
                SELECT count(*) FROM possible_pool p
                WHERE p.node = possible_windows.node
                  AND (p.room = possible_windows.recipient_room OR p.request_id = possible_windows.recipient_request_id)
                  AND possible_pair(p.started, p.gone_at, possible_windows.started, possible_windows.finished))
            FROM count_out o WHERE o.id = possible_windows.rowid""")
