"""Every integrity line of tests/data/integrity_lines (README there: the source of each) read into its
integrity_events row, with the fields the line names: node, time, kind, room or request, slot, position,
blocks, file and line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from forensics.engines import integrity
from forensics.engines.facts import EngineRows
from forensics.engines.sglang.reader import READER

DATA = Path(__file__).parents[1] / "data" / "integrity_lines"
UTC_ZONE = ZoneInfo("UTC")


def _read(name: str, sglang: bool) -> EngineRows:
    rows = EngineRows()
    for lineno, raw in enumerate((DATA / name).read_bytes().splitlines(keepends=True), start=1):
        if sglang:
            assert READER.text(raw, "decode-0", 7, lineno, UTC_ZONE, rows)
        else:
            assert integrity.read_text_line(raw, "vllm-d", 8, lineno, rows)
    assert rows.rejected == []
    return rows


FIELDS = ("line", "kind", "ts", "room", "request_id", "slot", "position", "stored_token", "expected_token")


def test_sglang_lines_each_into_its_row() -> None:
    rows = _read("sglang_decode.log", sglang=True)
    got = [tuple(r[k] for k in FIELDS) for r in rows.integrity]
    t = datetime(2026, 9, 9, 10, 15, 2, tzinfo=UTC)
    assert got == [
        (1, "canary_violation", t, None, None, 17, 42, 111, 0),
        (8, "canary_violation", None, None, None, 1, 0, 0, -1),
        (9, "canary_violation", None, None, None, 61390, 6092, 2005, -1),
        (10, "canary_violation", t.replace(second=3), None, None, 17, 42, 999, 888),
        (11, "checksum_mismatch", t.replace(second=4), 99, "d-9", None, None, None, None),
        (12, "checksum_mismatch", t.replace(second=4), 99, "d-9", None, None, None, None),
        (13, "mooncake_failure", None, None, None, None, None, None, None),
        (14, "mooncake_failure", None, None, None, None, None, None, None),
    ]
    assert all(r["node"] == "decode-0" and r["file_id"] == 7 for r in rows.integrity)
    reasons = [r["reason"] for r in rows.integrity]
    assert reasons[0] == "verify_chain_hash+verify_position+verify_real_kv_hash (launch_tag=HEAD_K_FULL)"
    assert [integrity.is_read_violation(r) for r in reasons[:4]] == [True, False, True, False]  # 8: a sweep
    assert reasons[4:6] == ["expected=0x1a2b got=0x3c4d", "on a peer rank"]
    assert reasons[6] == "transport retry counter exceeded"
    assert rows.integrity[6]["address"] == (
        "source_addr=0x7f20fe0f1680 dest_addr=0x7f3d820f3a80 peer_nic=10.93.81.13:15729@mlx5_0 local_nic=mlx5_7"
    )
    assert "peer_nic=172.16.37.132:14127@mlx5_4" in rows.integrity[7]["address"]
    # the line's text is kept (after SGLang's prefix): the report and the watcher cite it
    assert rows.integrity[0]["message"].startswith("kv_canary violation: launch_tag=HEAD_K_FULL ")
    # the canary's continuation lines are plain lines; the canary and checksum lines keep their kinds
    kinds = {r["line"]: r["kind"] for r in rows.lines}
    assert [kinds[i] for i in (1, 2, 7, 8, 11, 13)] == [
        "kv_canary_violation",
        None,
        None,
        "kv_canary_violation",
        "kv_checksum_mismatch",
        "mooncake_failure",
    ]


def test_vllm_lines_each_into_its_row() -> None:
    rows = _read("vllm_nixl.log", sglang=False)
    cols = ("line", "kind", "ts", "request_id", "remote_request_id", "block_ids", "num_blocks", "address")
    got = [tuple(r[k] for k in cols) for r in rows.integrity]
    assert got == [
        (
            1,
            "nixl_failure",
            None,
            "test_transfer_setup_failed_req",
            "prefill-test_transfer_setup_failed_req",
            [10, 11, 12],
            3,
            "localhost:1234",
        ),
        (2, "nixl_failure", None, None, None, None, None, None),
        (3, "nixl_expired", None, "cmpl-3da205a6-1c3c-41b5-aeaa-b8421e81fd5c-0", None, None, None, None),
        (4, "nixl_expired", None, "3f2a", None, None, None, None),
        (5, "nixl_expired", None, "3f2a", None, None, None, None),
        (6, "nixl_expired", None, "8f07dfc0-...-a2f0e657", None, None, None, None),
        (7, "nixl_expired", None, "8f07dfc0-...-a2f0e657", None, None, None, None),
    ]
    assert [r["reason"] for r in rows.integrity] == [
        "transfer_setup_failed. Marking blocks as invalid",
        "handshake_setup_failed",
        "released; read by 0 worker(s) within 120 s",
        "released; read by 0 worker(s) before the lease expired",
        "read by a decode worker after release",
        "released; read by 0 worker(s) before the lease expired",
        "read by a decode worker after release",
    ]
    assert all(r["node"] == "vllm-d" and r["file_id"] == 8 for r in rows.integrity)


def test_a_context_that_is_no_literal_still_names_its_request() -> None:
    rows = EngineRows()
    line = (
        "ERROR 01-09 15:09:33 [base_worker.py:900] NIXL transfer failure: transfer_failed | Context: "
        "{'failure_type': 'transfer_failed', 'request_id': 'r-1', 'error': <NixlError object at 0x7f>}\n"
    )
    assert integrity.read_text_line(line.encode(), "n", 1, 1, rows)
    assert rows.integrity[0]["request_id"] == "r-1" and rows.integrity[0]["kind"] == "nixl_failure"


def test_the_sql_macro_reads_the_canary_reasons_as_python_does() -> None:
    from forensics.db import connect

    con = connect(":memory:")
    rows = _read("sglang_decode.log", sglang=True).integrity
    reasons = [r["reason"] for r in rows if r["kind"] == "canary_violation"]
    reasons += ["chain_hash+position (launch_tag=TAIL_K_FULL)", "verify_token (launch_tag=HEAD_V_FULL)", "none"]
    for reason in reasons:
        sql = con.execute("SELECT canary_read_violation(?)", [reason]).fetchone()[0]
        assert sql == integrity.is_read_violation(reason), reason


def test_vllm_reader_reads_the_nixl_lines_with_their_times() -> None:
    """A vLLM node's logs go through vLLM's own reader (ingest, watch): the same rows as the transfer
    libraries' table gives, each with its record's time where the record has one and the bundle its year."""
    from forensics.engines.vllm.reader import dated

    plain = _read("vllm_nixl.log", sglang=False).integrity
    rows = EngineRows()
    for lineno, raw in enumerate((DATA / "vllm_nixl.log").read_bytes().splitlines(keepends=True), start=1):
        assert dated(2026).text(raw, "vllm-d", 8, lineno, UTC_ZONE, rows)
    assert rows.rejected == []
    times = [r["ts"] for r in rows.integrity]
    assert times == [
        datetime(2026, 1, 9, 15, 9, 32, tzinfo=UTC),
        datetime(2026, 1, 9, 15, 9, 33, tzinfo=UTC),
        datetime(2026, 9, 24, 16, 35, 21, tzinfo=UTC),
        None,  # lines 4 and 5 are rendered without a record prefix: no time
        None,
        datetime(2026, 8, 16, 8, 9, 7, tzinfo=UTC),
        None,  # line 7's level is padded in its quote: no record prefix read
    ]
    assert [r | {"ts": None} for r in rows.integrity] == [r | {"message": m["message"]} for r, m in
                                                          zip(plain, rows.integrity, strict=True)]  # fmt: skip
    # engine_lines: each line's shape (INTEGRITY's name)
    assert [r["kind"] for r in rows.lines] == ["nixl_failure", "nixl_failure", "nixl_expired", "nixl_expired",
                                               "nixl_stale_read", "nixl_expired", "nixl_stale_read"]  # fmt: skip


def test_the_vllm_request_keys_name_the_gateway_id_inside_vllm_ids() -> None:
    """vllm_request_keys: the engine id (API id + `-` + 8 hex, vllm/v1/engine/input_processor.py), the API
    id (`cmpl-<base>-<i>`, `chatcmpl-<base>`) and the base (the X-Request-Id)."""
    from forensics.db import connect

    con = connect(":memory:")

    def keys(i: str | None) -> set[str]:
        return set(con.execute("SELECT vllm_request_keys(?)", [i]).fetchone()[0])

    assert keys("cmpl-req-1a-0-0f3e9a1b") == {"cmpl-req-1a-0-0f3e9a1b", "cmpl-req-1a-0", "req-1a"}
    assert keys("cmpl-req-1a-0") == {"cmpl-req-1a-0", "req-1a"}  # 0.10/0.11: the API id itself
    assert keys("chatcmpl-x") == {"chatcmpl-x", "x"}
    assert keys("3f2a") == {"3f2a"}
    assert keys(None) == set()
