"""pull_sightings (issue #50): which sender slots a vLLM pull read, by the block ids the decode's request line
names (kv_transfer_params' remote_block_ids) where it names them, by token order only where it does not.

A hand-made prefill p0 (block size 4): room 1 is given blocks 0 and 1 (slots 0-7) and writes them; room 2 is
given block 2 (slots 8-11) and writes it. The transfer of room 1 to d0 names d0's slots 100-107. The
decode's line for room 1's request names blocks [0, 2]: a reused reference, block 2 never room 1's. What
d0 got in its slots 104-107 is room 2's KV (the last write of slots 8-11 before the transfer); token order
alone (no line) sees room 1's own slots and finds nothing."""

from __future__ import annotations

import duckdb

from forensics.db import connect, run_query


def _bundle(
    blocks: str | None,
    stale: bool = False,
    read: bool = True,
    clock: list[tuple] | None = None,
    sent: tuple[int, int] = (100, 108),
    engine: str = "vllm",
) -> duckdb.DuckDBPyConnection:
    con = connect(":memory:")
    con.execute("""CREATE TABLE page_events (node VARCHAR, seq BIGINT, ts TIMESTAMPTZ, room BIGINT, op VARCHAR,
        start BIGINT, "end" BIGINT, peer VARCHAR)""")
    events = [
        ("p0", 1, 1, "alloc", 0, 8, None),
        ("p0", 2, 1, "write", 0, 8, None),
        ("p0", 3, 2, "alloc", 8, 12, None),
        ("p0", 4, 2, "write", 8, 12, None),
        ("p0", 20, 1, "transfer", *sent, "d0"),
        ("d0", 1, 1, "alloc", 100, 108, None),
    ]
    if read:
        events.append(("d0", 2, 1, "read", 100, 108, None))
    if stale:  # room 1 lets block 1 go before its transfer; room 2 is given it and writes it
        events += [("p0", 10, 1, "free", 4, 8, None), ("p0", 11, 2, "alloc", 4, 8, None)]
        events += [("p0", 12, 2, "write", 4, 8, None)]
    con.executemany(
        "INSERT INTO page_events VALUES (?, ?, TIMESTAMPTZ '2026-09-01 10:00:00+00' + to_seconds(?), ?, ?, ?, ?, ?)",
        [(n, s, s, r, op, a, b, peer) for n, s, r, op, a, b, peer in events],
    )
    con.execute("""CREATE TABLE gateway AS SELECT * FROM (VALUES ('req-a', 1::BIGINT, 'p0', 'd0'),
        ('req-b', 2::BIGINT, 'p0', 'd1')) t(request_id, bootstrap_room, prefill_node, decode_node)""")
    con.execute("CREATE TABLE node_config AS SELECT 'p0' AS node, 4::BIGINT AS page_size, ? AS engine", [engine])
    con.execute("""CREATE TABLE engine_request_links (node VARCHAR, file_id INTEGER, line BIGINT, rid VARCHAR,
        role VARCHAR, remote_engine VARCHAR, remote_rid VARCHAR, remote_host VARCHAR, remote_port BIGINT,
        remote_block_ids VARCHAR)""")
    if blocks is not None:
        con.execute(
            "INSERT INTO engine_request_links VALUES ('d0', 1, 7, 'cmpl-req-a-0', 'decode', 'e', "
            "'cmpl-req-a-0-0a1b2c3d', 'p0', 5600, ?)",
            [blocks],
        )
    con.execute(
        "CREATE TABLE gateway_clock (node VARCHAR, rooms BIGINT, lo_us BIGINT, hi_us BIGINT, consistent BOOLEAN)"
    )
    for row in clock or []:
        con.execute("INSERT INTO gateway_clock VALUES (?, 10, ?, ?, ?)", list(row))
    run_query(con, "findings", "pull_sightings")
    return con


def _rows(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute(
        "SELECT node, seg_start, recipient_room, source_room, uncertain, basis FROM pull_sightings ORDER BY seg_start"
    ).fetchall()


def test_the_logged_block_ids_name_what_was_read() -> None:
    got = _rows(_bundle("[0, 2]"))
    assert got == [("d0", s, 1, 2, False, "remote_block_ids") for s in range(104, 108)]


def test_one_kv_cache_group_is_read_as_its_list() -> None:
    assert _rows(_bundle("[[0, 2]]")) == _rows(_bundle("[0, 2]"))


def test_the_rooms_own_blocks_named_show_nothing() -> None:
    assert _rows(_bundle("[0, 1]")) == []


def test_without_a_usable_list_token_order_is_used() -> None:
    """No line, a list cut at its logged length, several groups, or too few blocks for the tokens sent: the
    room's own slots by token order, which room 2 never wrote (and room 1 freed nothing before its transfer)."""
    for blocks in (None, "[0, 2", "[[0, 2], [5, 6]]", "[0]"):
        assert _rows(_bundle(blocks)) == [], blocks


def test_a_stale_reference_by_token_order_where_no_line_names_blocks() -> None:
    got = _rows(_bundle(None, stale=True))
    assert got == [("d0", s, 1, 2, False, "token_order") for s in range(104, 108)]
    # the same blocks named by the line: the same answer, by the ids
    assert _rows(_bundle("[0, 1]", stale=True)) == [("d0", s, 1, 2, False, "remote_block_ids") for s in range(104, 108)]


def test_without_a_read_on_the_receiver_its_time_is_moved_onto_the_receivers_clock_by_the_bounds() -> None:
    """No read of d0 seen: uncertain, and first_ts the transfer's time (p0's clock: 10:00:20) at the earliest
    d0's clock may show it: p0 is 1 to 2 s ahead of the gateway, d0 0.5 s behind to 0.5 s ahead, so d0's
    clock shows the transfer no earlier than 10:00:20 - 2 s - 0.5 s. Without bounds for both nodes: as logged."""

    def first(clock: list[tuple] | None) -> set[tuple]:
        con = _bundle("[0, 2]", read=False, clock=clock)
        return set(con.execute("SELECT strftime(first_ts, '%H:%M:%S.%g'), uncertain FROM pull_sightings").fetchall())

    bounds = [("p0", 1_000_000, 2_000_000, True), ("d0", -500_000, 500_000, True)]
    assert first(bounds) == {("10:00:17.500", True)}
    assert first(bounds[:1]) == {("10:00:20.000", True)}
    assert first([("p0", 1_000_000, 2_000_000, True), ("d0", 500_000, -500_000, False)]) == {("10:00:20.000", True)}


def test_a_pull_past_the_decodes_own_hits_reads_the_last_blocks_named() -> None:
    """d0 hit room 1's first block in its own prefix cache and pulls only the second (4 tokens, into its slots
    104-107): NixlConnector reads the last of the ids named, block 2 of [0, 2], room 2's."""
    got = _rows(_bundle("[0, 2]", sent=(104, 108)))
    assert got == [("d0", s, 1, 2, False, "remote_block_ids") for s in range(104, 108)]
    assert _rows(_bundle("[0, 1]", sent=(104, 108))) == []  # its own block 1


def test_a_stale_pull_past_the_decodes_own_hits_by_token_order_reads_the_last_blocks() -> None:
    """No line names the blocks (a gateway that logs no room): d0 hit room 1's first block itself and pulls
    the second only (4 tokens), whose slots room 1 let go and room 2 wrote before the transfer. A vLLM
    sender's pull is the prompt's last blocks: block 1 (room 2's KV) lands in 104-107. Token order from the
    first token would read block 0, room 1's own, and find nothing (the miss of seed 931 at block size 64).
    An SGLang sender sends from the first token: nothing there."""
    got = _rows(_bundle(None, stale=True, sent=(104, 108)))
    assert got == [("d0", s, 1, 2, False, "token_order") for s in range(104, 108)]
    assert _rows(_bundle(None, stale=True, sent=(104, 108), engine="sglang")) == []
