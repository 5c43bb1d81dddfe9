"""Receiver seqs around each transfer's landing window, in numpy.

For a transfer that landed between receiver-clock times land_lo and land_hi: seq_max, the highest seq
of a receiver event stamped at or before land_lo (it surely came before the landing), and seq_min,
the lowest seq of one stamped at or after land_hi (surely after). Per receiver: its events by stamp
(as stored when the stamps rise with seq, else after a stable sort), a running maximum of seq from
the left and a running minimum from the right, and a binary search per transfer. This replaces a
GROUP BY over every distinct stamp and two ASOF joins.
Reads: page_events, landing_bounds. Writes: landing_seqs (sender, xseq, seq_max, seq_min).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

SCHEMA = pa.schema([("sender", pa.string()), ("xseq", pa.int64()), ("seq_max", pa.int64()), ("seq_min", pa.int64())])


def landing_seqs(con: duckdb.DuckDBPyConnection) -> None:
    parts = []
    receivers = [r[0] for r in con.execute("SELECT DISTINCT receiver FROM landing_bounds ORDER BY 1").fetchall()]
    for node in receivers:
        ev = con.execute(
            "SELECT epoch_us(ts) AS t, seq FROM page_events WHERE node = ? AND op <> 'transfer'", [node]
        ).fetchnumpy()
        x = con.execute(
            """SELECT sender, xseq, epoch_us(land_lo) AS lo, epoch_us(land_hi) AS hi
               FROM landing_bounds WHERE receiver = ?""",
            [node],
        ).fetchnumpy()
        parts.append(_receiver(ev, x))
    table = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
    con.register("landing_seqs_out", table)
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE landing_seqs AS SELECT * FROM landing_seqs_out")
    finally:
        con.unregister("landing_seqs_out")


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
    return pa.table(
        {
            "sender": pa.array(np.asarray(x["sender"], dtype=object), type=pa.string()),
            "xseq": pa.array(_dense(x["xseq"])[0]),
            "seq_max": pa.array(seq_max, mask=none_lo),
            "seq_min": pa.array(seq_min, mask=none_hi),
        },
        schema=SCHEMA,
    )
