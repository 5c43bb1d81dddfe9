"""A vLLM node's start-up against the gateway's times (issue #50): its clock is placed on the gateway's only
by the bounds its id-joined request lines give (ingest/queries/vllm_clock.sql), and a start-up clears a
possible source only where those bounds prove it came after the source's end; where they cannot, the
source stays possible (the answer stays indeterminate).

v0 runs vLLM (its lines print whole seconds), its clock truly 2 s ahead of the gateway's. Request VA: the
gateway received it at 10:00:00.000 and logged its end 500 ms later; v0 logged its `Received request` and
`Generated response` at 10:00:02 on its own clock. So v0's offset lies in (1.498 s, 3.001 s). A start-up
logged at 10:05:03 on v0 lies at 10:05:00.0 to 10:05:01.5 on the gateway's clock (truly 10:05:01). Source VS
ended at 10:05:00.8 on the gateway's clock (before the start-up, truly), but the bounds cannot prove it:
VS stays possible for VR (received at 10:06). Source VT ended at 10:04:58.5: gone. Read as if v0's clock
were the gateway's, the start-up (10:05:03) would have cleared VS too."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from forensics.db import run_query
from forensics.findings.possible import possible_reach
from forensics.ingest.gateway import GATEWAY_SLACK_US
from tests.findings.test_possible_sources import hand_made_node

DAY = "2026-09-01 {}+00"


def _vllm_node(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("INSERT INTO node_config (node, role, engine) VALUES ('v0', 'decode', 'vllm')")
    con.execute("ALTER TABLE gateway ADD COLUMN engine_id VARCHAR")  # the spec's log carries none
    con.execute("INSERT INTO files (file_id, source, path) VALUES (2, 'engine_log', 'engine/v0/server.log')")
    con.execute("""INSERT INTO gateway BY NAME SELECT request_id, 'acct-' || lower(request_id) AS account_id,
            'v0' AS decode_node, 1 AS file_id, 200 + row_number() OVER () AS row, 200 AS status,
            5 AS completion_tokens, ('2026-09-01 ' || ts || '+00')::TIMESTAMPTZ AS ts, duration_ms
        FROM (VALUES ('VA', '10:00:00.000', 500.0), ('VS', '10:05:00.300', 500.0), ('VT', '10:04:58.000', 500.0),
                     ('VR', '10:06:00.000', 1000.0)) t(request_id, ts, duration_ms)""")  # fmt: skip
    con.execute("INSERT INTO unread_responses VALUES ('VR', 'v0', 'unread', true)")
    lines = [  # line, kind, rid, node-clock time (whole seconds, as vLLM prints them)
        (1, "startup", None, "09:00:00"),
        (2, "received", "cmpl-VA-0", "10:00:02"),
        (3, "finished", "cmpl-VA-0", "10:00:02"),
        (4, "startup", None, "10:05:03"),
    ]
    for line, kind, rid, ts in lines:
        con.execute(
            "INSERT INTO engine_lines (node, file_id, line, ts, ts_resolution_ms, kind) "
            "VALUES ('v0', 2, ?, ?::TIMESTAMPTZ, 1000, ?)",
            [line, DAY.format(ts), kind],
        )
        if rid is not None:
            con.execute(
                "INSERT INTO engine_requests (node, rid, kind, ts, file_id, line) "
                "VALUES ('v0', ?, ?, ?::TIMESTAMPTZ, 2, ?)",
                [rid, kind, DAY.format(ts), line],
            )
    run_query(con, "ingest", "vllm_clock", gw_slack_us=GATEWAY_SLACK_US)


def test_a_start_up_clears_a_source_only_where_the_bounds_prove_the_order() -> None:
    con = hand_made_node(_vllm_node)
    lo, hi, ok = con.execute("SELECT lo_us, hi_us, consistent FROM gateway_clock WHERE node = 'v0'").fetchone()
    assert ok and lo < 2_000_000 < hi  # v0's true offset
    assert (lo, hi) == (1_500_000 - 2 * GATEWAY_SLACK_US, 3_000_000 + GATEWAY_SLACK_US)  # its two lines' bounds
    got = _sources(con)
    assert "VS" in got  # the bounds cannot place the start-up after VS's end: still possible
    assert "VT" not in got  # proven to have ended before the start-up
    assert "VA" not in got  # ended before the start-up too (10:00:00.5 against 10:04:59.999 at the earliest)


def _sources(con: duckdb.DuckDBPyConnection) -> set[str]:
    possible_reach(con)
    return {s for (s,) in con.execute("SELECT source_request_id FROM possible_sources WHERE node = 'v0'").fetchall()}


def test_read_as_the_gateways_clock_the_start_up_would_have_cleared_the_unproven_source() -> None:
    """The control: with bounds of a millisecond around 0 (v0's clock taken for the gateway's), VS is gone."""

    def same_clock(con: duckdb.DuckDBPyConnection) -> None:
        _vllm_node(con)
        con.execute("UPDATE gateway_clock SET lo_us = -1000, hi_us = 1000 WHERE node = 'v0'")

    got = _sources(hand_made_node(same_clock))
    assert "VS" not in got and "VT" not in got


def test_a_record_whose_format_carries_the_engines_id_bounds_the_clock_by_it() -> None:
    """VA's record under the gateway's own id, the id the engine knows it by in engine_id (as a proxy's
    forwarded x-request-id): the same bounds; without it, VA's lines name no record and v0 has no row."""

    def renamed(engine_id: str | None) -> Callable[[duckdb.DuckDBPyConnection], None]:
        def more(con: duckdb.DuckDBPyConnection) -> None:
            _vllm_node(con)
            con.execute("DELETE FROM gateway_clock WHERE node = 'v0'")
            con.execute("UPDATE gateway SET request_id = 'gw-1a2b', engine_id = ? WHERE request_id = 'VA'", [engine_id])
            run_query(con, "ingest", "vllm_clock", gw_slack_us=GATEWAY_SLACK_US)

        return more

    clock = "SELECT lo_us, hi_us FROM gateway_clock WHERE node = 'v0'"
    assert hand_made_node(renamed("VA")).execute(clock).fetchall() == [
        (1_500_000 - 2 * GATEWAY_SLACK_US, 3_000_000 + GATEWAY_SLACK_US)
    ]
    assert hand_made_node(renamed(None)).execute(clock).fetchall() == []
