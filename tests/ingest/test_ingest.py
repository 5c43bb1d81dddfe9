"""Ingest: every format of the contract, row accounting, manifest hashes, parsed engine facts."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from datetime import UTC
from pathlib import Path

import duckdb
import pytest

from forensics.errors import InputError
from forensics.pipeline import ingest_bundle
from forensics.simulate import build_config, simulate
from tests import support
from tests.support.bundlekit import Node, engine_log, gw, write_gateway_csv, write_jsonl, write_pages, write_parquet


def _ingest(bundle: Path, tmp_path: Path):
    res = ingest_bundle(bundle, tmp_path / "out" / "incident.duckdb")
    con = support.open_db(res.db)
    return res, con


def _file(res, rel: str):
    return next(f for f in res.files if f.rel == rel)


def test_gateway_every_format_with_counts(tmp_path: Path) -> None:
    b = tmp_path / "b"
    write_jsonl(b / "gateway" / "a.jsonl", [gw("r1", 1), "not json", gw("r2", 2, status="abc"), gw("r3", 3)])
    write_jsonl(b / "gateway" / "b.jsonl.gz", [gw("r4", 4), gw("r5", 5, ts="2026-08-29T10:00:00")], gz=True)
    write_gateway_csv(b / "gateway" / "c.csv", [gw("r6", 6, headers={"x-internal-test": "1"}), gw("r7", "x")])
    write_gateway_csv(b / "gateway" / "d.csv.gz", [gw("r8", 8)], gz=True)
    write_parquet(b / "gateway" / "e.parquet", [gw("r9", 9), {**gw("r10", 10), "request_id": None}])
    res, con = _ingest(b, tmp_path)
    counts = {f.rel: (f.rows_read, f.rows_loaded, f.rows_rejected) for f in res.files}
    assert counts == {
        "gateway/a.jsonl": (4, 2, 2),
        "gateway/b.jsonl.gz": (2, 1, 1),
        "gateway/c.csv": (2, 1, 1),
        "gateway/d.csv.gz": (1, 1, 0),
        "gateway/e.parquet": (2, 1, 1),
    }
    ids = [r[0] for r in con.execute("SELECT request_id FROM gateway ORDER BY request_id").fetchall()]
    assert ids == ["r1", "r3", "r4", "r6", "r8", "r9"]
    rejected = con.execute("""SELECT f.path, r.row, r.reason FROM rejected r JOIN files f USING (file_id)
                              ORDER BY 1, 2""").fetchall()
    by = {(p, row): reason for p, row, reason in rejected}
    assert by[("gateway/a.jsonl", 2)].startswith("not a JSON object")
    assert "status" in by[("gateway/a.jsonl", 3)]
    assert "no zone" in by[("gateway/b.jsonl.gz", 2)] or "zone" in by[("gateway/b.jsonl.gz", 2)]
    assert "bootstrap_room" in by[("gateway/c.csv", 3)]  # data row 2 is line 3 (header on line 1)
    assert "request_id" in by[("gateway/e.parquet", 2)]
    hdr = con.execute("SELECT headers->>'$.\"x-internal-test\"' FROM gateway WHERE request_id = 'r6'").fetchone()[0]
    assert hdr == "1"
    ts = con.execute("SELECT ts FROM gateway WHERE request_id = 'r1'").fetchone()[0]
    assert ts.utcoffset().total_seconds() == 0 and ts.hour == 10


def test_typed_parquet_gateway_is_held_to_the_same_contract_as_text(tmp_path: Path) -> None:
    """A Parquet gateway with the contract's column types is typed by plain casts and read in place; it
    loads and rejects exactly the rows (and reasons) that the same records do as JSONL text."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    at = datetime(2026, 8, 29, 10, 0, 0, 123456, tzinfo=UTC)
    rows = [
        gw("r1", 1),
        gw("r2", 2, status=42),
        gw("r3", -5),
        {**gw("r4", 4), "request_id": ""},
        {**gw("r5", 5), "account_id": None},
        gw("r6", 6, headers='{"x-internal-test": "1"}'),
        gw("r7", 7, headers="[1, 2]"),
        gw("r8", 8, headers="null"),
        {**gw("r9", 9), "ts": None},
        gw("r10", None, status=503, prompt_tokens=None),
        gw("r11", 2**62, status=999, completion_tokens=7, duration_ms=1.5),
    ]
    for r in rows:
        r.setdefault("headers", None)
        r.setdefault("completion_tokens", 3)
        r.setdefault("duration_ms", 2.0)
        r["prompt_tokens"] = r.get("prompt_tokens", 10)
    text = tmp_path / "text"
    as_json = [
        {**r, "ts": r["ts"] and at.isoformat(), "headers": r["headers"] and json.loads(r["headers"])} for r in rows
    ]
    write_jsonl(text / "gateway" / "g.jsonl", as_json)  # headers as JSON values, not text
    typed = tmp_path / "typed"
    (typed / "gateway").mkdir(parents=True)
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    columns["ts"] = [at if r["ts"] else None for r in rows]
    schema = {
        "ts": pa.timestamp("us", tz="UTC"),
        "status": pa.int32(),
        "bootstrap_room": pa.int64(),
        "prompt_tokens": pa.int64(),
        "completion_tokens": pa.int64(),
        "duration_ms": pa.float64(),
    }
    pq.write_table(
        pa.table({k: pa.array(v, type=schema.get(k, pa.string())) for k, v in columns.items()}),
        typed / "gateway" / "g.parquet",
    )
    got = {}
    for name, bundle in (("text", text), ("typed", typed)):
        res, con = _ingest(bundle, tmp_path / name)
        got[name] = (
            # headers compared as JSON values (text keeps the file's spacing, JSONL is re-serialized)
            con.execute("SELECT * EXCLUDE (file_id, headers), json(headers) FROM gateway ORDER BY row").fetchall(),
            con.execute("SELECT row, reason FROM rejected ORDER BY row").fetchall(),
            [(f.rows_read, f.rows_loaded, f.rows_rejected) for f in res.files],
        )
        if name == "typed":  # read in place: nothing copied
            assert con.execute("SELECT count(*) FROM gateway_text").fetchone()[0] == 0
        con.close()
    assert got["typed"] == got["text"]
    loaded, rejected, counts = got["typed"]
    assert [r[0] for r in loaded] == ["r1", "r6", "r8", "r10", "r11"]
    assert [r[0] for r in rejected] == [2, 3, 4, 5, 7, 9]
    assert "status" in rejected[0][1] and ": 42" in rejected[0][1]
    assert "-5" in rejected[1][1]


def test_manifest_hashes_and_accounting(tmp_path: Path, example_bundle: Path) -> None:
    res = ingest_bundle(example_bundle, tmp_path / "incident.duckdb")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    entries = {e["path"]: e for e in manifest["inputs"]}
    assert set(entries) == {
        "gateway/gateway.jsonl",
        "engine/decode-0/server.log",
        "engine/prefill-0/server.log",
        "pages/events.jsonl",
    }
    for rel, e in entries.items():
        data = (example_bundle / rel).read_bytes()
        assert e["sha256"] == hashlib.sha256(data).hexdigest()
        assert e["bytes"] == len(data)
        assert e["rows_read"] == e["rows_loaded"] + e["rows_rejected"]
    assert entries["pages/events.jsonl"]["rows_loaded"] == 40
    assert entries["gateway/gateway.jsonl"]["rows_loaded"] == 4
    assert res.files


def test_engine_facts_parsed(tmp_path: Path, example_bundle: Path) -> None:
    res, con = _ingest(example_bundle, tmp_path)
    cfg = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT node, role, pool_tokens, page_size, context_len, max_total_num_tokens FROM node_config"
        ).fetchall()
    }
    assert cfg == {"decode-0": ("decode", 8192, 16, 8192, 8192), "prefill-0": ("prefill", 4096, 16, 8192, 4096)}
    over = con.execute("SELECT rid, input_len, max_input_len FROM engine_requests WHERE kind = 'overlength'").fetchall()
    assert over == [("p0b", 5000, 4090)]
    links = con.execute("""SELECT node, rid, room, input_len, detail FROM engine_requests
                           WHERE kind = 'time_stats' ORDER BY node, rid""").fetchall()
    assert ("prefill-0", "p0b", 2002, 1, "prefill") in links
    assert ("decode-0", "d0b", 2002, 5000, "decode") in links
    failed = con.execute(
        "SELECT rid, room, detail FROM engine_requests WHERE kind = 'decode_transfer_failed'"
    ).fetchall()
    assert failed == [("d0c", 3003, "Aborted by AbortReq.")]
    ts = con.execute("SELECT ts FROM engine_lines WHERE node = 'decode-0' AND line = 4").fetchone()[0]
    assert (ts.hour, ts.minute, ts.second, ts.microsecond) == (10, 40, 0, 201000)


def test_engine_prefix_variants_and_timezone(tmp_path: Path) -> None:
    b = tmp_path / "b"
    write_jsonl(b / "gateway" / "g.jsonl", [gw("r1", 7)])
    (b / "bundle.toml").write_text('[engine]\nlog_timezone = "Europe/Berlin"\n')
    engine_log(
        b,
        "decode-0",
        "decode",
        9000,
        lines=[
            "[2026-08-29 12:00:01 DP1 TP3] Req Time Stats(rid=abc, bootstrap_room=7, input len=40, output len=6, "
            "type=decode): forward_duration=0.1",
            "[2026-08-29 12:00:02] Req Time Stats(rid=abd, input len=4, output len=1, type=decode): x",
            "[2026-08-29 12:00:03.5 TP0] Req Time Stats(rid=bad, bootstrap_room=notanumber, input len=x)",
            "plain continuation line without a prefix",
        ],
    )
    (b / "engine" / "decode-0" / "requests.jsonl").write_text(
        json.dumps(
            {
                "timestamp": "2026-08-29T12:00:01.500000",
                "event": "request.finished",
                "rid": "abc",
                "obj": {"bootstrap_room": 7},
                "out": {
                    "meta_info": {
                        "prompt_tokens": 40,
                        "completion_tokens": 6,
                        "finish_reason": {"type": "length", "length": 0},
                    }
                },
            }
        )
        + "\n{broken\n"
    )
    res, con = _ingest(b, tmp_path)
    rows = con.execute(
        """SELECT rid, room, ts FROM engine_requests WHERE kind = 'time_stats' ORDER BY rid"""
    ).fetchall()
    assert [(r[0], r[1]) for r in rows] == [("abc", 7), ("abd", None)]
    assert rows[0][2].hour == 10  # 12:00 in Berlin (CEST) is 10:00 UTC
    log = _file(res, "engine/decode-0/server.log")
    assert (log.rows_read, log.rows_loaded, log.rows_rejected) == (7, 6, 1)
    rank = con.execute("SELECT rank, ts_resolution_ms FROM engine_lines WHERE line = 4").fetchone()
    assert rank == ("DP1 TP3", 1000)
    req = _file(res, "engine/decode-0/requests.jsonl")
    assert (req.rows_read, req.rows_loaded, req.rows_rejected) == (2, 1, 1)
    fin = con.execute("SELECT input_len, output_len, ts FROM engine_requests WHERE kind = 'finished'").fetchone()
    assert fin[:2] == (40, 6) and fin[2].hour == 10


def test_page_events_formats_and_rejections(tmp_path: Path) -> None:
    b = tmp_path / "b"
    write_jsonl(b / "gateway" / "g.jsonl", [gw("r1", 1)])
    engine_log(b, "decode-0", "decode", 1024)
    d = Node("decode-0").ev("alloc", 1, 16, 64).ev("read", 1, 16, 40).ev("free", 1, 16, 64)
    write_pages(b, d, fmt="parquet")
    p = Node("prefill-0", seq=10)
    p.ev("alloc", 1, 16, 32).ev("write", 1, 16, 20, src="prefill").ev("transfer", 1, 16, 20, peer="decode-0")
    bad = list(p.rows) + [
        {
            "node": "prefill-0",
            "seq": 20,
            "ts": "2026-08-29T10:00:00Z",
            "op": "alloc",
            "room": 1,
            "start": 50,
            "end": 40,
        },
        {
            "node": "prefill-0",
            "seq": 21,
            "ts": "2026-08-29T10:00:00Z",
            "op": "teleport",
            "room": 1,
            "start": 0,
            "end": 1,
        },
        {"node": "prefill-0", "seq": 1.5, "ts": "2026-08-29T10:00:00Z", "op": "read", "room": 1, "start": 0, "end": 1},
        {"node": "prefill-0", "seq": 22, "ts": "yesterday", "op": "read", "room": 1, "start": 0, "end": 1},
        {"node": "prefill-0", "seq": 23, "ts": "2026-08-29T10:00:00Z", "op": "read", "start": 0, "end": 1},
        {
            "node": "prefill-0",
            "seq": 24,
            "ts": "2026-08-29T10:00:00Z",
            "op": "transfer",
            "room": 1,
            "start": 0,
            "end": 1,
        },
        p.rows[0],  # a duplicate of (prefill-0, 10)
        {
            "node": "decode-0",
            "seq": 99,
            "ts": "2026-08-29T10:00:00Z",
            "op": "alloc",
            "room": 2,
            "start": 4096,
            "end": 4112,
        },
        "[1, 2]",
    ]
    write_jsonl(b / "pages" / "prefill.jsonl.gz", bad, gz=True)
    res, con = _ingest(b, tmp_path)
    pq_file = _file(res, "pages/decode-0.parquet")
    assert (pq_file.rows_read, pq_file.rows_loaded, pq_file.rows_rejected) == (3, 3, 0)
    js = _file(res, "pages/prefill.jsonl.gz")
    assert (js.rows_read, js.rows_loaded, js.rows_rejected) == (12, 3, 9)
    reasons = dict(
        con.execute("SELECT row, reason FROM rejected WHERE file_id = ? ORDER BY row", [js.file_id]).fetchall()
    )
    assert "inverted" in reasons[4]
    assert "unknown op teleport" in reasons[5]
    assert "seq" in reasons[6]
    assert "ts" in reasons[7]
    assert "room" in reasons[8]
    assert "peer" in reasons[9]
    assert "duplicate" in reasons[10]
    assert "beyond the pool" in reasons[11]  # decode-0's pool holds 1024 tokens
    assert "not a JSON object" in reasons[12]
    n = con.execute("SELECT count(*) FROM page_events").fetchone()[0]
    assert n == 6
    # a text file's copied rows are its valid ones: rows rejected while validating are never copied
    # (duplicates and slots beyond the pool are found later, over all files: the view leaves them out)
    copied = con.execute("SELECT row FROM page_events_text WHERE file_id = ? ORDER BY row", [js.file_id]).fetchall()
    assert [r[0] for r in copied] == [1, 2, 3, 10, 11]
    assert (
        con.execute("SELECT count(*) FROM page_events WHERE row >= 4 AND file_id = ?", [js.file_id]).fetchone()[0] == 0
    )


def test_truncated_gzip_keeps_rows_before_the_cut(tmp_path: Path) -> None:
    b = tmp_path / "b"
    rows = [gw(f"r{i:03d}", i) for i in range(300)]
    full = write_jsonl(tmp_path / "full.jsonl.gz", rows, gz=True)
    data = full.read_bytes()
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / "cut.jsonl.gz").write_bytes(data[: len(data) // 2])
    res, con = _ingest(b, tmp_path)
    f = _file(res, "gateway/cut.jsonl.gz")
    assert 0 < f.rows_loaded < 300
    assert f.rows_read == f.rows_loaded + f.rows_rejected
    got = [r[0] for r in con.execute("SELECT request_id FROM gateway ORDER BY 1").fetchall()]
    assert got == [f"r{i:03d}" for i in range(len(got))]  # a prefix of the file, in order
    assert any("cut short" in n or "damaged" in n for n in f.notes)


def test_unreadable_files_are_named_and_the_run_goes_on(tmp_path: Path) -> None:
    b = tmp_path / "b"
    write_jsonl(b / "gateway" / "g.jsonl", [gw("r1", 1)])
    (b / "gateway" / "junk.parquet").write_bytes(b"PAR1 this is not parquet")
    (b / "pages").mkdir()
    (b / "pages" / "x.jsonl.gz").write_bytes(b"not gzip at all\n")
    write_parquet(b / "pages" / "wrong.parquet", [{"a": 1, "b": "x"}])
    res, _ = _ingest(b, tmp_path)
    errs = {f.rel: f.error for f in res.files if f.error}
    assert set(errs) == {"gateway/junk.parquet", "pages/x.jsonl.gz", "pages/wrong.parquet"}
    assert "missing column" in errs["pages/wrong.parquet"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert {e["path"] for e in manifest["inputs"] if "error" in e} == set(errs)


def test_bundle_without_gateway_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "b" / "pages").mkdir(parents=True)
    with pytest.raises(InputError, match="no gateway log"):
        ingest_bundle(tmp_path / "b", tmp_path / "i.duckdb")
    with pytest.raises(InputError, match="no such bundle"):
        ingest_bundle(tmp_path / "missing", tmp_path / "i.duckdb")


def test_bundle_toml_unknown_key_named(tmp_path: Path, example_bundle: Path) -> None:
    b = tmp_path / "b"
    shutil.copytree(example_bundle, b)
    (b / "bundle.toml").write_text('[incident]\nid = "X"\nseverity = "high"\n')
    with pytest.raises(InputError, match="severity"):
        ingest_bundle(b, tmp_path / "i.duckdb")


def test_gzip_writer_is_real_gzip(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "x.jsonl.gz", [gw("r", 1)], gz=True)
    assert gzip.decompress(p.read_bytes()).startswith(b"{")


def test_self_contained_database_opens_without_the_bundle(tmp_path: Path) -> None:
    """By default incident.duckdb reads the bundle's Parquet files in place; --self-contained copies
    the page events and gateway rows in, and the database then answers the same without the bundle."""
    from forensics.pipeline import investigate

    simulate(tmp_path / "sim", build_config("default", seed=2, requests=400))  # Parquet pages and gateway
    sample = tmp_path / "sim" / "bundle"
    q = """SELECT (SELECT count(*) FROM page_events), (SELECT count(*) FROM gateway),
                  (SELECT count(*) FROM timeline), (SELECT count(*) FROM exposures)"""
    got = {}
    for mode in ("in_place", "copied"):
        bundle = tmp_path / mode / "bundle"
        shutil.copytree(sample, bundle)
        result = investigate(bundle, tmp_path / mode / "out", self_contained=mode == "copied")
        assert ("where they lie" in result.summary()) == (mode == "in_place")
        db = str(tmp_path / mode / "out" / "incident.duckdb")
        with support.open_db(db) as con:
            before = con.execute(q).fetchone()
        shutil.rmtree(bundle)
        with support.open_db(db) as con:
            if mode == "in_place":
                with pytest.raises(duckdb.Error):
                    con.execute(q).fetchone()
                assert con.execute("SELECT count(*) FROM exposures").fetchone()[0] == before[3]  # a table
            else:
                assert con.execute(q).fetchone() == before
        got[mode] = before
    assert got["copied"] == got["in_place"] and min(got["copied"]) > 0


def test_slots_beyond_the_pool_are_judged_by_the_node_they_land_in(tmp_path: Path) -> None:
    """An own event is held to its node's pool, a transfer to its receiver's (not its sender's)."""
    b = tmp_path / "b"
    write_jsonl(b / "gateway" / "g.jsonl", [gw("r1", 1)])
    engine_log(b, "decode-0", "decode", 1024)  # 1,040 slots (a page past the pool)
    engine_log(b, "prefill-0", "prefill", 256)  # 272 slots
    d = Node("decode-0").ev("alloc", 1, 500, 516).ev("read", 1, 500, 516).ev("alloc", 2, 1100, 1116)
    p = Node("prefill-0", seq=10)
    p.ev("alloc", 1, 16, 32).ev("transfer", 1, 500, 516, peer="decode-0")  # beyond the sender's pool only
    p.ev("transfer", 3, 2000, 2016, peer="decode-0").ev("alloc", 4, 300, 316)
    write_pages(b, d, p, fmt="parquet")
    res, con = _ingest(b, tmp_path)
    rejected = con.execute(
        "SELECT f.path, r.row, r.reason FROM rejected r JOIN files f USING (file_id) ORDER BY 1, 2"
    ).fetchall()
    assert [(path, row) for path, row, _ in rejected] == [
        ("pages/decode-0.parquet", 3),
        ("pages/prefill-0.parquet", 3),
        ("pages/prefill-0.parquet", 4),
    ]
    assert "pool of node decode-0 (1040 slots" in rejected[0][2]
    receiver = "the pool of node decode-0 (1040 slots by its startup log), the receiver of this transfer"
    assert rejected[1][2].endswith(receiver)
    assert "pool of node prefill-0 (272 slots" in rejected[2][2]
    kept = con.execute("SELECT node, seq FROM page_events ORDER BY node, seq").fetchall()
    assert kept == [("decode-0", 1), ("decode-0", 2), ("prefill-0", 10), ("prefill-0", 11)]
