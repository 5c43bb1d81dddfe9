"""The guard in enforce finishes exactly the truly exposed responses with an error; a decode node
whose page writer stalls drops events from its full queue, and investigate reports the seq gap and
reasons around it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.sglang_plugin.conftest import exposed_rooms, need_sglang, simulate_driven

need_sglang()

STALLED = "decode-1"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("enforce")
    return out, simulate_driven(out, seed=22, guard="enforce", stall=STALLED, stall_queue=16)


def test_enforce_finishes_exactly_the_exposed_responses(run: tuple[Path, dict[str, Any]]) -> None:
    out, r = run
    truth = exposed_rooms(out)
    assert truth and r["errored_rooms"] == truth
    assert r["flagged_rooms"] == truth
    assert sum(s.enforced for s in r["stats"].values()) == len(truth)


def test_a_full_queue_is_a_seq_gap_investigate_reports(run: tuple[Path, dict[str, Any]]) -> None:
    from tests.support.analysis import Findings
    from tests.support.truthcheck import compare

    out, r = run
    gaps = r["gaps"][STALLED]
    assert gaps and r["drops"][STALLED] == sum(b - a + 1 for a, b in gaps)
    assert all(not g for n, g in r["gaps"].items() if n != STALLED)
    f = Findings(out / "bundle")
    reported = f.rows("SELECT node, prev_seq, next_seq, missing, kind FROM seq_gaps ORDER BY prev_seq")
    assert reported == [(STALLED, a - 1, b + 1, b - a + 1, "lost") for a, b in gaps]
    cov = dict(f.rows("SELECT node, seq_gaps FROM coverage"))
    assert cov[STALLED] == len(gaps) and sum(cov.values()) == len(gaps)
    c = compare(out)
    assert c.missed == [] and c.false_confirmed == []
