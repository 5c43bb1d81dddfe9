"""The plugin's page events, from SGLang's real allocator driven through the simulator's request mix
with the guard in observe: investigate on them gives the simulator's truth; the guard alerts on
exactly the truly exposed responses, in the alert format forensics watch reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.sglang_plugin.conftest import exposed_rooms, need_sglang, simulate_driven, truth_rows

need_sglang()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("observe")
    return out, simulate_driven(out, seed=21, guard="observe")


@pytest.fixture(scope="module")
def findings(run: tuple[Path, dict[str, Any]]) -> Any:
    from tests.support.analysis import Findings

    return Findings(run[0] / "bundle")


def test_the_bundle_holds_the_plugins_page_files(run: tuple[Path, dict[str, Any]]) -> None:
    out, r = run
    pages = sorted(p.name for p in (out / "bundle" / "pages").iterdir())
    assert pages == sorted(p.name for p in (out / "plugin" / "pages").iterdir())
    assert {p.rsplit("-", 2)[0] for p in pages} == {"prefill-0", "prefill-1", "decode-0", "decode-1", "decode-2"}
    assert r["drops"] == dict.fromkeys(r["drops"], 0)
    assert sum(s.allocated_pages for s in r["stats"].values()) > 0
    summary = r["summary"]
    assert summary["placeholders"] > 0 and summary["aborts"] > 0 and summary["exposed_responses"] > 0


def test_investigate_on_the_plugins_events_gives_the_truth(run: tuple[Path, dict[str, Any]], findings: Any) -> None:
    from tests.support.truthcheck import compare

    out, _ = run
    truth = {r["request_id"] for r in truth_rows(out, "responses.csv") if r["exposed"] == "1"}
    affected = {rid: st for rid, st in findings.rows("SELECT request_id, status FROM affected_responses")}
    assert truth and set(affected) == truth
    assert set(affected.values()) == {"confirmed"}
    pairs = {(r["recipient_request_id"], r["source_request_id"], r["node"], r["kind"], int(r["slots"]))
             for r in truth_rows(out, "exposures.csv")}  # fmt: skip
    found = set(findings.rows("SELECT recipient_request_id, source_request_id, node, kind, slots FROM exposures"))
    assert pairs and found == pairs
    c = compare(out)
    assert (c.missed, c.false_confirmed, c.bad_indeterminate, c.slot_mismatches) == ([], [], [], [])
    assert findings.rows("SELECT count(*) FROM seq_gaps")[0][0] == 0


def test_the_guard_observes_exactly_the_exposed_responses(run: tuple[Path, dict[str, Any]]) -> None:
    from forensics.watch import _alerted_in

    out, r = run
    truth = exposed_rooms(out)
    assert truth and r["flagged_rooms"] == truth
    assert r["errored_rooms"] == set()  # observe finishes nothing
    alerts = out / "plugin" / "alerts.jsonl"
    lines = [json.loads(x) for x in alerts.read_text().splitlines()]
    assert len(lines) == len(truth)  # one alert per room
    assert _alerted_in(alerts) == {f"exposure\t{room}" for room in truth}  # watch's dedupe keys
