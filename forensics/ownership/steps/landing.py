"""Receiver seqs around each transfer's landing window, in numpy.

For a transfer that landed between receiver-clock times land_lo and land_hi: seq_max, the highest seq
of a receiver event stamped at or before land_lo (it surely came before the landing), and seq_min,
the lowest seq of one stamped at or after land_hi (surely after). Per receiver: its events by stamp
(as stored when the stamps rise with seq, else after a stable sort), a running maximum of seq from
the left and a running minimum from the right, and a binary search per transfer. The events are read
in stored order when that rises (forensics.ownership.execution.streams), else sorted. This replaces a
GROUP BY over every distinct stamp and two ASOF joins.
Reads: page_events, landing_bounds, transfer_links. Writes: landing_seqs (link, seq_max, seq_min; link:
the transfer's row in transfer_links, see ownership/queries/landing_bounds.sql).

window_hits, once the windows are fixed (transfer_landing.sql): which transfers have a receiver event
touching the same slots strictly inside their landing window (seq_lo, seq_hi), however wide. One pass
over each receiver's events in seq order (forensics.ownership.kernels.windows: a segment tree of the
highest seq on each slot). Reads: transfer_landing, page_events, telemetry_nodes. Writes:
landing_window_hits (sender, xseq).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view
from forensics.ownership.execution.parallel import receivers, side_by_side
from forensics.ownership.execution.streams import chunks, in_order, rising
from forensics.ownership.kernels import frozen
from forensics.ownership.kernels.windows import finish_windows, sweep_windows, tree_for

SCHEMA = pa.schema([("link", pa.int64()), ("seq_max", pa.int64()), ("seq_min", pa.int64())])


def landing_seqs(con: duckdb.DuckDBPyConnection) -> None:
    nodes, weights = receivers(con, "transfer_links")  # the rows of landing_bounds, without its join
    events = "SELECT epoch_us(ts) AS t, seq FROM page_events WHERE node = $node AND op <> 'transfer'"

    def fetch(node: str) -> tuple[str, dict]:  # landing_bounds is a temp view: read on `con`
        return node, _transfers(con, node)

    def seqs(cur: duckdb.DuckDBPyConnection, job: tuple[str, dict]) -> pa.Table:
        node, x = job
        for query in (
            events,
            events + " ORDER BY seq",
        ):  # as stored (see execution.streams), then sorted
            table = _receiver_chunks(chunks(cur, query, {"node": node}, (np.int64, np.int64)), x)
            if table is not None:
                return table
        ev = cur.execute(events, {"node": node}).fetchnumpy()  # stamps out of seq order: all at once, sorted
        return _receiver(ev, x)

    parts = list(side_by_side(con, nodes, seqs, prepare=fetch, weights=weights))
    table = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
    with arrow_view(con, "landing_seqs_out", table):
        con.execute("CREATE OR REPLACE TEMP TABLE landing_seqs AS SELECT * FROM landing_seqs_out")


def _transfers(con: duckdb.DuckDBPyConnection, node: str) -> dict:
    """The transfers into `node`: link (their rows in transfer_links), and the landing window's ends in
    epoch microseconds as masked arrays (masked: unbounded)."""
    t = con.sql(
        """SELECT link, coalesce(epoch_us(land_lo), 0) AS lo, land_lo IS NULL AS lo_null,
                  coalesce(epoch_us(land_hi), 0) AS hi, land_hi IS NULL AS hi_null
           FROM landing_bounds WHERE receiver = $node""",
        params={"node": node},
    ).to_arrow_table()

    def col(name: str) -> np.ndarray:
        return np.ascontiguousarray(t.column(name).to_numpy(), dtype=np.int64)

    def nulls(name: str) -> np.ndarray:
        return np.asarray(t.column(name).to_numpy(zero_copy_only=False), dtype=bool)

    return {
        "link": col("link"),
        "lo": np.ma.MaskedArray(col("lo"), mask=nulls("lo_null")),
        "hi": np.ma.MaskedArray(col("hi"), mask=nulls("hi_null")),
    }


def _receiver_chunks(batches, x: dict) -> pa.Table | None:
    """The seqs around each landing window from a receiver's events streamed in storage order, while
    both stamps and seqs rise (as instrumentation logs them): then seq_max(lo) is the seq of the last
    event stamped at or before lo and seq_min(hi) that of the first stamped at or after hi. Each
    transfer is answered by the one chunk whose stamps span its bound. None when the order breaks."""
    lo, lo_null = _dense(x["lo"])
    hi, hi_null = _dense(x["hi"])
    m = lo.size
    seq_max = np.zeros(m, dtype=np.int64)
    seq_min = np.zeros(m, dtype=np.int64)
    has_max = np.zeros(m, dtype=bool)
    has_min = np.zeros(m, dtype=bool)
    lo_q = np.flatnonzero(~lo_null)
    lo_q = lo_q[np.argsort(lo[lo_q], kind="stable")]
    hi_q = np.flatnonzero(~hi_null)
    hi_q = hi_q[np.argsort(hi[hi_q], kind="stable")]
    lo_s, hi_s = lo[lo_q], hi[hi_q]
    prev_t: int | None = None
    prev_seq: int | None = None
    for t, seq in batches:  # (no nulls: page_events rows are validated)
        if not t.size:
            continue
        if not (bool(np.all(t[1:] >= t[:-1])) and bool(np.all(seq[1:] > seq[:-1]))):
            return None
        if prev_t is not None and (t[0] < prev_t or seq[0] <= prev_seq):
            return None
        # lo in [prev last stamp, this last stamp): the last event stamped <= lo is in this chunk,
        # or (lo before its first stamp) the previous chunk's last event
        a = 0 if prev_t is None else int(np.searchsorted(lo_s, prev_t, side="left"))
        b = int(np.searchsorted(lo_s, t[-1], side="left"))
        if b > a:
            idx = np.searchsorted(t, lo_s[a:b], side="right") - 1
            q = lo_q[a:b]
            got = idx >= 0
            seq_max[q[got]] = seq[idx[got]]
            has_max[q[got]] = True
            if prev_seq is not None:
                seq_max[q[~got]] = prev_seq
                has_max[q[~got]] = True
        # hi in (prev last stamp, this last stamp]: the first event stamped >= hi is in this chunk
        a = 0 if prev_t is None else int(np.searchsorted(hi_s, prev_t, side="right"))
        b = int(np.searchsorted(hi_s, t[-1], side="right"))
        if b > a:
            idx = np.searchsorted(t, hi_s[a:b], side="left")
            seq_min[hi_q[a:b]] = seq[idx]
            has_min[hi_q[a:b]] = True
        prev_t, prev_seq = int(t[-1]), int(seq[-1])
    if prev_t is not None and prev_seq is not None:  # lo at or after the last stamp: the last event
        rest = lo_q[int(np.searchsorted(lo_s, prev_t, side="left")) :]
        seq_max[rest] = prev_seq
        has_max[rest] = True
    return _table(x, seq_max, ~has_max, seq_min, ~has_min)


def _dense(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as 0, null mask) of a fetched column."""
    if isinstance(values, np.ma.MaskedArray):
        return np.asarray(values.filled(0), dtype=np.int64), np.ma.getmaskarray(values)
    return np.asarray(values, dtype=np.int64), np.zeros(len(values), dtype=bool)


def _receiver(ev: dict, x: dict) -> pa.Table:
    t, _ = _dense(ev["t"])
    seq, _ = _dense(ev["seq"])
    del ev
    n = t.size
    if n > 1 and not bool(np.all(t[1:] >= t[:-1])):  # stamps out of order: sort (else already sorted)
        order = np.argsort(t, kind="stable")
        t, seq = t[order], seq[order]
        del order
    if n > 1 and not bool(np.all(seq[1:] > seq[:-1])):
        run_min = np.minimum.accumulate(seq[::-1])[::-1]
        run_max = np.maximum.accumulate(seq, out=seq)
    else:  # seq rises with the stamps (as instrumentation logs them): both running extremes are seq
        run_min = run_max = seq
    lo, lo_null = _dense(x["lo"])
    hi, hi_null = _dense(x["hi"])
    i_lo = np.searchsorted(t, lo, side="right") - 1  # last event stamped at or before lo
    i_hi = np.searchsorted(t, hi, side="left")  # first event stamped at or after hi
    none_lo = lo_null | (i_lo < 0)
    none_hi = hi_null | (i_hi >= n)
    seq_max = run_max[np.clip(i_lo, 0, max(n - 1, 0))] if n else np.zeros(lo.size, dtype=np.int64)
    seq_min = run_min[np.clip(i_hi, 0, max(n - 1, 0))] if n else np.zeros(hi.size, dtype=np.int64)
    return _table(x, seq_max, none_lo, seq_min, none_hi)


def _table(x: dict, seq_max: np.ndarray, no_max: np.ndarray, seq_min: np.ndarray, no_min: np.ndarray) -> pa.Table:
    """landing_seqs rows for the transfers `x` (null where no event bounds the window on that side)."""
    return pa.table(
        {
            "link": pa.array(_dense(x["link"])[0]),
            "seq_max": pa.array(seq_max, mask=no_max),
            "seq_min": pa.array(seq_min, mask=no_min),
        },
        schema=SCHEMA,
    )


def _node_hits(con: duckdb.DuckDBPyConnection, events: str, node: str, windows: tuple, slots: int) -> np.ndarray:
    """window_hits of one receiver: its events as stored if their seqs rise, else sorted, through the
    sweep of forensics.ownership.kernels.windows over a tree of `slots` slots."""
    lo, hi, xs, xe = (frozen(c) for c in windows)
    types = (np.int64, np.int64, np.int64)
    by_hi = frozen(np.argsort(hi, kind="stable"))
    lo_sorted = frozen(np.sort(lo))
    reach = frozen(np.maximum.accumulate(hi[np.argsort(lo, kind="stable")]) if lo.size else hi)

    def walk(stream) -> np.ndarray:
        tag, sub = tree_for(slots)
        hit = np.zeros(lo.size, dtype=np.bool_)
        at = np.zeros(2, dtype=np.int64)
        for cols in stream:
            seq, start, end = (frozen(c) for c in cols)
            sweep_windows(seq, start, end, lo, hi, xs, xe, by_hi, lo_sorted, reach, at, tag, sub, hit)
        finish_windows(lo, xs, xe, by_hi, at, tag, sub, hit)
        return hit

    def stored():
        return rising(chunks(con, events, {"node": node}, types))

    def ordered():
        return chunks(con, events + " ORDER BY seq", {"node": node}, types)

    return in_order(walk, stored, ordered)[0]


def window_hits(con: duckdb.DuckDBPyConnection) -> None:
    nodes, weights = receivers(con, "transfer_landing")
    events = """SELECT seq, start, "end" FROM page_events WHERE node = $node AND op <> 'transfer'"""

    def fetch(node: str) -> tuple[str, pa.Table, int]:
        x = con.sql(
            """SELECT sender, xseq, seq_lo, seq_hi, start, "end" FROM transfer_landing
               WHERE receiver = $node AND seq_lo IS NOT NULL AND seq_hi IS NOT NULL""",
            params={"node": node},
        ).to_arrow_table()
        own_end = con.execute("SELECT own_max_end FROM telemetry_nodes WHERE node = ?", [node]).fetchall()
        slots = int(own_end[0][0] or 0) if own_end else 0  # the highest slot end of its own events
        return node, x, slots

    def hits(cur: duckdb.DuckDBPyConnection, job: tuple[str, pa.Table, int]) -> pa.Table:
        node, x, slots = job
        lo, hi, xs, xe = (
            np.ascontiguousarray(x.column(c).to_numpy(), dtype=np.int64) for c in ("seq_lo", "seq_hi", "start", "end")
        )
        hit = _node_hits(cur, events, node, (lo, hi, xs, xe), max(slots, int(xe.max(initial=0))))
        return x.select(["sender", "xseq"]).filter(pa.array(hit))

    parts = list(side_by_side(con, nodes, hits, prepare=fetch, weights=weights))
    schema = pa.schema([("sender", pa.string()), ("xseq", pa.int64())])
    table = pa.concat_tables([p.cast(schema) for p in parts]) if parts else schema.empty_table()
    with arrow_view(con, "window_hits_out", table):
        con.execute("CREATE OR REPLACE TEMP TABLE landing_window_hits AS SELECT * FROM window_hits_out")
