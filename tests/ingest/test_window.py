"""Issue #7: historical replay over hive-partitioned page archives with --since/--until.

The simulator's bundle is re-laid as pages/date=YYYY-MM-DD/node=NODE/part.parquet. Checked: the
hive layout gives the same findings as the flat one; a window reads only its partitions (the others
are listed as skipped, never silently); it confirms nothing the whole archive does not confirm, and
it misses nothing the whole archive confirms inside the window (at worst it says indeterminate).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from forensics.intake import Window
from forensics.ownership import Execution
from forensics.pipeline import ingest_bundle, investigate
from tests import support

SINCE, UNTIL = "2026-09-01", "2026-09-05"


def affected(out: Path) -> dict[str, dict[str, str]]:
    with (out / "affected_responses.csv").open() as fh:
        return {r["request_id"]: r for r in csv.DictReader(fh)}


def pairs(out: Path) -> set[tuple[str, str, str]]:
    with (out / "exposures.csv").open() as fh:
        return {(r["recipient_request_id"], r["source_request_id"], r["kind"]) for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def archive(
    tmp_path_factory: pytest.TempPathFactory, incident_bundle: Path, incident_serial: tuple[Path, dict]
) -> dict[str, Path]:
    """The session's incident (tests/conftest.py) as a flat bundle and, copied, as a Hive-partitioned
    archive of its page events; each investigated whole, and the archive in a window."""
    tmp = tmp_path_factory.mktemp("window")
    flat = incident_bundle
    hive = tmp / "hive"
    shutil.copytree(flat, hive, ignore=shutil.ignore_patterns("pages"))
    ingest_bundle(flat, tmp / "flat.duckdb")
    con = support.open_db(tmp / "flat.duckdb", read_only=False)
    con.execute("SET TimeZone = 'UTC'")
    parts = con.execute("SELECT DISTINCT strftime(ts, '%Y-%m-%d'), node FROM page_events ORDER BY 1, 2").fetchall()
    for day, node in parts:
        folder = hive / "pages" / f"date={day}" / f"node={node}"
        folder.mkdir(parents=True)
        con.execute(
            f"""COPY (SELECT node, seq, ts, op, room, start, "end", peer, src FROM page_events
                     WHERE strftime(ts, '%Y-%m-%d') = '{day}' AND node = '{node}' ORDER BY seq)
                TO '{folder / "part-0.parquet"}' (FORMAT parquet)"""
        )
    con.close()
    outs = {"flat": incident_serial[0], "hive": tmp / "out-hive", "window": tmp / "out-window"}  # flat: one worker
    investigate(hive, outs["hive"], execution=Execution(workers=1))
    investigate(hive, outs["window"], execution=Execution(workers=1), window=Window.parse(SINCE, UNTIL))
    outs["bundle"] = hive
    return outs


def test_hive_layout_reads_like_the_flat_bundle(archive: dict[str, Path]) -> None:
    for name in ("affected_responses.csv", "exposures.csv", "hazards.csv"):
        assert (archive["flat"] / name).read_bytes() == (archive["hive"] / name).read_bytes(), name
    assert len(affected(archive["flat"])) >= 5


def test_window_reads_only_its_partitions(archive: dict[str, Path]) -> None:
    manifest = json.loads((archive["window"] / "manifest.json").read_text())
    assert manifest["window"] == {"since": "2026-09-01T00:00:00Z", "until": "2026-09-05T00:00:00Z"}
    pages = [f for f in manifest["inputs"] if f["source"] == "pages"]
    inside = [f for f in pages if SINCE <= f["path"].split("date=")[1][:10] < UNTIL]
    outside = [f for f in pages if f not in inside]
    assert inside and outside
    for f in outside:
        assert f["rows_read"] == 0 and "outside --since/--until" in f["skipped"] and f["sha256"] == ""
    for f in inside:
        assert f["rows_read"] > 0 and f["rows_read"] == f["rows_loaded"] + f["rows_rejected"]
        assert "skipped" not in f and "rows_outside_window" not in f  # day-aligned window: nothing set aside
    report = (archive["window"] / "report.md").read_text()
    assert "Historical replay window" in report and "2026-09-01T00:00:00.000Z" in report
    assert f"{len(outside):,} page files outside the window were not read" in report
    assert "Historical replay window" not in (archive["hive"] / "report.md").read_text()


def test_window_confirms_nothing_the_archive_does_not(archive: dict[str, Path]) -> None:
    whole, part = affected(archive["hive"]), affected(archive["window"])
    confirmed = [rid for rid, r in part.items() if r["status"] == "confirmed"]
    assert confirmed, "the window holds confirmed exposures"
    for rid in confirmed:
        assert whole[rid]["status"] == "confirmed", rid
    window_pairs = {p for p in pairs(archive["window"]) if p[0] in confirmed}
    assert window_pairs <= pairs(archive["hive"])


def test_window_misses_nothing_confirmed_inside_it(archive: dict[str, Path]) -> None:
    whole, part = affected(archive["hive"]), affected(archive["window"])
    inside = [
        rid for rid, r in whole.items() if r["status"] == "confirmed" and SINCE <= r["first_exposed_at"][:10] < UNTIL
    ]
    assert inside
    missed = [rid for rid in inside if rid not in part]
    assert not missed


def test_partial_day_window_counts_rows_set_aside(archive: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "half"
    investigate(
        archive["bundle"], out, execution=Execution(workers=1), window=Window.parse("2026-09-01T12:00:00Z", UNTIL)
    )
    manifest = json.loads((out / "manifest.json").read_text())
    first_day = [f for f in manifest["inputs"] if "date=2026-09-01" in f["path"]]
    assert first_day and all(f.get("rows_outside_window", 0) > 0 for f in first_day)
    for f in manifest["inputs"]:
        if f["source"] == "pages":
            assert f["rows_read"] == f["rows_loaded"] + f["rows_rejected"] + f.get("rows_outside_window", 0)
    for rid, r in affected(out).items():  # scope: requests received in the window (or exposed in it)
        assert r["status"] != "confirmed" or affected(archive["hive"])[rid]["status"] == "confirmed"
