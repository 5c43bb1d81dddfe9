"""Issue #24, the database for the investigator: schema main holds only documented views (the public
tables and the entry views), every view, table and column has a comment, docs/schema.md is the
rendering of those comments, and the entry views answer their questions as the delivered CSVs do."""

from __future__ import annotations

import csv
import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from forensics.catalog import ENTRY_VIEWS, catalog, schema_markdown
from tests import support

SCHEMA_DOC = support.ROOT / "docs" / "schema.md"


@pytest.fixture(scope="module")
def sample(sample_out: Path) -> Path:
    return sample_out


@pytest.fixture(scope="module")
def db(sample: Path):
    con = duckdb.connect(str(sample / "incident.duckdb"), read_only=True)
    yield con
    con.close()


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_main_holds_exactly_the_documented_views(db) -> None:
    tables = db.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()
    views = {
        r[0]
        for r in db.execute(
            "SELECT view_name FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal"
        ).fetchall()
    }
    assert tables == []
    assert views == set(catalog()["views"]) and set(ENTRY_VIEWS) <= views


def test_every_view_table_and_column_has_a_comment(db) -> None:
    blank = db.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE coalesce(comment, '') = '' "
        "UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal AND coalesce(comment, '') = ''"
    ).fetchall()
    assert blank == []
    cols = db.execute(
        "SELECT schema_name, table_name, column_name FROM duckdb_columns() WHERE NOT internal "
        "AND schema_name IN ('main', 'internal') AND coalesce(comment, '') = ''"
    ).fetchall()
    assert cols == []
    internal = db.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'internal'").fetchall()[0][0]
    assert internal > 40  # the analysis' tables are all there, out of the investigator's way


def test_schema_doc_is_current(db) -> None:
    got = schema_markdown(db)
    if os.environ.get("UPDATE_GOLDEN"):
        SCHEMA_DOC.write_text(got)
    assert SCHEMA_DOC.read_text() == got, "docs/schema.md is stale: make schema-doc (or UPDATE_GOLDEN=1)"
    for name in catalog()["views"]:
        assert f"### {name}\n" in got


def test_whose_data_reached_an_account(db, sample: Path) -> None:
    exposures = _csv(sample / "exposures.csv")
    want: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for e in exposures:
        key = ("recipient_account_id", "recipient_cohort", "source_account_id", "source_cohort", "status")
        want[tuple(e[k] for k in key)].add(e["source_request_id"])
    got = {
        tuple(row[:-1]): row[-1]
        for row in db.execute(
            "SELECT recipient_account_id, recipient_cohort, source_account_id, source_cohort, status, "
            "source_request_count FROM exposure_by_account WHERE status IN ('confirmed', 'indeterminate')"
        ).fetchall()
    }
    assert got == {k: len(v) for k, v in want.items()} and got
    possible = db.execute(
        "SELECT count(*), count(slots) FROM exposure_by_account WHERE status = 'possible'"
    ).fetchall()[0]
    assert possible[0] > 0 and possible[1] == 0  # slots of a possible pair: unknown, never 0


def test_every_exposure_on_a_node_in_a_time_range(db, sample: Path) -> None:
    exposures = _csv(sample / "exposures.csv")
    node = exposures[0]["node"]
    times = sorted(e["first_exposed_at"] for e in exposures if e["node"] == node)
    t1, t2 = times[len(times) // 4], times[3 * len(times) // 4]
    want = sorted(
        (e["recipient_request_id"], e["source_request_id"], e["kind"])
        for e in exposures
        if e["node"] == node and t1 <= e["first_exposed_at"] < t2
    )
    got = db.execute(
        "SELECT recipient_request_id, source_request_id, kind FROM exposures_on_node "
        "WHERE node = ? AND first_exposed_at >= ? AND first_exposed_at < ? ORDER BY ALL",
        [node, _ts(t1), _ts(t2)],
    ).fetchall()
    assert [tuple(r) for r in got] == want and want


def test_a_node_without_page_telemetry_in_a_time_range(db, sample: Path) -> None:
    """The signature responses of a dark node appear in exposures_on_node's time filter, each with its
    possible sources, at the recipient's own exposure time."""
    sig = [r for r in _csv(sample / "affected_responses.csv") if r["evidence"] == "signature"]
    node = next(r["decode_node"] for r in sig)
    times = sorted(r["first_exposed_at"] for r in sig if r["decode_node"] == node)
    t1, t2 = times[0], times[len(times) // 2]
    want = {r["request_id"] for r in sig if r["decode_node"] == node and t1 <= r["first_exposed_at"] < t2}
    possible = {r["recipient_request_id"] for r in _csv(sample / "possible_sources.csv") if r["node"] == node}
    got = db.execute(
        "SELECT DISTINCT recipient_request_id FROM exposures_on_node "
        "WHERE node = ? AND status = 'possible' AND first_exposed_at >= ? AND first_exposed_at < ?",
        [node, _ts(t1), _ts(t2)],
    ).fetchall()
    assert {r[0] for r in got} == want & possible and want & possible


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_the_provenance_of_each_response(db, sample: Path) -> None:
    want: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for e in _csv(sample / "exposures.csv"):
        want[e["recipient_request_id"]].add((e["source_request_id"], e["kind"]))
    got: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for req, src, kind in db.execute(
        "SELECT request_id, source_request_id, exposure_kind FROM response_provenance WHERE kind = 'foreign'"
    ).fetchall():
        got[req].add((src, kind))
    assert got == want
    kinds = {r[0] for r in db.execute("SELECT DISTINCT kind FROM response_provenance").fetchall()}
    assert kinds <= {"foreign", "shared", "unwritten"} and "foreign" in kinds
