"""Possible sources when a sending node lost page events or kept none (#47, findings/sender_sources.py):
simulated incidents at page sizes 1, 16 and 64 with a prefill node's page file removed, or a block of its
page events lost (--gap-node prefill-0), held to the simulator's truth: every true (recipient, source)
pair of an affected response is in exposures or possible_sources, and the rooms listed for a recipient
stay well below all rooms of its node."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.simulate import build_config, simulate
from tests.support import open_db
from tests.support.damage import Damage
from tests.support.faultcheck import Truth, investigate, measure

CASES = [(3, 1), (5, 16), (6, 64)]


def _incident(tmp: Path, seed: int, page_size: int, damage: str) -> tuple[Path, Path]:
    extra = {"gap_node": "prefill-0", "gap_events": 20} if damage == "seq_gap" else {}
    sim = tmp / "sim"
    simulate(sim, build_config("default", seed=seed, requests=600, page_size=page_size, **extra))
    if damage == "page_file_removed":
        for p in (sim / "bundle" / "pages").glob("prefill-0.*"):
            p.unlink()
    return sim, tmp / "out"


@pytest.mark.parametrize("damage", ["page_file_removed", "seq_gap"])
@pytest.mark.parametrize(("seed", "page_size"), CASES, ids=[f"s{s}-p{p}" for s, p in CASES])
def test_every_true_pair_of_a_silent_sender_is_listed(tmp_path: Path, seed: int, page_size: int, damage: str) -> None:
    sim, out = _incident(tmp_path, seed, page_size, damage)
    run = investigate(sim / "bundle", out)
    assert run.exit_code == 0, run.error
    truth = Truth(sim)
    f = measure(truth, Damage(damage, "pages/prefill-0", "pages", damage), run, None)
    assert f.pairs_total
    assert not f.pairs_missing, f"{len(f.pairs_missing)} of {f.pairs_total} true pairs unlisted: {f.pairs_missing[:3]}"
    assert not f.false_confirmed and not f.exposed_missing
    con = open_db(out / "incident.duckdb")
    try:
        rows = con.execute("""SELECT s.node, count(*) AS sources,
                (SELECT count(DISTINCT room) FROM page_events p WHERE p.node = s.node) AS rooms
            FROM sender_sources s GROUP BY s.node, s.recipient_room""").fetchall()
    finally:
        con.close()
    assert rows, "the silent sender's receivers list sender sources"
    # a recipient's list: the rooms that held its read slots between their last proven write and the read
    for node, sources, rooms in rows:
        assert sources <= rooms // 4, (node, sources, rooms)
    mean = sum(r[1] for r in rows) / len(rows)
    print(f"{damage} seed {seed} page {page_size}: {len(rows)} recipients, mean {mean:.1f} sources, "
          f"max {max(r[1] for r in rows)}, of {max(r[2] for r in rows)} rooms a node")  # fmt: skip
