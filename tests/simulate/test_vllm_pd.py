"""`forensics simulate --engine vllm --vllm-pd`: the same bytes run after run, vLLM's lines (its request
lines with kv_transfer_params, NIXL's failure and lease-expiry lines) read back into their rows, and the
truth's exposures coming from the three leak mechanisms (independently checked against the bundle's own
lines: a failed read is followed by no transfer of its room)."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pytest

from forensics.engines.facts import EngineRows
from forensics.engines.integrity import parse_message
from forensics.simulate import build_config
from forensics.simulate.run import simulate


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vllmpd")
    simulate(out, build_config(seed=59, requests=200, engine="vllm", vllm_pd=True))
    return out


def test_same_bytes(sim: Path, tmp_path: Path) -> None:
    simulate(tmp_path, build_config(seed=59, requests=200, engine="vllm", vllm_pd=True))
    for f in sorted(p for p in (sim / "bundle").rglob("*") if p.is_file()):
        assert (tmp_path / "bundle" / f.relative_to(sim / "bundle")).read_bytes() == f.read_bytes(), f


def test_option_needs_vllm() -> None:
    with pytest.raises(ValueError, match="--engine vllm"):
        build_config(seed=1, requests=10, vllm_pd=True)


def test_nixl_lines_read_into_rows_and_failed_reads_land_nothing(sim: Path) -> None:
    failed: list[dict[str, object]] = []
    for log in sorted((sim / "bundle" / "engine").glob("*/server.log")):
        for line in log.read_text().splitlines():
            if "NIXL transfer failure" in line or "Releasing expired KV blocks" in line:
                msg = line.split("] ", 1)[1]
                rows = EngineRows()
                assert parse_message(msg, {"node": log.parent.name}, rows) is not None, line
                (row,) = rows.integrity
                if row["kind"] == "nixl_failure":
                    assert row["request_id"] and row["remote_request_id"] and row["num_blocks"]
                    failed.append(row)
    assert failed
    rows = duckdb.sql(f"SELECT room, op FROM read_parquet('{sim}/bundle/pages/*.parquet')").fetchall()
    with (sim / "truth" / "responses.csv").open() as fh:
        truth = {t["request_id"]: t for t in csv.DictReader(fh)}
    rooms = {f"cmpl-{k}-0": int(t["room"]) for k, t in truth.items()}
    sent = {room for room, op in rows if op == "transfer"}
    for row in failed:
        api = str(row["request_id"]).rsplit("-", 1)[0]
        assert rooms[api] not in sent  # the READ failed: the decode served what its blocks held
