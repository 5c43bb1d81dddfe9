"""SGLang's periodic batch lines (`Decode batch ...`, `Prefill batch ...`) of every release into
batch_stats: the real lines of tests/data/sglang_lines/batch_lines.log (its README says where each comes
from), malformed ones rejected with file and line, and the simulator's lines of each release read back
as the state it printed them from."""

from __future__ import annotations

import re
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from forensics.engines.facts import EngineRows
from forensics.ingest.engine import parse_log
from forensics.intake import InputFile
from forensics.pipeline import ingest_bundle
from forensics.simulate import build_config, simulate
from forensics.simulate.batch_lines import decode_line, prefill_line
from forensics.simulate.config import BATCH_RELEASES
from tests import support

DATA = Path(__file__).parent.parent / "data" / "sglang_lines"


def _parse(tmp_path: Path, lines: list[str]) -> EngineRows:
    path = tmp_path / "server.log"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    f = InputFile(file_id=4, source="engine_log", path=path, rel="engine/n0/server.log", node="n0")
    rows = EngineRows()
    parse_log(f, ZoneInfo("UTC"), rows)
    return rows


COLS = ("kind", "forward_ct", "running_req", "tokens_used", "token_usage", "prealloc_usage", "prealloc_req",
        "transfer_req", "retracted_req", "queue_req", "new_seq", "new_token", "cached_token", "pending_token",
        "bootstrap_req", "inflight_req", "throughput", "graph")  # fmt: skip
N = None


def test_real_lines_of_every_release_fill_their_fields_and_leave_the_rest_null(tmp_path: Path) -> None:
    rows = _parse(tmp_path, (DATA / "batch_lines.log").read_text(encoding="utf-8").splitlines())
    assert rows.rejected == []
    got = [tuple(r[c] for c in COLS) for r in rows.batches]
    d, p = "decode", "prefill"
    assert got == [
        (d, N, 5, 20800, 0.29, N, N, N, N, 0, N, N, N, N, N, N, 144.95, True),
        (d, N, 46, 34901, 0.19, N, N, N, N, 0, N, N, N, N, N, N, 1447.08, False),
        (p, N, 31, N, 0.08, N, N, N, N, 0, 1, 158, 0, N, N, N, 559.53, True),
        (d, N, 6, 1920, 0.94, N, N, N, N, 5, N, N, N, N, N, N, 446.45, True),
        (d, N, 3, 2624, 0.02, 0.01, N, N, 0, 0, N, N, N, N, N, N, 36.75, True),  # 0.4.9
        (p, N, N, 4352, 0.05, N, N, N, N, 2, 1, 1202, 64, N, 0, 1, 1589.08, N),
        (d, 1200, 3, 2624, 0.02, 0.0, 0, 1, 0, 0, N, N, N, N, N, N, 36.75, True),  # 0.5.4
        (p, 57, 0, N, 0.12, N, N, N, N, 1, 2, 3000, 128, N, 3, 2, 2048.0, N),
        (d, N, 12, 40960, 0.31, 0.04, 2, 4, 1, 0, N, N, N, N, N, N, 612.4, True),  # 0.5.11
        (p, N, 0, N, 0.31, N, N, N, N, 81, 1, 896, 0, 70187, 5, 2, 863.65, False),
        (d, N, 7, 9216, 0.07, 0.03, 0, 2, 0, 0, N, N, N, N, N, N, 410.22, True),  # 0.5.23
        (p, 88, 0, N, 0.09, N, N, N, N, 0, 1, 512, 256, 0, 1, 3, 1200.5, False),
        (d, 40, 2, 5000, 0.05, N, N, N, N, 0, N, N, N, N, N, N, 80.0, True),  # hybrid pools: the full one
        (d, N, 2, 5000, 0.05, N, N, N, N, 0, N, N, N, N, N, N, 80.0, True),
    ]
    assert [r["line"] for r in rows.batches] == list(range(1, 15))
    assert {r["kind"] for r in rows.lines} == {"decode_batch", "prefill_batch"}


@pytest.mark.parametrize(
    "msg",
    [
        "Decode batch, #running-req: x3, #token: 10, token usage: 0.01, cuda graph: True, #queue-req: 0",
        "Decode batch, #token: 10, token usage: 0.01, cuda graph: True, #queue-req: 0",  # no #running-req
        "Decode batch, #running-req: 1, #running-req: 2, #token: 10, token usage: 0.01",
        "Prefill batch, #new-seq: 1, #new-token: 5, token usage: 0.01, #queue-req: 0",  # no #cached-token
        "Decode batch, #running-req: 1, #token: 10, token usage: 0.01, cuda graph: maybe",
        "Decode batch, #running-req: 1, #token: 99999999999999999999999, token usage: 0.01",
        "Decode batch [7], running-req 1",
    ],
)
def test_a_malformed_batch_line_is_rejected_with_its_file_and_line(tmp_path: Path, msg: str) -> None:
    rows = _parse(tmp_path, ["[2026-01-01 00:00:00 TP0] Loading...", f"[2026-01-01 00:00:01 TP0] {msg}"])
    assert rows.batches == []
    assert [(f, n) for f, n, _ in rows.rejected] == [(4, 2)]
    assert "batch" in rows.rejected[0][2].lower()


def test_other_lines_naming_a_batch_are_not_read_as_batch_lines(tmp_path: Path) -> None:
    rows = _parse(tmp_path, ["[2026-01-01 00:00:00 TP0] Capture cuda graph bs [1, 2, 4] for Decode batch size"])
    assert rows.batches == [] and rows.rejected == []


@pytest.mark.parametrize("release", BATCH_RELEASES)
def test_the_simulators_lines_of_each_release_parse_back(tmp_path: Path, release: str) -> None:
    lines = [
        decode_line(release, 80, 3, 2624, 0.0213, 0.0061, 1, 2, 4, 36.754),
        prefill_line(release, 9, 1202, 64, 4352, 0.05, 2, 0, 1, 1589.08),
    ]
    rows = _parse(tmp_path, [f"[2026-01-01 00:00:0{i}.250 TP0] {m}" for i, m in enumerate(lines)])
    assert rows.rejected == []
    dec, pre = rows.batches
    pd = release != "0.4.9"
    assert (dec["running_req"], dec["tokens_used"], dec["token_usage"], dec["prealloc_usage"]) == (3, 2624, 0.02, 0.01)
    assert (dec["prealloc_req"], dec["transfer_req"], dec["queue_req"]) == ((1, 2) if pd else (N, N)) + (4,)
    assert dec["forward_ct"] == (80 if release == "0.5.4" else None)
    assert (pre["new_token"], pre["cached_token"], pre["queue_req"], pre["inflight_req"]) == (1202, 64, 2, 1)
    assert pre["tokens_used"] == (4352 if release == "0.4.9" else None)
    assert pre["running_req"] == (None if release == "0.4.9" else 0)


def test_simulated_batch_lines_are_the_nodes_state(tmp_path: Path) -> None:
    """A simulated incident with 0.5.11's lines: one batch_stats row per printed line, and #token the
    decode pool's occupancy, whole pages; the default simulation prints no decode batch line."""
    cfg = build_config("default", seed=5, requests=150, page_size=16, batch_lines="0.5.11")
    simulate(tmp_path / "sim", cfg)
    bundle = tmp_path / "sim" / "bundle"
    printed = sum(
        len(re.findall(r"\] Decode batch, ", (bundle / "engine" / n.name / "server.log").read_text()))
        for n in cfg.decode_nodes
    )
    assert printed > 20
    res = ingest_bundle(bundle, tmp_path / "out" / "incident.duckdb")
    con = support.open_db(res.db)
    n, bad, ragged = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE tokens_used < 0 OR tokens_used > 32768 OR running_req < 1), "
        "count(*) FILTER (WHERE tokens_used % 16 <> 0) FROM batch_stats WHERE kind = 'decode'"
    ).fetchone()
    assert (n, bad, ragged) == (printed, 0, 0)
    assert con.execute("SELECT count(*) FROM batch_stats WHERE kind = 'prefill'").fetchone()[0] > 100
    assert con.execute("SELECT count(*) FROM rejected").fetchone()[0] == 0
    simulate(tmp_path / "plain", build_config("default", seed=5, requests=150, page_size=16))
    assert "Decode batch" not in (tmp_path / "plain" / "bundle" / "engine" / "decode-0" / "server.log").read_text()
