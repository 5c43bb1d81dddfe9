"""The time join's pairs (ingest/queries/gateway_join/05_time_hits.sql) are found by time bucket, not by a
range join of every pending record with every unclaimed room: on random records and rooms (records
without an end, windows far wider than most, rooms on nodes no clock bound places, unknown lengths) the
step gives the rows of its rule written as that plain join."""

from __future__ import annotations

import random
import re

import pytest

from forensics.db import bound, connect
from forensics.ingest.gateway import GATEWAY_SLACK_US, LENGTH_ABS, LENGTH_FAR, LENGTH_REL
from forensics.paths import query_dir
from tests.support import insert_rows

STEP = query_dir("ingest") / "gateway_join" / "05_time_hits.sql"
# the rule of the step's header: placed rooms whose first line lies in the record's window (and, for a
# success, its last too), every unplaced room, and for a record without an end every placed room
RULE_PAIRS = """), pairs AS (
    SELECT p.*, r.room, r.input_len, r.placed, r.nodes FROM pending p JOIN rooms r
      ON r.placed AND r.first_hi >= p.gs AND r.first_lo <= p.ge AND (NOT p.ok OR r.last_lo <= p.ge)
    UNION ALL
    SELECT p.*, r.room, r.input_len, r.placed, r.nodes FROM pending p JOIN rooms r ON NOT r.placed
    UNION ALL
    SELECT p.*, r.room, r.input_len, false, r.nodes FROM pending p JOIN rooms r ON p.ge IS NULL AND r.placed
)
"""
PARAMS = dict(gw_slack_us=GATEWAY_SLACK_US, len_abs=LENGTH_ABS, len_rel=LENGTH_REL, len_far=LENGTH_FAR)
T0 = 1_790_000_000_000_000  # microseconds


def _tables(con, seed: int) -> None:
    rng = random.Random(seed)
    con.execute("""CREATE TABLE gateway (file_id INTEGER, row BIGINT, bootstrap_room BIGINT, model VARCHAR,
        status INTEGER, prompt_tokens BIGINT, ts TIMESTAMPTZ, duration_ms DOUBLE)""")
    con.execute("CREATE TEMP TABLE join_hits (file_id INTEGER, row BIGINT, rooms BIGINT, room BIGINT)")
    con.execute("""CREATE TEMP TABLE room_lines (node VARCHAR, room BIGINT, t_us BIGINT, res_us BIGINT,
        input_len BIGINT, entry BOOLEAN)""")
    con.execute(
        "CREATE TABLE gateway_clock (node VARCHAR, rooms BIGINT, lo_us BIGINT, hi_us BIGINT, consistent BOOLEAN)"
    )
    nodes = ["decode-0", "decode-1", "prefill-0", "decode-dark"]
    for node in nodes[:3]:
        lo = rng.randrange(-50_000, 0)
        hi = lo + rng.randrange(1, 80_000)
        con.execute("INSERT INTO gateway_clock VALUES (?, 10, ?, ?, ?)", [node, lo, hi, True])
    con.execute("INSERT INTO gateway_clock VALUES ('decode-dark', 1, 5, 1, false)")
    gw, hits, lines = [], [], []
    for i in range(1500):
        t = T0 + i * rng.choice((2_000, 40_000, 300_000))
        room = 10_000 + i
        length = rng.randrange(10, 4000) if rng.random() > 0.1 else None
        for node in rng.sample(nodes, 2):
            for k in range(rng.randrange(1, 3)):
                lines.append((node, room, t + k * rng.randrange(0, 5_000_000), rng.choice((1, 1000)), length, k == 1))
        if rng.random() < 0.7:  # its record, joined by id
            gw.append((1, i, None, "m", 200, length, t - 500_000, rng.uniform(100, 9000)))
            hits.append((1, i, 1, room))
        if rng.random() < 0.25:  # a record no id joins
            dur = None if rng.random() < 0.05 else 4e6 if rng.random() < 0.04 else rng.uniform(1, 8000)
            status = rng.choice((200, 400, 499, 503))
            prompt = rng.choice((None, 0, length or 7, (length or 7) + 20))
            gw.append((2, i, None, rng.choice(("m", "n")), status, prompt, t - rng.randrange(0, 900_000), dur))
            hits.append((2, i, 0, None))
    insert_rows(con, "gateway", gw, "c0, c1, c2, c3, c4, c5, make_timestamp(c6::BIGINT), c7")
    insert_rows(con, "join_hits", hits)
    insert_rows(con, "room_lines", lines)


@pytest.mark.parametrize("seed", range(4))
def test_buckets_give_the_rule_rows(seed: int) -> None:
    con = connect(":memory:")
    _tables(con, seed)
    sql = STEP.read_text(encoding="utf-8")
    rule = re.sub(r"\), width AS \(.*?\n\)\n(?=SELECT file_id, row, room)", lambda _: RULE_PAIRS, sql, flags=re.S)
    assert rule != sql
    con.execute(sql, bound(sql, PARAMS))
    got = con.execute("SELECT * FROM time_hits ORDER BY ALL").fetchall()
    con.execute(rule, bound(rule, PARAMS))
    want = con.execute("SELECT * FROM time_hits ORDER BY ALL").fetchall()
    # windows far wider than the buckets (90% of the windows are at most one), and rooms no clock places
    wide = con.execute("SELECT count(*) FROM gateway WHERE file_id = 2 AND duration_ms > 1e6").fetchone()[0]
    pending = con.execute("SELECT count(*) FROM gateway WHERE file_id = 2").fetchone()[0]
    placed = {row[3] for row in want}
    assert 0 < wide < 0.1 * pending and len(want) > 100 and placed == {True, False}
    assert got == want
