"""Issue #35: `forensics watch --once` and `forensics investigate` on the same logs-only bundles (pages/
removed: every decode node dark) name the same placeholder leaks. The watcher's placeholder_signature
rule is the findings' signature (findings/queries/signature_responses.sql) applied line by line, so:

    watcher's (decode node, room) == investigate's signature responses that a prefill line (over-length,
                                     or input length 1) and a decode line (its full input length) name

Investigate reports more than that, by design, from the gateway log the watcher does not read: a room
no prefill line names whose prompt lies in the pair's leak window, and a room whose decode lines are
lost, are indeterminate signature responses; the watcher, which needs both lines, stays silent on them.
Investigate also drops a room the gateway shows undelivered; the watcher cannot know that, so such a
room could be alerted and not reported (none of these bundles has one: the check would name it). One
bundle has the lines of three placeholder rooms cut, to see both sides of the relation."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from forensics.watch import run
from tests.support.analysis import Findings

CASES = {
    "seed12-p32": dict(seed=12, requests=400, page_size=32),
    "seed21-p8-dark-aborts": dict(
        seed=21, requests=500, page_size=8, abort_rate=0.2, dark_aborts=True, no_telemetry="decode-1"
    ),
    "seed22-p64-skew-0.4.9": dict(seed=22, requests=500, page_size=64, clock_skew_ms=3000, release="0.4.9"),
    "seed23-p16-smg": dict(seed=23, requests=500, page_size=16, gateway_format="smg"),
    "seed7-p1-cut": dict(seed=7, requests=400, page_size=1, prefill_count=2, decode_count=2),
}
CUT = "seed7-p1-cut"
# a prefill line's evidence in signature_responses.why (a window-only response starts "the gateway logged")
BY_PREFILL_LINE = "(why LIKE 'prefill logged%' OR why LIKE 'prefill ran%')"


def _watch(bundle: Path, alerts: Path) -> set[tuple[str, int]]:
    run(bundle, once=True, alerts=alerts)
    got = [json.loads(x) for x in alerts.read_text().splitlines()] if alerts.exists() else []
    return {(a["node"], a["room"]) for a in got if a["kind"] == "placeholder_signature"}


def _cut_room(bundle: Path, node: str, room: int) -> None:
    """Every line of `node`'s logs that names `room` (its text and JSON request lines) removed."""
    named = re.compile(rf"bootstrap_room(?:=|\": ){room}\b".encode())
    removed = 0
    for f in sorted((bundle / "engine" / node).iterdir()):
        lines = f.read_bytes().splitlines(keepends=True)
        kept = [ln for ln in lines if not named.search(ln)]
        removed += len(lines) - len(kept)
        f.write_bytes(b"".join(kept))
    assert removed, (node, room)


@pytest.mark.parametrize("case", sorted(CASES))
def test_watch_alerts_the_signatures_investigate_proves_from_both_lines(tmp_path: Path, case: str) -> None:
    simulate(tmp_path / "sim", build_config("default", **CASES[case]))
    bundle = tmp_path / "sim" / "bundle"
    shutil.rmtree(bundle / "pages")  # logs only: the findings' signature path on every decode node
    cut: dict[str, set[tuple[str, int]]] = {"prefill": set(), "decode": set()}
    if case == CUT:
        before = Findings(bundle).rows(
            f"SELECT node, room, prefill_node FROM signature_responses WHERE {BY_PREFILL_LINE}"
        )
        assert len(before) >= 3
        for node, room, prefill in sorted(before)[:2]:  # prefill's lines of two rooms lost
            _cut_room(bundle, prefill, room)
            cut["prefill"].add((node, room))
        node, room, _ = sorted(before)[2]  # and the decode node's lines of a third
        _cut_room(bundle, node, room)
        cut["decode"].add((node, room))
    watched = _watch(bundle, tmp_path / "alerts.jsonl")
    f = Findings(bundle)
    reported = set(f.rows("SELECT node, room FROM signature_responses"))
    both_lines = set(f.rows(f"SELECT node, room FROM signature_responses WHERE decode_input > 1 AND {BY_PREFILL_LINE}"))
    assert watched, "the incident must have placeholder leaks for the comparison to mean anything"
    assert watched == both_lines, (sorted(watched - both_lines), sorted(both_lines - watched))
    assert reported - both_lines == cut["prefill"] | cut["decode"]
    # the cut rooms: investigate still reports them, as indeterminate, and says what is missing
    status = {(n, r): (s, why) for n, r, s, why in f.rows("SELECT node, room, status, why FROM signature_responses")}
    for key in cut["prefill"]:
        assert status[key][0] == "indeterminate" and "inside the leak window" in status[key][1], status[key]
    for key in cut["decode"]:
        assert status[key][0] == "indeterminate" and "missing: no Req Time Stats" in status[key][1], status[key]
