"""Findings on damaged evidence against the simulator's truth: a response whose gateway record is lost
(a gateway file skipped for a renamed column, or removed) stays listed with its account unknown and is
counted apart in the headline; every true (recipient, source) pair of an indeterminate recipient is in
exposures or possible_sources."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from forensics.paths import load_query
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings
from tests.support.truthcheck import _read, coverage

pytestmark = pytest.mark.slow  # whole simulated incidents


def _rename_account_column(bundle: Path) -> None:
    """gw-c.csv as an export with its account_id column renamed: ingest skips the whole file."""
    path = bundle / "gateway" / "gw-c.csv"
    head, rest = path.read_text().split("\n", 1)
    path.write_text(head.replace("account_id", "acct") + "\n" + rest)


def _remove_file(bundle: Path) -> None:
    (bundle / "gateway" / "gw-a.jsonl").unlink()


@pytest.mark.parametrize(
    ("case", "damage"),
    [
        (dict(seed=3, requests=700, page_size=1, no_telemetry="decode-0"), _rename_account_column),
        (dict(seed=9, requests=700, page_size=16, no_telemetry="decode-1", abort_rate=0.15), _remove_file),
        (dict(seed=17, requests=700, page_size=64, no_telemetry="decode-2"), _rename_account_column),
    ],
    ids=["renamed-column-p1", "removed-file-p16", "renamed-column-p64"],
)
def test_a_response_that_lost_its_gateway_record_stays_with_its_account_unknown(
    tmp_path: Path, case: dict, damage: Callable[[Path], None]
) -> None:
    simulate(tmp_path / "sim", build_config("default", **case))
    damage(tmp_path / "sim" / "bundle")
    f = Findings(tmp_path / "sim" / "bundle")
    c = coverage(tmp_path / "sim" / "truth", f)
    assert c.missed == [], "truly exposed responses dropped"
    # the truth's exposed signature responses whose record the damage took: listed by room, account unknown
    named = {r[0] for r in f.rows("SELECT request_id FROM gateway")}
    lost = [
        t
        for t in _read(tmp_path / "sim" / "truth" / "responses.csv")
        if t["exposed"] == "1" and t["evidence"] == "signature" and t["request_id"] not in named
    ]
    assert lost, "the damage must take the record of some exposed signature response"
    rows = {r[0]: r[1:] for r in f.rows("SELECT room::VARCHAR, account_id, status, evidence FROM affected_responses")}
    for t in lost:
        account, status, evidence = rows[t["room"]]
        assert account is None and evidence == "signature" and status == "indeterminate"
    # the headline counts them apart, never as 0 accounts
    assert f.rows("SELECT unknown_account FROM (" + load_query("findings", "headline") + ")")[0][0] >= len(lost)
    assert c.unlisted_pairs == [], "true pairs of indeterminate recipients in no list"


# seed 1 at page size 1 loses the alloc and read of an exposed response in the gap (its first event on
# decode-0 follows it): before, it was cleared, its 3 true sources in no list
GAPS = [
    dict(seed=1, requests=600, page_size=1),
    dict(seed=7, requests=1200, page_size=16),
    dict(seed=3, requests=600, page_size=64),
    dict(seed=4, requests=600, page_size=16, no_telemetry="decode-2"),
]


@pytest.mark.parametrize("case", GAPS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_every_indeterminate_recipient_after_a_seq_gap_has_its_true_sources_listed(tmp_path: Path, case: dict) -> None:
    simulate(tmp_path / "sim", build_config("default", gap_node="decode-0", gap_events=30, **case))
    f = Findings(tmp_path / "sim" / "bundle")
    c = coverage(tmp_path / "sim" / "truth", f)
    assert c.missed == [], "truly exposed responses dropped"
    assert c.unlisted_pairs == [], "true pairs of indeterminate recipients in no list"
    # linear: the gap's sources are the rooms in flight across it and the pool's last writers, not the node's rooms
    gap, rooms = f.rows("""SELECT (SELECT count(*) FROM gap_sources WHERE node = 'decode-0'),
        (SELECT count(DISTINCT room) FROM page_events WHERE node = 'decode-0')""")[0]
    assert 0 < gap < rooms
