"""Log outages (#47): a time range of one node's engine log or page events removed, as a shipper or a
node down loses it. The outage is found against the gateway's traffic and names the node and a range
holding the removed one; every truly exposed response stays listed (confirmed or indeterminate) and
none that the truth calls unexposed is confirmed. An undamaged bundle has no outage."""

from __future__ import annotations

import csv
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings
from tests.support.delivery import drop_engine_lines, drop_page_events, line_time

_ROOM = re.compile(r'bootstrap_room(?:=|": )(\d+)')  # a text line's field, a JSON line's key


def _truth(out: Path) -> dict[str, dict[str, str]]:
    with (out / "truth" / "responses.csv").open() as fh:
        return {r["request_id"]: r for r in csv.DictReader(fh)}


def _span(bundle: Path) -> tuple[datetime, datetime]:
    """The first and last gateway times of the bundle's JSON-lines gateway file (naive UTC)."""
    with (bundle / "gateway" / "gw-a.jsonl").open() as fh:
        ts = sorted(line.split('"ts": "')[1].split('"')[0] for line in fh)
    return datetime.fromisoformat(ts[0].rstrip("Z")), datetime.fromisoformat(ts[-1].rstrip("Z"))


def _window(bundle: Path, at: float, share: float) -> tuple[datetime, datetime]:
    first, last = _span(bundle)
    width = last - first
    start = first + width * at
    return start, start + width * share


def _over_exposed(out: Path, node: str, share: float) -> tuple[datetime, datetime]:
    """A range of `share` of the incident that holds the engine-log lines of truly exposed responses
    routed to `node` (from the middle one on), so that the outage takes some of their evidence."""
    rooms = {
        t["room"] for t in _truth(out).values() if t["exposed"] == "1" and node in (t["decode_node"], t["prefill_node"])
    }
    times = sorted(
        t
        for line in (out / "bundle" / "engine" / node / "server.log").read_text().splitlines()
        if (m := _ROOM.search(line)) and m.group(1) in rooms and (t := line_time(line))
    )
    assert times, f"no exposed response on {node}"
    first, last = _span(out / "bundle")
    start = times[len(times) // 2] - timedelta(seconds=30)
    return start, start + (last - first) * share


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
    start, end = _over_exposed(dark, node, 0.25)
    dropped = drop_engine_lines(bundle, node, start, end)
    assert dropped
    f = Findings(bundle)
    rows = [r for r in _outages(f) if r[0] == node and r[1] == "engine_log"]
    assert rows, _outages(f)
    # the outage holds every line removed up to the last one of a served request (past it, the gateway
    # routed nothing there that the log could have been missing: nothing shows a loss)
    truth = _truth(dark)
    served = {t["room"] for t in truth.values() if t["status"].startswith("2")}
    lost = [t for t, line in dropped if (m := _ROOM.search(line)) and m.group(1) in served]
    assert any(r[2] <= dropped[0][0] and r[3] >= lost[-1] for r in _utc(rows)), (dropped[0][0], lost[-1], rows)
    _check_truth(f, truth)
    # every response whose evidence the outage may have taken is listed, and none of them cleared
    flagged = {r[0] for r in f.rows("SELECT request_id FROM outage_responses")}
    assert flagged
    assert flagged <= {r[0] for r in f.rows("SELECT request_id FROM affected_responses")}


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
    start, end = (
        _window(out / "bundle", at, 0.5 if at > 0.5 else 0.25) if at > 0.5 else _over_exposed(out, "decode-1", 0.25)
    )
    lost = drop_page_events(out / "bundle", "decode-1", start, end)
    assert lost
    f = Findings(out / "bundle")
    rows = [r for r in _utc(_outages(f)) if r[0] == "decode-1" and r[1] == "pages"]
    assert rows, _outages(f)
    assert any(r[2] <= lost[0] and r[3] >= lost[-1] for r in rows), (lost[0], lost[-1], rows)
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
