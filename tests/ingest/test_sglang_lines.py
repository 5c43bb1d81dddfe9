"""Ingest of the engine log lines SGLang 0.4.9-0.5.23 really writes: each becomes evidence with its
file and line. The lines are rendered as the cited release's source renders them (the wheels of
sglang 0.4.9.post2, 0.5.4, 0.5.11 and 0.5.23, python/sglang/srt/...)."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from forensics.engines.facts import EngineRows
from forensics.engines.sglang_reprs import py_value
from forensics.ingest.engine import parse_log, parse_requests_jsonl
from forensics.intake import InputFile
from forensics.pipeline import ingest_bundle
from tests import support
from tests.support.bundlekit import engine_log, gw, write_jsonl

DATA = Path(__file__).parent.parent / "data" / "sglang_lines"
FIN_OUT = re.compile(r"'finish_reason': (?P<reason>\{.*?\}), 'prompt_tokens'")


def _parse(tmp_path: Path, lines: list[str], name: str = "server.log") -> tuple[EngineRows, InputFile]:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    f = InputFile(file_id=3, source="engine_log", path=path, rel=f"engine/n0/{name}", node="n0")
    rows = EngineRows()
    (parse_requests_jsonl if name.endswith(".jsonl") else parse_log)(f, ZoneInfo("UTC"), rows)
    return rows, f


# --- --log-requests text lines (tests/data/sglang_lines/README.md says how they were rendered) ---


def test_receive_and_finish_text_lines_read_only_the_top_level_fields(tmp_path: Path) -> None:
    src = DATA / "request_log.log"
    rows, f = _parse(tmp_path, src.read_text(encoding="utf-8").splitlines())
    assert rows.rejected == []
    got = [(r["line"], r["kind"], r["rid"], r["room"], r["input_len"], r["output_len"]) for r in rows.requests]
    # the hostile prompt of line 1 quotes rid='evil' and bootstrap_room=123: neither is the request's
    assert got == [
        (1, "received", "p-77", 4793981895866140836, None, None),
        (2, "received", "d-9", 5, 5, None),
        (3, "received", "p-78", 9, None, None),  # input_ids cut at level 2: its length is unknown
        (4, "finished", "p-77", 4793981895866140836, 1, 1),
        (5, "finished", "d-9", 5, 300, 0),
    ]
    assert {r["file_id"] for r in rows.requests} == {3}
    fin = [r for r in rows.requests if r["kind"] == "finished"]
    assert fin[0]["detail"] == '{"length": 0, "type": "length"}'
    # the detail keeps 500 characters of the sorted-key JSON
    assert fin[1]["detail"] == ('{"err_type": null, "message": "' + "x" * 1024)[:500]
    # a cut value reads as the JSON request log writes it: its two ends joined by "..."
    meta = FIN_OUT.search(src.read_text(encoding="utf-8").splitlines()[4])
    assert meta is not None
    reason = py_value(meta["reason"])
    assert reason["message"] == "x" * 1024 + "..." + "y" * 1024 and reason["status_code"] == 500
    assert [r["kind"] for r in rows.lines] == ["received", "received", "received", "finished", "finished"]
    assert rows.lines[0]["ts"] == datetime(2026, 8, 29, 10, 0, 1, tzinfo=UTC)
    assert (f.rows_read, f.rows_loaded) == (5, 5)


def test_a_text_finish_line_and_a_json_record_give_the_same_row(tmp_path: Path) -> None:
    # 0.5.11 utils/request_logger: the text line has no record prefix (a "%(message)s" formatter), rid
    # first (BaseReq's field), headers before out
    text = (
        "Finish: obj=GenerateReqInput(rid='r-1', http_worker_ipc=None, text='say \"rid=\\'x\\'\"', "
        "input_ids=None, bootstrap_host='10.0.0.5', bootstrap_port=8998, bootstrap_room=77, "
        "data_parallel_rank=None), headers={'x-smg-routing-key': 'k'}, out={'text': 'ok', 'output_ids': [1], "
        "'meta_info': {'id': 'r-1', 'finish_reason': {'type': 'stop', 'matched': 2}, 'prompt_tokens': 40, "
        "'weight_version': 'default', 'total_retractions': 0, 'completion_tokens': 6, 'cached_tokens': 0, "
        "'e2e_latency': 0.5, 'spec_verify_ct': nan}}"
    )
    record = {
        "timestamp": "2026-08-29T10:00:01.500000",
        "event": "request.finished",
        "rid": "r-1",
        "obj": {"rid": "r-1", "text": "say", "bootstrap_room": 77},
        "out": {
            "meta_info": {
                "id": "r-1",
                "finish_reason": {"type": "stop", "matched": 2},
                "prompt_tokens": 40,
                "completion_tokens": 6,
            }
        },
    }
    t_rows, _ = _parse(tmp_path, [text])
    j_rows, _ = _parse(tmp_path, [json.dumps(record)], name="requests.jsonl")
    cols = ("rid", "room", "kind", "input_len", "output_len", "detail")
    assert t_rows.rejected == [] and j_rows.rejected == []
    assert [tuple(r[c] for c in cols) for r in t_rows.requests] == [tuple(r[c] for c in cols) for r in j_rows.requests]
    assert t_rows.requests[0]["detail"] == '{"matched": 2, "type": "stop"}'
    assert t_rows.requests[0]["ts"] is None  # no prefix, no time


def test_json_received_records(tmp_path: Path) -> None:
    # 0.5.11 utils/request_logger.log_received_request + log_utils.log_json; a list cut at level 2 holds "..."
    recs = [
        {
            "timestamp": "2026-08-29T10:00:00",
            "event": "request.received",
            "rid": "a",
            "obj": {"rid": "a", "input_ids": [1, 2, 3], "bootstrap_room": 4},
        },
        {
            "timestamp": "2026-08-29T10:00:00",
            "event": "request.received",
            "rid": "b",
            "obj": {"rid": "b", "input_ids": [1, "...", 3], "bootstrap_room": None},
        },
        {
            "timestamp": "2026-08-29T10:00:00",
            "event": "request.received",
            "rid": "c",
            "obj": {"bootstrap_room": "seven"},
        },
        {"timestamp": "2026-08-29T10:00:00", "event": "request.received.openai", "obj": {}},
    ]
    rows, f = _parse(tmp_path, [json.dumps(r) for r in recs], name="requests.jsonl")
    assert [(r["rid"], r["room"], r["kind"], r["input_len"]) for r in rows.requests] == [
        ("a", 4, "received", 3),
        ("b", None, "received", None),
    ]
    assert [(line, reason.split(":")[0]) for _, line, reason in rows.rejected] == [
        (3, "request.received record unusable")
    ]
    assert (f.rows_read, f.rows_loaded) == (4, 3)


@pytest.mark.parametrize(
    "line",
    [
        "Receive: obj=GenerateReqInput(rid='a', text='unclosed)",
        "Finish: obj=GenerateReqInput(rid='a', bootstrap_room=1)",  # no out=
        "Finish: obj=GenerateReqInput(rid='a', bootstrap_room=1), out={'meta_info': {'id': 'a'}}",
        "Receive: obj=GenerateReqInput(rid='a', bootstrap_room='x')",
    ],
)
def test_request_log_lines_that_cannot_be_read_are_rejected(tmp_path: Path, line: str) -> None:
    rows, _ = _parse(tmp_path, ["[2026-08-29 10:00:01] " + line])
    assert rows.requests == [] and rows.lines == []
    assert [(file_id, lineno) for file_id, lineno, _ in rows.rejected] == [(3, 1)]


# --- Req Time Stats across versions ---


def test_time_stats_of_every_version(tmp_path: Path) -> None:
    lines = [
        # 0.4.9.post2 managers/schedule_batch.log_time_stats + metrics/collector.TimeStats.__str__ (decode)
        "[2026-08-29 10:00:01 TP0] Req Time Stats(rid=d1, bootstrap_room=11, input len=40, output len=6, "
        "type=decode): prealloc_duration=12.50ms, transfer_duration=30.00ms, queue_duration=1.25ms, "
        "forward_duration=200.00ms, start_time=1788000000.5",
        # 0.5.4 (prefill): start_time is time.perf_counter(), not a time of day
        "[2026-08-29 10:00:02 TP0] Req Time Stats(rid=p1, bootstrap_room=11, input len=1, output len=1, "
        "type=prefill): bootstrap_duration=40.00ms, queue_duration=2.00ms, forward_duration=8.00ms, "
        "start_time=81234.567",
        # 0.5.11 observability/req_time_stats.convert_to_duration (decode, then prefill)
        "[2026-08-29 10:00:03 TP0] Req Time Stats(rid=d2, bootstrap_room=12, input len=50, output len=7, "
        "type=decode): prealloc_queue_duration(15.00ms) = bootstrap(5.00ms) + alloc_wait(10.00ms); "
        "transfer_duration=20.00ms; queue_duration=3.00ms, forward_duration=100.00ms, start=81234.600",
        "[2026-08-29 10:00:04 TP0] Req Time Stats(rid=p2, bootstrap_room=12, input len=50, output len=1, "
        "type=prefill): bootstrap_queue_duration(25.00ms) = bootstrap(20.00ms) + alloc_wait(5.00ms); "
        "queue_duration=1.00ms, forward_duration=9.00ms, start=81234.500, transfer_speed=1.50GB/s, "
        "transfer_total=3.00MB, #retries=0",
        # 0.5.23 managers/schedule_batch (ReqTimeStats(...input_len=...)) + convert_to_duration, decode
        # with the bootstrap breakdown, then prefill
        "[2026-08-29 10:00:05 TP0] ReqTimeStats(rid=d3, bootstrap_room=13, input_len=60, cached_input_len=0, "
        "output_len=8, attempts=1, type=decode): bootstrap_duration=4.00ms, alloc_wait_duration=6.00ms, "
        "transfer_duration=10.00ms, queue_duration=2.00ms, forward_duration=50.00ms, entry_time=1788000005.250",
        "[2026-08-29 10:00:06 TP0] ReqTimeStats(rid=p3, bootstrap_room=13, input_len=60, cached_input_len=16, "
        "output_len=1, attempts=1, type=prefill): bootstrap_queue_duration=7.00ms, queue_duration=1.00ms, "
        "forward_duration=5.00ms, entry_time=1788000005.000, transfer_speed=2.00 GB/s, transfer_total=4.00 MB",
    ]
    rows, _ = _parse(tmp_path, lines)
    assert rows.rejected == []
    cols = (
        "rid",
        "room",
        "input_len",
        "output_len",
        "detail",
        "prealloc_s",
        "transfer_s",
        "queue_s",
        "bootstrap_s",
        "forward_s",
    )
    got = [tuple(r[c] for c in cols) for r in rows.requests]
    assert got == [
        ("d1", 11, 40, 6, "decode", 0.0125, 0.03, 0.00125, None, 0.2),
        ("p1", 11, 1, 1, "prefill", None, None, 0.002, 0.04, 0.008),
        ("d2", 12, 50, 7, "decode", 0.015, 0.02, 0.003, None, 0.1),
        ("p2", 12, 50, 1, "prefill", None, None, 0.001, 0.025, 0.009),
        ("d3", 13, 60, 8, "decode", pytest.approx(0.01), 0.01, 0.002, None, 0.05),
        ("p3", 13, 60, 1, "prefill", None, None, 0.001, 0.007, 0.005),
    ]
    starts = [r["start_time"] for r in rows.requests]
    assert starts == [
        datetime.fromtimestamp(1788000000.5, UTC),
        None,
        None,
        None,
        datetime.fromtimestamp(1788000005.25, UTC),
        datetime.fromtimestamp(1788000005.0, UTC),
    ]


# --- transfer failures, timeouts, corruption (disaggregation/*) ---


def test_failure_lines_as_sglang_renders_them(tmp_path: Path) -> None:
    lines = [
        # 0.4.9.post2 disaggregation/prefill.py + mooncake/conn.py KVTransferError and the Bootstrapping timeout
        "[2026-08-29 10:00:01 TP0] Prefill bootstrap failed for request rank=0 req.rid='p-1' "
        "req.bootstrap_room=4793981895866140836 with exception KVTransferError(bootstrap_room=4793981895866140836): "
        "Request 4793981895866140836 timed out after 300.0s in KVPoll.Bootstrapping",
        # 0.5.11 disaggregation/prefill.py (transfer) without an exception
        "[2026-08-29 10:00:02 TP1] Prefill transfer failed for request rank=1 req.rid='p-2' req.bootstrap_room=22",
        # 0.5.4 disaggregation/decode.py (handshake) + mooncake/conn.py WaitingForInput timeout
        "[2026-08-29 10:00:03 DP0 TP0] Decode handshake failed for request rank=0 decode_req.req.rid='d-3' "
        "decode_req.req.bootstrap_room=33 with exception KVTransferError(bootstrap_room=33): "
        "Request 33 timed out after 301.2s in KVPoll.WaitingForInput",
        # public issue #12688 (0.5.x)
        "[2025-11-05 16:39:09 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='78fde' "
        "decode_req.req.bootstrap_room=4793981895866140837 with exception "
        "KVTransferError(bootstrap_room=4793981895866140837): Aborted by AbortReq.",
        # 0.5.11 / 0.5.23 disaggregation/decode.py
        "[2026-08-29 10:00:05 TP0] Context corruption detected: Request d-5 (bootstrap_room=55) received metadata "
        "from bootstrap_room=66. Metadata buffer index: 7. This indicates metadata buffer index collision.",
        # 0.5.23 disaggregation/decode.py (deferred release; checksum, then its peer-rank form)
        "[2026-08-29 10:00:06 TP0] Deferred KV release for room 88 timed out after 30.0s without a full drain "
        "ack from prefill; releasing anyway.",
        "[2026-08-29 10:00:07 TP0] KV checksum mismatch req=d-9 bootstrap_room=99 expected=0x1a2b got=0x3c4d",
        "[2026-08-29 10:00:07 TP1] KV checksum mismatch on a peer rank req=d-9 bootstrap_room=99",
    ]
    rows, _ = _parse(tmp_path, lines)
    assert rows.rejected == []
    got = [(r["line"], r["kind"], r["rid"], r["room"], r["detail"], r.get("elapsed_s")) for r in rows.requests]
    assert got == [
        (
            1,
            "prefill_bootstrap_failed",
            "p-1",
            4793981895866140836,
            "Request 4793981895866140836 timed out after 300.0s in KVPoll.Bootstrapping",
            None,
        ),
        (1, "kvpoll_timeout", "p-1", 4793981895866140836, "Bootstrapping", 300.0),
        (2, "prefill_transfer_failed", "p-2", 22, "", None),
        (3, "decode_handshake_failed", "d-3", 33, "Request 33 timed out after 301.2s in KVPoll.WaitingForInput", None),
        (3, "kvpoll_timeout", "d-3", 33, "WaitingForInput", 301.2),
        (4, "decode_transfer_failed", "78fde", 4793981895866140837, "Aborted by AbortReq.", None),
        (5, "context_corruption", "d-5", 55, "received metadata from bootstrap_room=66, metadata buffer index 7", None),
        (6, "deferred_release_timeout", None, 88, None, 30.0),
        (7, "kv_checksum_mismatch", "d-9", 99, "expected=0x1a2b got=0x3c4d", None),
        (8, "kv_checksum_mismatch", "d-9", 99, "on a peer rank", None),
    ]
    kinds = [r["kind"] for r in rows.lines]
    assert kinds == ["transfer_failed"] * 4 + [
        "context_corruption",
        "deferred_release_timeout",
        "kv_checksum_mismatch",
        "kv_checksum_mismatch",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "Context corruption detected: Request d-5 (bootstrap_room=55) received metadata from somewhere",
        "KV checksum mismatch req=d-9 bootstrap_room=nine",
        "Deferred KV release for room eighty timed out",
        "Request room-33 timed out after 3.0s in KVPoll.WaitingForInput",
        "Losing connection with prefill instance (bootstrap_addr: 10.0.0.1:8998)",
    ],
)
def test_broken_forms_of_the_new_lines_are_rejected(tmp_path: Path, line: str) -> None:
    rows, _ = _parse(tmp_path, ["[2026-08-29 10:00:01 TP0] " + line])
    assert rows.requests == [] and rows.lines == []
    assert len(rows.rejected) == 1 and "could not be parsed" in rows.rejected[0][2]


# --- process lines: connection loss, (re)start ---


def test_connection_loss_and_startup_lines_get_kinds(tmp_path: Path) -> None:
    lines = [
        # mooncake/conn.py 0.4.9.post2, 0.5.4/0.5.11, then common/conn.py 0.5.23
        "[2026-08-29 10:00:01 TP0] Losing connection with prefill instance (bootstrap_addr: 10.0.0.1:8998), "
        "affected 3 requests",
        "[2026-08-29 10:00:01 TP0] Losing connection with prefill instance (bootstrap_addr: 10.0.0.1:8998), "
        "3 requests affected",
        "[2026-08-29 10:00:01 TP0] Lost connection with prefill instance (bootstrap_addr: 10.0.0.1:8998), "
        "3 requests affected",
        # model_executor/model_runner.py (0.4.9-0.5.11; Load weight begin also 0.5.23), entrypoints/http_server.py
        "[2026-08-29 10:01:00 TP0] Init torch distributed begin.",
        "[2026-08-29 10:01:05 TP0] Load weight begin. avail mem=78.50 GB",
        "[2026-08-29 10:02:00] The server is fired up and ready to roll!",
        "[2026-08-29 10:02:01 TP0] Prefill batch. #new-seq: 1, #new-token: 64, #cached-token: 0",
        "[2026-08-29 10:02:02 TP0] Capture cuda graph end. Time elapsed: 12.20 s",
    ]
    rows, _ = _parse(tmp_path, lines)
    assert rows.rejected == [] and rows.requests == []
    assert [r["kind"] for r in rows.lines] == ["prefill_connection_lost"] * 3 + [
        "startup",
        "startup",
        "server_ready",
        "prefill_batch",  # the periodic batch lines go to batch_stats (tests/ingest/test_batch_lines.py)
        None,
    ]


def test_ingest_stores_the_new_columns_and_counts_unread_lines(tmp_path: Path) -> None:
    b = tmp_path / "b"
    write_jsonl(b / "gateway" / "g.jsonl", [gw("r1", 7)])
    engine_log(
        b,
        "decode-0",
        "decode",
        9000,
        lines=[
            "[2026-08-29 10:00:01 TP0] Req Time Stats(rid=d1, bootstrap_room=11, input len=40, output len=6, "
            "type=decode): prealloc_duration=12.50ms, transfer_duration=30.00ms, queue_duration=1.25ms, "
            "forward_duration=200.00ms, start_time=1788000000.5",
            "[2026-08-29 10:00:02 TP0] Deferred KV release for room 11 timed out after 30.0s without a full "
            "drain ack from prefill; releasing anyway.",
            "[2026-08-29 10:00:03 TP0] Decode batch. #running-req: 1, #token: 64, token usage: 0.01",
            "[2026-08-29 10:00:04 TP0] Decode batch. #running-req: 1, #token: 65, token usage: 0.01",
            "[2026-08-29 10:00:05 TP0] Capture cuda graph end. Time elapsed: 12.20 s",
            "[2026-08-29 10:00:06 TP0] Capture cuda graph end. Time elapsed: 12.40 s",
        ],
    )
    shutil.copy(DATA / "request_log.log", b / "engine" / "decode-0" / "tokenizer.log")
    res = ingest_bundle(b, tmp_path / "out" / "incident.duckdb")
    con = support.open_db(res.db)
    got = con.execute(
        "SELECT kind, prealloc_s, transfer_s, queue_s, elapsed_s FROM engine_requests "
        "WHERE kind IN ('time_stats', 'deferred_release_timeout') ORDER BY line"
    ).fetchall()
    assert got == [("time_stats", 0.0125, 0.03, 0.00125, None), ("deferred_release_timeout", None, None, None, 30.0)]
    by_kind = con.execute(
        "SELECT kind, count(*) FROM engine_requests WHERE kind IN ('received', 'finished') GROUP BY kind ORDER BY kind"
    ).fetchall()
    assert by_kind == [("finished", 2), ("received", 3)]
    # lines no reader knows are kept, counted per node, not rejected
    unread = con.execute("SELECT node, count(*) FROM engine_lines WHERE kind IS NULL GROUP BY node").fetchall()
    head = con.execute(
        "SELECT count(*) FROM engine_lines WHERE node = 'decode-0' AND kind IS NULL "
        "AND message NOT LIKE 'Capture cuda graph%'"
    ).fetchone()[0]
    assert unread == [("decode-0", head + 2)]
    # the periodic batch lines are read (tests/ingest/test_batch_lines.py)
    batches = con.execute("SELECT kind, running_req, tokens_used FROM batch_stats ORDER BY line").fetchall()
    assert batches == [("decode", 1, 64), ("decode", 1, 65)]
    assert con.execute("SELECT count(*) FROM rejected").fetchone()[0] == 0
