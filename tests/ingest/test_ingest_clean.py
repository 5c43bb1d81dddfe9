"""The cheap screen of a page-event file (ingest/queries/page_events_clean.sql) never misses a row the
validation query would reject: ingest skips validation when the screen counts none."""

from __future__ import annotations

import duckdb
import pytest

from forensics.paths import load_query

COLUMNS = ("parse_error", "node", "seq", "ts", "op", "room", "start", "end", "peer")
GOOD = dict(zip(COLUMNS, (None, "decode-0", 7, "2026-08-29T10:00:00Z", "alloc", 5, 0, 16, None), strict=True))
VARIANTS = {
    "good": {},
    "good transfer": dict(op="transfer", peer="decode-1"),
    "parse error": dict(parse_error="not a JSON object"),
    "node null": dict(node=None),
    "node empty": dict(node=""),
    "seq null": dict(seq=None),
    "ts null": dict(ts=None),
    "op null": dict(op=None),
    "op unknown": dict(op="teleport"),
    "room null": dict(room=None),
    "start null": dict(start=None),
    "end null": dict(end=None),
    "start negative": dict(start=-16, end=0),
    "empty range": dict(start=16, end=16),
    "inverted range": dict(start=40, end=20),
    "transfer without peer": dict(op="transfer"),
    "transfer with empty peer": dict(op="transfer", peer=""),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_clean_screen_counts_every_row_validation_rejects(variant: str) -> None:
    row = {**GOOD, **VARIANTS[variant]}
    con = duckdb.connect()
    con.execute(
        """CREATE TABLE pages_stage (row BIGINT, parse_error VARCHAR, node VARCHAR, seq BIGINT, seq_raw VARCHAR,
           ts TIMESTAMPTZ, ts_raw VARCHAR, op VARCHAR, room BIGINT, room_raw VARCHAR, start BIGINT, "end" BIGINT,
           peer VARCHAR, src VARCHAR)"""
    )
    con.execute(
        "INSERT INTO pages_stage VALUES (1, ?, ?, ?, NULL, ?, NULL, ?, ?, NULL, ?, ?, ?, NULL)",
        [row[c] for c in COLUMNS],
    )
    con.execute("CREATE TABLE rejected (file_id INTEGER, row BIGINT, reason VARCHAR)")
    con.execute(load_query("ingest", "page_events_validate"), {"file_id": 1})
    rejected = con.execute("SELECT count(*) FROM rejected").fetchone()[0]
    suspect = con.execute(load_query("ingest", "page_events_clean")).fetchone()[0]
    assert rejected == (0 if variant.startswith("good") else 1)
    assert suspect == rejected  # never fewer (a miss), and no more on these rows
