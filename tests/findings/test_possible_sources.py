"""possible_sources.sql on hand-made tables: a source is left out only when the node's own clock proves
it impossible (it entered after the response's decode ended, or a start-up of the node lies between
them, unless it was aborted and its transfer may land late); everything else on the node stays in."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from forensics.db import connect, run_query
from forensics.findings.likelihood import source_likelihood
from forensics.findings.possible import possible_reach
from forensics.findings.rules import define_rules
from forensics.ingest.gateway import GATEWAY_SLACK_US

T = "2026-09-01 {}:00+00"


def _tables(con: duckdb.DuckDBPyConnection) -> None:
    run_query(con, "ingest", "schema")
    con.execute("INSERT INTO files (file_id, source, path) VALUES (1, 'engine_log', 'engine/d0/server.log')")
    con.execute("CREATE TABLE request_cohort (file_id INTEGER, row BIGINT, cohort VARCHAR)")
    con.execute("""CREATE TABLE gateway AS SELECT *, NULL::VARCHAR AS prefill_node, 200 AS status,
        5 AS completion_tokens, TIMESTAMPTZ '2026-10-03 10:00:00Z' AS ts, 2000.0::DOUBLE AS duration_ms FROM (VALUES
        ('R', 'acct-r', 1::BIGINT, 'd0', 1, 1::BIGINT), ('A', 'acct-a', 2, 'd0', 1, 2), ('B', 'acct-b', 3, 'd0', 1, 3),
        ('C', 'acct-c', 4, 'd0', 1, 4), ('D', 'acct-d', 5, 'd0', 1, 5), ('E', 'acct-e', 6, 'd0', 1, 6),
        ('X', 'acct-x', 8, 'd1', 1, 8))
        t(request_id, account_id, bootstrap_room, decode_node, file_id, row)""")
    rows = [  # room, kind, finished at, started at, line
        (1, "time_stats", "10:05", "10:00", 10),
        (2, "time_stats", "09:00", "08:55", 11),  # gone: the start-up at 09:30 lies between
        (3, "time_stats", "09:45", "09:40", 12),
        (4, "time_stats", "10:20", "10:10", 13),  # entered after the response's decode ended
        (5, "decode_transfer_failed", "09:00", None, 14),  # aborted before the start-up: may land late
        (7, "time_stats", "09:50", "09:48", 15),  # only the engine log names it
    ]
    for room, kind, ts, started, line in rows:
        con.execute(
            "INSERT INTO engine_requests (node, rid, room, kind, ts, start_time, file_id, line) "
            "VALUES ('d0', ?, ?, ?, ?::TIMESTAMPTZ, ?::TIMESTAMPTZ, 1, ?)",
            [f"rid-{room}", room, kind, T.format(ts), T.format(started) if started else None, line],
        )
    con.execute(
        "INSERT INTO engine_lines (node, file_id, line, ts, kind) VALUES ('d0', 1, 1, ?::TIMESTAMPTZ, 'server_args')",
        [T.format("09:30")],
    )
    con.execute("CREATE TABLE telemetry_nodes (node VARCHAR)")  # d0 and d1 have no page telemetry
    con.execute("""CREATE TABLE exposures (recipient_request_id VARCHAR, source_request_id VARCHAR, node VARCHAR,
        status VARCHAR, recipient_room BIGINT, source_room BIGINT)""")  # no page evidence: none proven
    # no node with page telemetry: no indeterminate response after a seq gap, no gap sources
    con.execute("""CREATE TABLE affected_responses (request_id VARCHAR, account_id VARCHAR, cohort VARCHAR,
        decode_node VARCHAR, room BIGINT, status VARCHAR, evidence VARCHAR)""")
    for t in ("room_requests", "missing_rooms"):
        con.execute(
            f"CREATE TABLE {t} (node VARCHAR, room BIGINT, request_id VARCHAR, account_id VARCHAR, cohort VARCHAR)"
        )
    con.execute("CREATE TABLE room_flags (node VARCHAR, room BIGINT, reason VARCHAR)")
    con.execute("CREATE TABLE seq_gaps (node VARCHAR, prev_seq BIGINT, missing BIGINT, kind VARCHAR)")
    con.execute(
        "CREATE TABLE gap_sources (node VARCHAR, gap_seq BIGINT, room BIGINT, holder BOOLEAN, in_flight BOOLEAN)"
    )
    con.execute("CREATE TABLE sender_sources (node VARCHAR, recipient_room BIGINT, source_room BIGINT)")
    con.execute(
        'CREATE TABLE page_events (node VARCHAR, seq BIGINT, room BIGINT, op VARCHAR, start BIGINT, "end" BIGINT)'
    )
    # no transfer was sent without landing: no unlanded send pairs
    con.execute("""CREATE TABLE unlanded_sends (sender VARCHAR, receiver VARCHAR, room BIGINT, start BIGINT,
        "end" BIGINT, failed BOOLEAN, alloc_seq BIGINT, alloc_ts TIMESTAMPTZ, concluded_ts TIMESTAMPTZ,
        bound_ts TIMESTAMPTZ)""")
    con.execute("""CREATE TABLE unlanded_readers (node VARCHAR, room BIGINT, sender VARCHAR, send_room BIGINT,
        start BIGINT, "end" BIGINT, failed BOOLEAN)""")
    con.execute("CREATE TABLE log_outages (node VARCHAR, source VARCHAR, gap_from TIMESTAMPTZ, gap_to TIMESTAMPTZ)")
    # every room here is named by a gateway record: no room lists candidate accounts
    con.execute("""CREATE TABLE room_candidates (room BIGINT, node VARCHAR, request_id VARCHAR, account_id VARCHAR,
        basis VARCHAR, candidates BIGINT)""")
    # every node's engine lines are read by the logs-only rules (SGLang's): no unread response, no node whose
    # clock is bounded against the gateway's
    con.execute("CREATE TABLE unread_responses (request_id VARCHAR, node VARCHAR, reason VARCHAR, node_named BOOLEAN)")
    con.execute(
        "CREATE TABLE gateway_clock (node VARCHAR, rooms BIGINT, lo_us BIGINT, hi_us BIGINT, consistent BOOLEAN)"
    )
    con.execute("""CREATE TABLE signature_responses AS
        SELECT 'R' AS request_id, 'acct-r' AS account_id, 'customer' AS cohort, 'd0' AS node, 1::BIGINT AS room""")


def hand_made_node(more: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> duckdb.DuckDBPyConnection:
    """The tables above (and `more` of them), with the findings' steps up to the possible sources run
    over them."""
    con = connect(":memory:")
    _tables(con)
    if more is not None:
        more(con)
    for step in ("dark_rooms", "node_lifecycle", "late_write_rule", "late_write_responses"):
        run_query(con, "findings", step)
    source_likelihood(con)
    define_rules(con)
    run_query(con, "findings", "possible_sources", gw_slack_us=GATEWAY_SLACK_US)
    return con


def test_a_source_is_left_out_only_when_the_nodes_clock_proves_it_impossible() -> None:
    con = hand_made_node()
    got = dict(con.execute("SELECT coalesce(source_room, -1), basis FROM possible_sources").fetchall())
    assert sorted(got) == [3, 5, 6, 7]  # not 2 (start-up between), 4 (after), 8 (other node), 1 (itself)
    assert "aborted" in got[5] and "no line of its log names the room" in got[6]
    assert "no gateway record (engine rid rid-7)" in got[7]
    # no pool size in d0's log: no allocator model, so no likelihood (unknown, not 0)
    assert con.execute("SELECT likelihood FROM possible_sources WHERE likelihood IS NOT NULL").fetchall() == []
    assert con.execute("SELECT policy, basis FROM allocator_model").fetchall() == [
        (None, "no pool size or page size of d0 in its log: no allocator model")
    ]


def test_rooms_whose_decode_lines_an_outage_took_are_possible_sources_start_unknown() -> None:
    """d0's log is out from 10:30 to 10:40 and its longest room ran 10 minutes: a room a prefill node
    finished from 10:20 on that no decode log names may have decoded there unlogged. Its prefill time is
    p0's clock, not d0's: its start is unknown, so it pairs even with R, whose decode ended at 10:05."""

    def outage(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("INSERT INTO node_config (node, role) VALUES ('p0', 'prefill'), ('d0', 'decode'), ('d1', 'decode')")
        con.execute("INSERT INTO log_outages VALUES ('d0', 'engine_log', ?::TIMESTAMPTZ, ?::TIMESTAMPTZ)",
                    [T.format("10:30"), T.format("10:40")])  # fmt: skip
        for node, room, ts in [("p0", 9, "10:25"), ("p0", 12, "10:15"), ("p0", 11, "10:35"), ("d1", 11, "10:36")]:
            con.execute(
                "INSERT INTO engine_requests (node, rid, room, kind, ts, file_id, line) "
                "VALUES (?, ?, ?, 'time_stats', ?::TIMESTAMPTZ, 1, 20)",
                [node, f"rid-{node}-{room}", room, T.format(ts)],
            )

    got = dict(hand_made_node(outage).execute("SELECT source_room, basis FROM possible_sources").fetchall())
    # 9: prefilled in the outage's reach, named by no decode log; not 12 (prefilled before the reach:
    # 10:30 less the longest room, 10 minutes), not 11 (d1's log names it)
    assert sorted(got) == [3, 5, 6, 7, 9]
    assert "outage of the node's log" in got[9] and "prefilled on p0" in got[9]
    assert "09:45" not in got[9]  # no start time is claimed for it


def _unread_node(con: duckdb.DuckDBPyConnection) -> None:
    """v0 runs an engine whose lines no logs-only rule reads (unread_responses U and W): its times are the
    gateway's. Its clock lies within 1 s of the gateway's (gateway_clock), and it started up at 09:30 on it."""
    con.execute("""INSERT INTO gateway BY NAME SELECT request_id, 'acct-' || lower(request_id) AS account_id,
            100 + row_number() OVER () AS bootstrap_room, 'v0' AS decode_node, 1 AS file_id,
            100 + row_number() OVER () AS row,
            status, 5 AS completion_tokens, ('2026-09-01 ' || ts || '+00')::TIMESTAMPTZ AS ts, duration_ms
        FROM (VALUES ('U', '10:00:00', 200, 60000.0), ('W', '10:00:30', 200, NULL), ('P', '09:50:00', 200, 1000.0),
                     ('L', '10:02:00', 200, 1000.0), ('Q', '09:00:00', 200, 1000.0), ('F', '09:00:00', 499, 1000.0))
             t(request_id, ts, status, duration_ms)""")  # fmt: skip
    con.execute("INSERT INTO unread_responses VALUES ('U', 'v0', 'unread', true), ('W', 'v0', 'unread', true)")
    con.execute("INSERT INTO gateway_clock VALUES ('v0', 5, -1000000, 1000000, true)")
    con.execute(
        "INSERT INTO engine_lines (node, file_id, line, ts, kind) VALUES ('v0', 1, 1, ?::TIMESTAMPTZ, 'startup')",
        [T.format("09:30")],
    )


def test_an_unread_node_is_bounded_by_the_gateways_times_only() -> None:
    """U ended at 10:01 on the gateway's clock: L, received at 10:02, is not its source; W's end is not
    logged, so L stays W's. Q ended at 09:00:01, before the start-up (09:30, within 1 s), which lies before
    U and W arrived: gone. F failed: its transfer may land after its end, so the start-up clears nothing."""
    con = hand_made_node(_unread_node)
    possible_reach(con)
    got = con.execute("""SELECT recipient_request_id, string_agg(source_request_id, ',' ORDER BY source_request_id)
        FROM possible_sources WHERE node = 'v0' GROUP BY 1 ORDER BY 1""").fetchall()
    assert got == [("U", "F,P,W"), ("W", "F,L,P,U")]
    counts = con.execute(
        "SELECT recipient_request_id, sources, clock FROM possible_windows WHERE node = 'v0' ORDER BY 1"
    )
    assert counts.fetchall() == [("U", 3, "gateway"), ("W", 4, "gateway")]
    reachable = con.execute(
        "SELECT request_id FROM possible_pool WHERE node = 'v0' AND reachable ORDER BY 1"
    ).fetchall()
    assert reachable == [("F",), ("L",), ("P",), ("U",), ("W",)]
    basis = con.execute(
        "SELECT basis FROM possible_sources WHERE recipient_request_id = 'U' AND source_request_id = 'P'"
    )
    assert "received it at 2026-09-01T09:50:00.000Z" in basis.fetchone()[0]
    # the SGLang node's pairs are d0's as before
    assert con.execute("SELECT count(*) FROM possible_sources WHERE node = 'd0'").fetchone() == (4,)
