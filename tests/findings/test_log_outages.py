"""Log outages (#47): a time range of one node's engine log or page events removed, as a shipper or a
node down loses it. The outage is found against the gateway's traffic and names the node and a range
holding the removed one; every truly exposed response stays listed (confirmed or indeterminate) and
none that the truth calls unexposed is confirmed. An undamaged bundle has no outage."""

from __future__ import annotations

import csv
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings
from tests.support.damage import drop_engine_lines, drop_page_events


def _truth(out: Path) -> dict[str, dict[str, str]]:
    with (out / "truth" / "responses.csv").open() as fh:
        return {r["request_id"]: r for r in csv.DictReader(fh)}


def _span(bundle: Path) -> tuple[datetime, datetime]:
    """The first and last gateway times of the bundle's JSON-lines gateway file (naive UTC)."""
    with (bundle / "gateway" / "gw-a.jsonl").open() as fh:
        ts = sorted(line.split('"ts": "')[1].split('"')[0] for line in fh)
    return (datetime.fromisoformat(t.rstrip("Z")) for t in (ts[0], ts[-1]))  # type: ignore[return-value]


def _window(bundle: Path, at: float, share: float) -> tuple[datetime, datetime]:
    first, last = _span(bundle)
    width = last - first
    start = first + width * at
    return start, start + width * share


def _check_truth(f: Findings, truth: dict[str, dict[str, str]]) -> None:
    affected = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    missed = [rid for rid, t in truth.items() if t["exposed"] == "1" and rid not in affected]
    wrong = [rid for rid, s in affected.items() if s == "confirmed" and truth.get(rid, {}).get("exposed") != "1"]
    assert not missed, f"truly exposed responses not listed: {missed}"
    assert not wrong, f"confirmed, the truth says unexposed: {wrong}"


def _outages(f: Findings) -> list[tuple]:
    return f.rows("SELECT node, source, gap_from, gap_to, requests_in_gap FROM log_outages ORDER BY ALL")


@pytest.fixture(scope="module")
def dark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An incident whose decode-2 has no page telemetry: its engine log is the evidence there."""
    out = tmp_path_factory.mktemp("outage-dark")
    simulate(out, build_config("default", seed=2, requests=600, page_size=64, no_telemetry="decode-2"))
    return out


@pytest.mark.parametrize("node", ["decode-2", "prefill-0"])
def test_engine_log_outage(tmp_path: Path, dark: Path, node: str) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(dark / "bundle", bundle)
    start, end = _window(bundle, 0.4, 0.25)
    assert drop_engine_lines(bundle, node, start, end) > 0
    f = Findings(bundle)
    rows = [r for r in _outages(f) if r[0] == node and r[1] == "engine_log"]
    assert rows, _outages(f)
    assert any(r[2] <= start and r[3] >= end for r in _utc(rows)), (start, end, rows)
    _check_truth(f, _truth(dark))
    # every response routed through the lost range on the dark decode node is still listed
    flagged = {r[0] for r in f.rows("SELECT request_id FROM outage_responses")}
    listed = {r[0] for r in f.rows("SELECT request_id FROM affected_responses WHERE status = 'indeterminate'")}
    assert flagged <= listed


def _utc(rows: list[tuple]) -> list[tuple]:
    """Outage rows with their times as naive UTC (the removed range's terms)."""
    return [
        (*r[:2], r[2].astimezone(UTC).replace(tzinfo=None), r[3].astimezone(UTC).replace(tzinfo=None), *r[4:])
        for r in rows
    ]


@pytest.mark.parametrize("at", [0.4, 0.8])
def test_page_event_outage(tmp_path: Path, at: float) -> None:
    """decode-1's page events lose a range in the middle (a seq gap) or to its end (no seq after it)."""
    out = tmp_path / "sim"
    simulate(out, build_config("default", seed=1, requests=600))
    start, end = _window(out / "bundle", at, 0.5 if at > 0.5 else 0.25)
    assert drop_page_events(out / "bundle", "decode-1", start, end) > 0
    f = Findings(out / "bundle")
    rows = [r for r in _utc(_outages(f)) if r[0] == "decode-1" and r[1] == "pages"]
    assert rows, _outages(f)
    last = _span(out / "bundle")[1]
    assert any(r[2] <= start and r[3] >= min(end, last) for r in rows), (start, end, rows)
    _check_truth(f, _truth(out))


@pytest.mark.parametrize(
    ("seed", "page_size", "no_telemetry"),
    [(1, 16, None), (3, 1, "decode-1"), (5, 64, None), (2, 64, "decode-2")],
)
def test_no_outage_undamaged(tmp_path: Path, seed: int, page_size: int, no_telemetry: str | None) -> None:
    simulate(tmp_path, build_config("default", seed=seed, requests=600, page_size=page_size, no_telemetry=no_telemetry))
    f = Findings(tmp_path / "bundle")
    assert _outages(f) == []
    assert f.rows("SELECT count(*) FROM outage_responses") == [(0,)]
