"""The engines' integrity lines as evidence, against the simulator's truth: a simulated incident with
SGLang's KV canary switched on (`--integrity-lines canary`: a violation line where a decode read finds
another request's KV in a slot) and the same incident without it. With the lines, every response they
confirm is truly exposed, every true exposure they flag is reported, a response they flag on the node
without page telemetry is confirmed or indeterminate with the line cited, and the findings still match
the truth as the truth check reads them; without them, the findings are those of the unchanged tool."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings
from tests.support.truthcheck import compare

CASE = dict(seed=21, requests=600, no_telemetry="decode-1")


def _truth(out: Path) -> dict[str, dict[str, str]]:
    with (out / "truth" / "responses.csv").open() as fh:
        return {r["request_id"]: r for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, lines in (("canary", "canary"), ("plain", "")):
        d = tmp_path_factory.mktemp(name)
        simulate(d / "sim", build_config("default", integrity_lines=lines or None, **CASE))
        out[name] = d / "sim"
    return out


def test_the_option_adds_only_the_canary_lines(runs: dict[str, Path]) -> None:
    a, b = runs["canary"] / "bundle", runs["plain"] / "bundle"
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files:
        if rel.name == "server.log":
            kept = [x for x in (a / rel).read_text().splitlines() if "canary" not in x and not x.startswith("  ")]
            assert kept == (b / rel).read_text().splitlines(), rel
        elif rel.name != "bundle.toml":
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_canary_lines_confirm_only_true_exposures_and_miss_none(runs: dict[str, Path]) -> None:
    sim = runs["canary"]
    truth = _truth(sim)
    c = compare(sim)
    assert c.missed == [] and c.false_confirmed == [] and c.bad_indeterminate == []
    f = Findings(sim / "bundle")
    lines = f.rows("SELECT count(*) FROM integrity_events WHERE kind = 'canary_violation' AND ts IS NOT NULL")[0][0]
    assert lines > 0
    named = f.rows("SELECT request_id, node, effect, cite FROM integrity_responses ORDER BY ALL")
    status = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    reason = dict(f.rows("SELECT request_id, reason FROM affected_responses"))
    confirmed = {rid for rid, _, effect, _ in named if effect == "confirm"}
    assert confirmed and all(truth[rid]["exposed"] == "1" for rid in confirmed)
    # each line's holder: a confirm names one request, truly exposed; a doubt names the candidates, one
    # of them truly exposed
    by_line: dict[str, list[tuple[str, str]]] = {}
    for rid, _, effect, cite in named:
        by_line.setdefault(cite, []).append((rid, effect))
    assert len(by_line) == lines
    for cite, rs in by_line.items():
        assert any(truth[rid]["exposed"] == "1" for rid, _ in rs), cite
    for rid, node, effect, cite in named:
        assert f"engine/{node}/server.log:" in cite
        if effect == "confirm":  # confirmed, the line cited
            assert status[rid] == "confirmed" and cite in reason[rid]
        else:  # not clean: indeterminate with the line cited, unless other evidence confirms it
            assert status[rid] == "confirmed" or (status[rid] == "indeterminate" and cite in reason[rid])
    # on the node without page telemetry: the lines name requests its logs alone could not confirm
    dark = {rid for rid, node, effect, _ in named if node == "decode-1" and effect == "confirm"}
    assert dark and all(truth[rid]["evidence"] == "signature" for rid in dark)


def test_without_the_lines_nothing_is_confirmed_by_them(runs: dict[str, Path]) -> None:
    sim = runs["plain"]
    c = compare(sim)
    assert c.missed == [] and c.false_confirmed == [] and c.bad_indeterminate == []
    f = Findings(sim / "bundle")
    assert f.rows("SELECT count(*) FROM integrity_responses")[0][0] == 0
    with_lines = Findings(runs["canary"] / "bundle")
    plain = dict(f.rows("SELECT request_id, status FROM affected_responses"))
    canary = dict(with_lines.rows("SELECT request_id, status FROM affected_responses"))
    # the lines only add: every response confirmed without them is confirmed with them
    assert {r for r, s in plain.items() if s == "confirmed"} <= {r for r, s in canary.items() if s == "confirmed"}
    assert set(plain) <= set(canary)
