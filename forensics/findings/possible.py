"""Findings stage, possible sources without their pairs: which requests are a possible source of some
response (possible_pool.reachable), and how many possible sources each response has
(possible_windows.sources), by the rule possible_pair (forensics.findings.rules), counted from
sorted times instead of the pairs.

The pairs grow as recipients x requests in their windows (1.6M rows at 24,000 requests, billions at a
14-day cluster's volume); the accounts, the notifications and the bounds need only these two figures.
A source s and a response r pair unless s entered after r's decode finished (s.started > r.finished) or a
start-up emptied the pool after s's last line and no later than r's start (s.gone_at <= r.started).
gone_at takes few values per node (its start-ups, or none), so the sources fall into a few groups by
gone_at; within a group the rule is one comparison of s.started against r.finished, over the responses
that started before the group's gone_at: a sorted count per response, and the two latest-finishing
responses (of different rooms) per group for reachability. Unknown times prove nothing: they become
the bound that keeps the pair. A response's own rows (its room, or its request id) are taken off its count
the same way: the sources sorted by room and by request id, each response's found by binary search, so
that the cost is the rows and the few pairs that share a key, never a response against its node's pool.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view

LO, HI = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _filled(v: np.ndarray, null: int) -> np.ndarray:
    """An integer column (epoch microseconds, a room, a request-id code) with `null` where it is unknown."""
    if np.ma.isMaskedArray(v):
        v = v.filled(null)
    return np.asarray(v, dtype=np.int64)


def _matches(s_key: np.ndarray, r_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (recipient, source) index pairs whose keys are equal: an equi-join by one sort of the sources
    and two binary searches per recipient, its cost the rows and the pairs it finds."""
    order = np.argsort(s_key, kind="stable")
    keys = s_key[order]
    lo = np.searchsorted(keys, r_key, side="left")
    n = np.searchsorted(keys, r_key, side="right") - lo
    ri = np.repeat(np.arange(len(r_key)), n)
    at = np.arange(len(ri)) - np.repeat(np.cumsum(n) - n, n)  # each pair's place among its recipient's
    return ri, order[np.repeat(lo, n) + at]


def _own(src: dict[str, np.ndarray], rec: dict[str, np.ndarray]) -> np.ndarray:
    """Per recipient on one node: its own rows (the sources of its room, or of its request id) that the
    rule pairs with it, each once. Unknown rooms and ids are filled apart (-1 sources, -2 recipients):
    they match nothing."""
    own = np.zeros(len(rec["room"]), dtype=np.int64)
    for key, other in (("room", None), ("rid", "room")):
        ri, si = _matches(src[key], rec[key])
        keep = (src["started"][si] <= rec["finished"][ri]) & (rec["started"][ri] < src["gone"][si])
        if other is not None:  # a source of its room too is counted by the room already
            keep &= src[other][si] != rec[other][ri]
        own += np.bincount(ri[keep], minlength=len(own))
    return own


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
        # both excluded as the source itself (a request id shared across rooms, rare): every eligible
        # recipient, for the sources some recipient finished after
        for m in members[~reach[members] & (s_start[members] <= fin.max())]:
            ok = (fin >= s_start[m]) & (rec["room"][prefix] != src["room"][m]) & (rec["rid"][prefix] != src["rid"][m])
            reach[m] = bool(ok.any())
    return reach, count


def possible_reach(con: duckdb.DuckDBPyConnection) -> None:
    """possible_pool.reachable and possible_windows.sources (the possible sources of each response, its
    own rows excluded as the view possible_sources excludes them)."""
    # request ids as integer codes shared by both tables (one sort in DuckDB); rooms are integers already
    con.execute("""CREATE OR REPLACE TEMP TABLE reach_ids AS
        SELECT v, row_number() OVER (ORDER BY v) AS code FROM (
            SELECT request_id AS v FROM possible_pool UNION SELECT recipient_request_id FROM possible_windows)
        WHERE v IS NOT NULL""")
    s = con.execute("""SELECT p.rowid AS id, p.node, p.room, i.code AS rid, epoch_us(p.started) AS started,
        epoch_us(p.gone_at) AS gone FROM possible_pool p LEFT JOIN reach_ids i ON i.v = p.request_id
        ORDER BY p.node, id""").fetchnumpy()
    r = con.execute("""SELECT w.rowid AS id, w.node, w.recipient_room AS room, i.code AS rid,
        epoch_us(w.started) AS started, epoch_us(w.finished) AS finished
        FROM possible_windows w LEFT JOIN reach_ids i ON i.v = w.recipient_request_id
        ORDER BY w.node, id""").fetchnumpy()
    con.execute("DROP TABLE reach_ids")
    # rooms are never negative (bootstrap_room lies in 0..2^63-1): -1 and -2 are the unknowns, different
    # for sources and recipients because a NULL identifies nothing (two unknown ids never match)
    src = {"room": _filled(s["room"], -1), "rid": _filled(s["rid"], -1), "started": _filled(s["started"], LO),
           "gone": _filled(s["gone"], HI)}  # fmt: skip
    rec = {"room": _filled(r["room"], -2), "rid": _filled(r["rid"], -2), "started": _filled(r["started"], LO),
           "finished": _filled(r["finished"], HI)}  # fmt: skip
    s_node, r_node = np.asarray(s["node"], dtype=object), np.asarray(r["node"], dtype=object)
    reach = np.zeros(len(s_node), dtype=bool)
    count = np.zeros(len(r_node), dtype=np.int64)
    for node in sorted(set(r_node.tolist())):
        si, ri = np.flatnonzero(s_node == node), np.flatnonzero(r_node == node)
        s_of, r_of = {k: v[si] for k, v in src.items()}, {k: v[ri] for k, v in rec.items()}
        reach[si], count[ri] = _node(s_of, r_of)
        # the recipient's own rows (its room, or its request id) keep the rule too and are not its sources
        count[ri] -= _own(s_of, r_of)
    with (
        arrow_view(con, "reach_out", pa.table({"id": np.asarray(s["id"], dtype=np.int64), "reachable": reach})),
        arrow_view(con, "count_out", pa.table({"id": np.asarray(r["id"], dtype=np.int64), "n": count})),
    ):
        con.execute("""UPDATE possible_pool SET reachable = o.reachable
            FROM reach_out o WHERE o.id = possible_pool.rowid""")
        con.execute("""UPDATE possible_windows SET sources = o.n
            FROM count_out o WHERE o.id = possible_windows.rowid""")
