"""ownership.execution.streams: stored order checked chunk by chunk, paired with the rows of a sorted side
stream, and the sorted read taken from scratch when the stored order breaks; the screen uses the stored order on
simulated bundles (written in seq order) and falls back on shuffled ones with the same answer."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from forensics.ownership.execution.streams import OutOfOrder, alongside, in_order, rising
from forensics.ownership.steps.screen import screen_rooms
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings


def split(cols: list[np.ndarray], cuts: list[int]) -> list[list[np.ndarray]]:
    edges = [0, *cuts, cols[0].size]
    return [[c[a:b] for c in cols] for a, b in zip(edges[:-1], edges[1:], strict=True)]


@pytest.mark.parametrize("seed", range(8))
def test_alongside_pairs_each_chunk_with_the_side_rows_among_its_keys(seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = rng.choice(10_000, size=900, replace=False)
    side = rng.random(900) < [0.1, 0.5, 0.0, 0.95][seed % 4]
    own = np.sort(keys[~side])
    other = np.sort(keys[side])
    cuts = sorted(rng.choice(max(own.size, 1), size=rng.integers(0, 6), replace=True).tolist())
    stream = split([own, own * 3], cuts)
    pairs = list(alongside(rising(iter(stream)), [other, other * 3]))
    merged = [np.sort(np.concatenate([chunk[0], part[0]])) for chunk, part in pairs]
    got = np.concatenate(merged) if merged else np.empty(0)
    assert got.tolist() == sorted(keys.tolist())  # pair by pair, in order: the sorted union
    for chunk, part in pairs:
        assert (part[1] == part[0] * 3).all() and (chunk[1] == chunk[0] * 3).all()  # rows stay whole
        if chunk[0].size:  # the side rows of a chunk lie below its last key
            assert (part[0] < chunk[0][-1]).all()
    assert sum(part[0].size for _, part in pairs) == other.size


def test_rising_stops_at_the_first_key_out_of_order() -> None:
    with pytest.raises(OutOfOrder):
        list(rising(iter([[np.array([1, 2, 3])], [np.array([3, 4])]])))  # equal across chunks
    with pytest.raises(OutOfOrder):
        list(rising(iter([[np.array([1, 5, 4])]])))
    assert len(list(rising(iter([[np.array([1, 2])], [np.array([], dtype=np.int64)], [np.array([7])]])))) == 2


def test_in_order_starts_again_on_the_sorted_read() -> None:
    calls = []

    def walk(stream):
        calls.append("walk")
        return sum(int(c[0].sum()) for c in stream)

    def stored():
        return rising(iter([[np.array([1, 2])], [np.array([0])]]))

    def ordered():
        return iter([[np.array([0, 1, 2])]])

    assert in_order(walk, stored, ordered) == (3, False)
    assert calls == ["walk", "walk"]
    assert in_order(walk, ordered, stored) == (3, True)


def test_screen_walks_the_stored_order_and_falls_back_when_shuffled(tmp_path: Path) -> None:
    simulate(tmp_path / "sim", build_config("incident", seed=5, requests=400))
    bundle = tmp_path / "sim" / "bundle"
    run = Findings(bundle)
    scope = run.rows("SELECT * FROM room_scope ORDER BY ALL")
    prov = run.rows("SELECT * FROM screen_prov ORDER BY ALL")
    assert prov and all(screen_rooms(run.con).values())  # stored order, every node
    assert run.rows("SELECT * FROM room_scope ORDER BY ALL") == scope
    assert run.rows("SELECT * FROM screen_prov ORDER BY ALL") == prov
    shuffled = tmp_path / "shuffled"
    shutil.copytree(bundle, shuffled)
    files = sorted((shuffled / "pages").rglob("*.parquet"))
    for i, f in enumerate(files):
        t = pq.read_table(f)
        pq.write_table(t.take(np.random.default_rng(i).permutation(t.num_rows)), f)
    other = Findings(shuffled)
    stored = screen_rooms(other.con)
    assert files and not any(stored[f.stem] for f in files)  # the shuffled nodes needed the sorted read
    assert other.rows("SELECT * FROM room_scope ORDER BY ALL") == scope
    assert other.rows("SELECT * FROM screen_prov ORDER BY ALL") == prov
    # both walks noted the rooms of every node's own events (the sorted one skips the landed transfers)
    own = "SELECT DISTINCT node, room FROM page_events WHERE op <> 'transfer' ORDER BY ALL"
    noted = "SELECT DISTINCT node, room FROM node_own_rooms ORDER BY ALL"
    assert run.rows(noted) == run.rows(own) and len(run.rows(own)) > 100
    assert other.rows(noted) == other.rows(own)
