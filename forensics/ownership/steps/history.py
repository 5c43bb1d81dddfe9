"""The windowed last-writer search of `investigate --full-replay` (the screened run takes the last
writers from the screening walk instead): each round looks for the open pieces' writers among the
node's last `window` writes before the read (ownership/queries/history_cand.sql), resolved by the
numpy envelope (forensics.ownership.kernels.envelope); what stays open goes to a wider round."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from forensics.db import arrow_view, timed
from forensics.ownership.kernels.envelope import envelope
from forensics.paths import load_query

# History windows, in writes before the read: most reads resolve in the first; 0 means all.
HISTORY_WINDOWS = (256, 4096, 32768, 0)
# candidates resolved per numpy envelope call (items are split into chunks of about this many)
ENVELOPE_CHUNK = 8_000_000


def history_round(con: duckdb.DuckDBPyConnection) -> None:
    """Split the open pieces by this round's candidates (history_cand); found parts go to history_found
    with their writer, the rest stays in history_open for a wider round. Items are independent: they
    are resolved in chunks of at most ENVELOPE_CHUNK candidates, so memory stays bounded."""
    with timed("ownership/history_envelope"):
        bounds = _item_chunks(con)
        con.execute("CREATE OR REPLACE TEMP TABLE history_open_next (item BIGINT, s BIGINT, e BIGINT)")
        for lo, hi in bounds:
            o = con.execute("SELECT item, s, e FROM history_open WHERE item BETWEEN ? AND ?", [lo, hi]).fetchnumpy()
            c = con.execute("SELECT item, cs, ce, k FROM cand WHERE item BETWEEN ? AND ?", [lo, hi]).fetchnumpy()
            env = envelope(o["item"], o["s"], o["e"], c["item"], c["cs"], c["ce"], c["k"])
            runs = pa.table({"item": env.item, "s": env.s, "e": env.e, "w_k": env.k})
            with arrow_view(con, "envelope_runs", runs):
                con.execute(load_query("ownership", "history_found_runs"))
                con.execute("INSERT INTO history_open_next SELECT item, s, e FROM envelope_runs WHERE w_k < 0")
        con.execute("CREATE OR REPLACE TABLE history_open AS SELECT * FROM history_open_next")
        con.execute("DROP TABLE history_open_next")


def _item_chunks(con: duckdb.DuckDBPyConnection) -> list[tuple[int, int]]:
    """Consecutive item ranges [lo, hi] holding at most about ENVELOPE_CHUNK candidates each."""
    rows = con.execute(
        """SELECT item, coalesce(n, 0) FROM (SELECT DISTINCT item FROM history_open) o
           LEFT JOIN (SELECT item, count(*) AS n FROM cand GROUP BY item) c USING (item) ORDER BY item"""
    ).fetchall()
    chunks: list[tuple[int, int]] = []
    start: int | None = None
    prev, total = 0, 0
    for item, n in rows:
        if start is not None and total + n > ENVELOPE_CHUNK:
            chunks.append((start, prev))
            start, total = None, 0
        if start is None:
            start = item
        total += n
        prev = item
    if start is not None:
        chunks.append((start, prev))
    return chunks
