"""integrity_events through ingest as investigate runs it: an SGLang node's integrity lines by the bulk
reader's hand-over to SGLang's line reader (the shapes' literals route them), a vLLM node's NIXL lines by
the transfer libraries' table beside its start-up facts; the rows those of the per-line readers
(tests/engines/test_integrity_lines.py), in file and line order, and nothing rejected."""

from __future__ import annotations

import shutil
from pathlib import Path

from forensics.pipeline import ingest_bundle
from tests import support

LINES = support.DATA / "integrity_lines"


def test_integrity_lines_of_both_engines_are_stored(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(support.EXAMPLE / "bundle", bundle)
    log = bundle / "engine" / "decode-0" / "server.log"
    before = log.read_bytes().count(b"\n")
    log.write_bytes(log.read_bytes() + (LINES / "sglang_decode.log").read_bytes())
    vllm = bundle / "engine" / "vllm-0"
    vllm.mkdir()
    (vllm / "server.log").write_bytes(
        (support.DATA / "audit" / "vllm_v1_ok.log").read_bytes() + (LINES / "vllm_nixl.log").read_bytes()
    )
    vllm_before = (support.DATA / "audit" / "vllm_v1_ok.log").read_bytes().count(b"\n")
    res = ingest_bundle(bundle, tmp_path / "incident.duckdb")
    con = support.open_db(res.db)
    rows = con.execute(
        """SELECT i.node, line, kind, room, request_id, slot, position, block_ids, ts IS NULL
           FROM integrity_events i JOIN files USING (file_id) ORDER BY path, line"""
    ).fetchall()
    assert [r[:7] for r in rows if r[0] == "decode-0"] == [
        ("decode-0", before + 1, "canary_violation", None, None, 17, 42),
        ("decode-0", before + 8, "canary_violation", None, None, 1, 0),
        ("decode-0", before + 9, "canary_violation", None, None, 61390, 6092),
        ("decode-0", before + 10, "canary_violation", None, None, 17, 42),
        ("decode-0", before + 11, "checksum_mismatch", 99, "d-9", None, None),
        ("decode-0", before + 12, "checksum_mismatch", 99, "d-9", None, None),
        ("decode-0", before + 13, "mooncake_failure", None, None, None, None),
        ("decode-0", before + 14, "mooncake_failure", None, None, None, None),
    ]
    assert [(r[1] - vllm_before, r[2], r[4], r[7], r[8]) for r in rows if r[0] == "vllm-0"] == [
        (1, "nixl_failure", "test_transfer_setup_failed_req", [10, 11, 12], True),
        (2, "nixl_failure", None, None, True),
        (3, "nixl_expired", "cmpl-3da205a6-1c3c-41b5-aeaa-b8421e81fd5c-0", None, True),
        (4, "nixl_expired", "3f2a", None, True),
        (5, "nixl_expired", "3f2a", None, True),
        (6, "nixl_expired", "8f07dfc0-...-a2f0e657", None, True),
        (7, "nixl_expired", "8f07dfc0-...-a2f0e657", None, True),
    ]
    assert con.execute("SELECT count(*) FROM rejected").fetchone() == (0,)
    # the SGLang node's canary and checksum lines keep their kinds in engine_lines
    kinds = con.execute(
        "SELECT kind, count(*) FROM engine_lines WHERE node = 'decode-0' AND line > ? GROUP BY 1 ORDER BY 1",
        [before],
    ).fetchall()
    assert ("kv_canary_violation", 4) in kinds and ("kv_checksum_mismatch", 2) in kinds
