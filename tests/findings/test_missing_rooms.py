"""missing_rooms, found one node at a time (findings/queries/node_missing.sql), against its one-query
definition: served requests routed to a node with page telemetry that logged nothing of its own for
their room, on a bundle where one request's events were removed from its decode node."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

DEFINITION = """
WITH served AS (
    SELECT g.*, n.node FROM gateway g
    CROSS JOIN LATERAL (SELECT unnest([g.decode_node, g.prefill_node]) AS node) n
    WHERE g.bootstrap_room IS NOT NULL AND (g.status BETWEEN 200 AND 299 OR coalesce(g.completion_tokens, 0) > 0)
), seen AS (
    SELECT DISTINCT node, room FROM page_events WHERE op <> 'transfer'
)
SELECT s.request_id, s.account_id, coalesce(c.cohort, 'customer') AS cohort, s.node, s.bootstrap_room AS room,
       s.status AS http_status, s.completion_tokens, s.ts
FROM served s
JOIN telemetry_nodes t ON t.node = s.node
LEFT JOIN seen ON seen.node = s.node AND seen.room = s.bootstrap_room
LEFT JOIN request_cohort c ON c.file_id = s.file_id AND c.row = s.row
CROSS JOIN replay_window w
WHERE seen.room IS NULL AND s.ts >= coalesce(w.since, '-infinity'::TIMESTAMPTZ)
  AND s.ts < coalesce(w."until", 'infinity'::TIMESTAMPTZ)
ORDER BY ALL
"""


def test_missing_rooms_per_node_match_the_definition(tmp_path: Path) -> None:
    simulate(tmp_path / "sim", build_config("default", seed=9, requests=500))  # decode-0's pages are Parquet
    bundle = tmp_path / "sim" / "bundle"
    pages = bundle / "pages" / "decode-0.parquet"
    events = pq.read_table(pages)
    # a served request on decode-0 whose own events there are then removed (the room's transfer stays)
    rooms = duckdb.sql(
        "SELECT room FROM events WHERE op = 'alloc' GROUP BY room ORDER BY min(seq) LIMIT 1 OFFSET 5"
    ).fetchall()
    room = rooms[0][0]
    kept = duckdb.sql(f"SELECT * FROM events WHERE room <> {room} ORDER BY seq").to_arrow_table()
    assert kept.num_rows < events.num_rows
    pq.write_table(kept, pages)

    f = Findings(bundle)
    got = f.rows("SELECT * FROM missing_rooms ORDER BY ALL")
    assert got == f.rows(DEFINITION)
    assert [(r[3], r[4]) for r in got] == [("decode-0", room)]  # that request, on that node only
    reason = f.con.execute(
        "SELECT reason FROM affected_responses WHERE request_id = ? AND status = 'indeterminate'", [got[0][0]]
    ).fetchall()
    assert reason and "decode-0: no page events for this request on a node with telemetry" in reason[0][0]
