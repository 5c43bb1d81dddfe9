"""Issue #47, each indeterminate tier with its measured reliability: on simulated incidents where one decode
node has no page telemetry, the logs-only rules of the indeterminate tiers (late writes, placeholder
signatures) are applied to the decode nodes that have it, and tier_reliability's share of affected
responses there equals an independent count from the simulator's truth; on a bundle without page
telemetry, every tier says that no reliability could be measured."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from forensics.report.data import reliability
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

DARK = "decode-2"
# (seed, page size, abort rate, late_clear_ms, allocator): late_clear 0 lets a late landing hit another
# request's pages, which the releases' deferred reuse keeps from happening and coalesce and lifo do not
CASES = [(2, 16, 0.15, 0, None), (3, 64, 0.2, 0, None), (4, 16, 0.1, 50, None), (8, 64, 0.15, 0, "coalesce")]


def _truth(sim: Path) -> dict[str, dict[str, str]]:
    with (sim / "truth" / "responses.csv").open(newline="") as f:
        return {r["request_id"]: r for r in csv.DictReader(f)}


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "seed{}-ps{}-abort{}-clear{}-{}".format(*c))
def incident(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Findings]:
    seed, page_size, abort_rate, late_clear, allocator = request.param
    sim = tmp_path_factory.mktemp("tiers") / "sim"
    cfg = build_config(
        "default",
        seed=seed,
        requests=400,
        page_size=page_size,
        abort_rate=abort_rate,
        late_clear_ms=late_clear,
        no_telemetry=DARK,
        dark_aborts=True,
        allocator=allocator,
    )
    simulate(sim, cfg)
    return sim, Findings(sim / "bundle")


def test_measured_on_the_telemetry_nodes_only(incident) -> None:
    _, f = incident
    lit = {r[0] for r in f.rows("SELECT node FROM telemetry_nodes")}
    assert DARK not in lit
    for tier, measured_on in f.rows("SELECT tier, measured_on FROM tier_reliability"):
        assert measured_on and DARK not in measured_on.split(", "), tier
        assert set(measured_on.split(", ")) <= lit
    calibrated = {r[0] for r in f.rows("SELECT node FROM calibration_rooms")}
    assert calibrated <= lit
    nodes = {r[0] for r in f.rows("SELECT DISTINCT node FROM tier_cases")}
    assert nodes <= lit and DARK not in nodes


def test_share_equals_the_truths_count(incident) -> None:
    """Per tier: the settled cases the page events call affected are exactly those the truth calls exposed,
    and the table's counts and share are that count."""
    sim, f = incident
    truth = _truth(sim)
    for tier, cases, affected, share, basis in f.rows(
        "SELECT tier, cases, affected, share, basis FROM tier_reliability ORDER BY tier"
    ):
        settled = f.con.execute(
            "SELECT request_id, pages FROM tier_cases WHERE tier = ? AND counted AND pages <> 'indeterminate'", [tier]
        ).fetchall()
        assert len({r for r, _ in settled}) == cases, tier
        exposed = {r for r, _ in settled if truth[r]["exposed"] == "1"}
        assert {r for r, p in settled if p == "confirmed"} == exposed, tier
        assert affected == len(exposed), tier
        if cases:
            assert share == pytest.approx(round(len(exposed) / cases, 3)), tier
            assert f"{affected} of {cases} such response" in basis, tier
        else:
            assert share is None and basis.startswith("no reliability could be measured"), tier


def test_recall_against_the_truth(incident) -> None:
    """The late writes the truth has on the telemetry nodes, into responses other than placeholder ones, are
    what page_affected counts; rule_found of them are late-write cases."""
    sim, f = incident
    truth = _truth(sim)
    lit = {r[0] for r in f.rows("SELECT node FROM telemetry_nodes")}
    with (sim / "truth" / "exposures.csv").open(newline="") as fh:
        written = {
            e["recipient_request_id"]
            for e in csv.DictReader(fh)
            if e["kind"] == "foreign_write"
            and e["node"] in lit
            and truth[e["recipient_request_id"]]["placeholder"] == "0"
        }
    late = {r[0] for r in f.rows("SELECT request_id FROM tier_cases WHERE tier = 'late_write'")}
    page_affected, rule_found = f.rows(
        "SELECT page_affected, rule_found FROM tier_reliability WHERE tier = 'late_write'"
    )[0]
    assert page_affected == len(written)
    assert rule_found == len(written & late)
    if json.loads((sim / "truth" / "summary.json").read_text())["exposure_pairs_by_kind"]["foreign_write"]:
        assert written, "an incident with late writes must measure some on the telemetry nodes"


def test_signature_cases_are_those_the_model_cannot_show_written(incident) -> None:
    """A signature case is a placeholder response of a calibration node (truth: placeholder) whose pages not
    every replay of the allocator model shows written over."""
    sim, f = incident
    truth = _truth(sim)
    rows = f.rows("""SELECT t.request_id, t.counted, m.written_members, m.members FROM tier_cases t
        LEFT JOIN gateway g ON g.request_id = t.request_id
        LEFT JOIN calibration_rooms m ON m.node = t.node AND m.room = g.bootstrap_room WHERE t.tier = 'signature'""")
    for rid, counted, written, members in rows:
        assert truth[rid]["placeholder"] == "1", rid
        assert counted == (written is not None and written < members), rid


def test_late_write_cases_follow_the_rule(incident) -> None:
    """A late-write case is a delivered response of a telemetry node whose room held pages while an aborted
    room's transfer may have landed (late_write_rule), never a placeholder response (the signature tier's)."""
    _, f = incident
    late = {r[0] for r in f.rows("SELECT request_id FROM tier_cases WHERE tier = 'late_write'")}
    sig = {r[0] for r in f.rows("SELECT request_id FROM tier_cases WHERE tier = 'signature'")}
    assert not late & sig
    ruled = {
        r[0]
        for r in f.rows("""SELECT g.request_id FROM gateway g JOIN late_write_rule w
            ON w.node = g.decode_node AND w.room = g.bootstrap_room""")
    }
    assert late <= ruled


def test_no_page_telemetry_says_no_reliability(tmp_path: Path) -> None:
    simulate(tmp_path / "sim", build_config("default", seed=1, requests=300, no_telemetry=DARK, dark_aborts=True))
    shutil.rmtree(tmp_path / "sim" / "bundle" / "pages")
    f = Findings(tmp_path / "sim" / "bundle")
    rows = f.rows("SELECT tier, measured_on, cases, share, basis FROM tier_reliability ORDER BY tier")
    assert [r[0] for r in rows] == ["late_write", "signature"]
    for _, measured_on, cases, share, basis in rows:
        assert measured_on is None and cases == 0 and share is None
        assert basis.startswith("no reliability could be measured")
    said = reliability(f.con)
    assert said["all"].count("no reliability could be measured") >= 1
    assert "%" not in said["all"]
