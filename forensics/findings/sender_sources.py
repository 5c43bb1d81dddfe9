"""Findings stage, the possible sources of an affected response on a receiver whose senders lost page events or
kept none (spec section 7: every indeterminate response gets possible sources, a superset by
construction).

A sender's lost transfers are invisible on the receiver: the ownership's last writer of a slot a
response read (read_provenance: w_pos) is the last write the evidence proves, and a transfer nobody
logged may have landed on the slot after it. A transfer lands in the slots its room allocated on the
receiver, after that alloc; before the room's free there when the room read on the receiver (the
receiver runs a request only once its KV arrived), at any later time when it did not (an aborted room,
whose transfer may land after its free). So a room S whose transfer may be invisible (no transfer of it
logged on the receiver, or one from a sender that lost events: its other transfers may be lost) is a
possible source of a read of slots [s, e) at position p whose last proven write is at w when one of
S's holdings there overlaps [s, e) with its alloc before p and its possible landing end after w:
  - allocated between w and p: a sweep (forensics.ownership.kernels.sweep.hits) with S's alloc as the
    query and the read's (w, p) as the interval;
  - allocated before w, its landing possible after w: the same sweep with the read's w as the query.
Both sweeps cost the events plus the pairs found: the rooms that held the read slots between their last
proven write and the read, never every room with every room (the reads: sender_reads.sql; the
holdings: sender_held.sql). sender_sources.sql keeps the pairs.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, run_query
from forensics.ownership.kernels import frozen
from forensics.ownership.kernels.sweep import hits
from forensics.paths import load_query


def _i64(t: pa.Table, name: str) -> np.ndarray:
    return frozen(t[name].to_numpy(zero_copy_only=False))  # one array type: one compile of hits


def _pairs(reads: pa.Table, held: pa.Table) -> pa.Table:
    """(node, recipient_room, source_room) of every read and holding the module's rule pairs."""
    gw, gp, rs, re_ = (_i64(reads, c) for c in ("gw", "gp", "seg_start", "seg_end"))
    ga, gf, hs, he = (_i64(held, c) for c in ("ga", "gf", "seg_start", "seg_end"))
    # allocated between the last proven write and the read: the alloc is the query, (w, p) the interval
    h1, r1 = hits(ga, hs, he, gw, gp, rs, re_)
    # allocated before the last proven write, its landing possible after it: w is the query
    r2, h2 = hits(gw, rs, re_, ga, gf, hs, he)
    r, h = np.concatenate([r1, r2]), np.concatenate([h1, h2])
    return pa.table(
        {
            "node": reads["node"].take(r),
            "recipient_room": reads["room"].take(r),
            "source_room": held["room"].take(h),
        }
    )


def sender_sources(con: duckdb.DuckDBPyConnection) -> None:
    """sender_sources (node, recipient_room, source_room): per affected response on a receiver whose
    senders lost page events or kept none, every room whose invisible transfer may hold what it read."""
    reads = con.sql(load_query("findings", "sender_reads")).to_arrow_table()
    held = con.sql(load_query("findings", "sender_held")).to_arrow_table()
    with arrow_view(con, "sender_hits", _pairs(reads, held)):
        run_query(con, "findings", "sender_sources")
