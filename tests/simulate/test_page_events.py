"""`forensics simulate --scale --page-events uniform|realistic` on the command line: the flags reach the
generators (the same bytes as their library call with the same options), the bundles keep the contract
the benchmarks' peers and tests read (tests/whole/test_page_events_realistic.py, test_bench_peer.py),
and a flag a mode does not take is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from forensics.cli import app
from forensics.contract import GATEWAY_SCHEMA, PAGE_SCHEMA
from forensics.simulate.pages import PageEvents, generate
from forensics.simulate.pages.uniform import EVENTS_PER_REQUEST

SMALL = ["--decode-pool", "262144", "--prefill-pool", "40000", "--context-len", "65536"]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _run(*args: str) -> None:
    res = CliRunner().invoke(app, ["simulate", *args])
    assert res.exit_code == 0, res.output


def test_uniform_from_the_command_line(tmp_path: Path) -> None:
    _run(str(tmp_path / "cli"), "--scale", "--page-events", "uniform", "--events", "5000", "--decode-nodes", "2")
    _run(str(tmp_path / "cli"), "--scale", "--page-events", "uniform", "--events", "5000", "--decode-nodes", "2")
    opts = PageEvents("uniform", events=5000, seed=0, decode_nodes=2)
    lib = generate(tmp_path / "lib", opts)
    assert _files(tmp_path / "cli" / "bundle") == _files(tmp_path / "lib" / "bundle")
    summary = json.loads((tmp_path / "cli" / "truth" / "summary.json").read_text())
    assert summary["requests"] == -(-5000 // EVENTS_PER_REQUEST) == lib["requests"]
    assert summary["events"] == summary["requests"] * EVENTS_PER_REQUEST
    bundle = tmp_path / "cli" / "bundle"
    assert sorted(p.name for p in (bundle / "engine").iterdir()) == ["decode-0", "decode-1", "prefill-0", "prefill-1"]
    for f in sorted((bundle / "pages").glob("*.parquet")):
        t = pq.read_table(f)
        assert t.schema.equals(PAGE_SCHEMA)
        assert len(t) == summary["counts"][f.stem]
        assert (t["seq"].to_numpy() == np.arange(1, len(t) + 1)).all()
    gw = pq.read_table(bundle / "gateway" / "gateway.parquet")
    assert gw.schema.equals(GATEWAY_SCHEMA) and len(gw) == summary["requests"]


def test_realistic_from_the_command_line(tmp_path: Path) -> None:
    args = ["--scale", "--page-events", "realistic", "--events", "20000", "--concurrency", "20", "--seed", "4"]
    _run(str(tmp_path / "cli"), *args, *SMALL, "--no-telemetry", "", "--page-size", "16")
    opts = PageEvents(
        "realistic", events=20_000, concurrency=20, seed=4, decode_pool=262_144, prefill_pool=40_000,
        context_len=65_536, no_telemetry="", page_size=16,
    )  # fmt: skip
    generate(tmp_path / "lib", opts)
    assert _files(tmp_path / "cli" / "bundle") == _files(tmp_path / "lib" / "bundle")
    summary = json.loads((tmp_path / "cli" / "truth" / "summary.json").read_text())
    assert summary["dark_node"] is None and summary["page_size"] == 16
    pages = {p.stem for p in (tmp_path / "cli" / "bundle" / "pages").glob("*.parquet")}
    assert pages == set(summary["counts"]) and len(pages) == 7  # no decode node without page events
    log = (tmp_path / "cli" / "bundle" / "engine" / "decode-3" / "server.log").read_text()
    assert "page_size=16," in log and "context_length=65536" in log


@pytest.mark.parametrize(
    "args,says",
    [
        (["--scale", "--page-events", "uniform", "--concurrency", "30"], "--concurrency do(es) not go"),
        (["--scale", "--page-events", "uniform", "--days", "3"], "--days do(es) not go"),
        (["--scale", "--page-events", "sideways"], "uniform or realistic"),
        (["--scale", "--page-events", "uniform", "--events", "9", "--requests", "9"], "not both"),
        (["--scale", "--page-events", "uniform", "--decode-nodes", "2", "--prefill-nodes", "3"], "as many prefill"),
        (["--scale", "--page-events", "realistic", "--no-telemetry", "decode-9"], "is not a node"),
        (["--scale", "--events", "9"], "only go(es) with --scale --page-events"),
        (["--events", "9"], "only go(es) with --scale --page-events"),
    ],
)
def test_flags_a_mode_does_not_take_are_refused(tmp_path: Path, args: list[str], says: str) -> None:
    res = CliRunner().invoke(app, ["simulate", str(tmp_path / "x"), *args])
    said = " ".join((res.output + str(res.exception)).split())  # the app raises; forensics.cli.main prints it
    assert res.exit_code != 0 and says in said, said
    assert not (tmp_path / "x").exists()
