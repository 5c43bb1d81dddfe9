"""The benchmark's replay peer agrees with `forensics investigate` on small generated bundles."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from forensics.pipeline import investigate
from forensics.simulate.pages import PageEvents, generate
from forensics.simulate.pages.uniform import EVENTS_PER_REQUEST
from tests import support

BENCH = support.BENCH


_module = support.bench_module


def _uniform(out: Path, requests: int, seed: int, nodes: int, chunk: int, rate: float = 0.01, page: int = 64) -> None:
    """A `forensics simulate --scale --page-events uniform` bundle in OUT (its summary in OUT/truth)."""
    opts = PageEvents("uniform", requests=requests, seed=seed, decode_nodes=nodes, placeholder_rate=rate, chunk=chunk)
    generate(out, replace(opts, page_size=page))


peer = _module("replay_peer")


def _pairs(rows) -> dict[tuple[int, int, str], int]:
    return {(int(r["recipient_room"]), int(r["source_room"]), r["kind"]): int(r["slots"]) for r in rows}


@pytest.mark.parametrize("requests,nodes,chunk", [(300, 1, 400_000), (400, 2, 90)])
def test_peer_matches_investigate(tmp_path: Path, requests: int, nodes: int, chunk: int):
    _uniform(tmp_path, requests, 3, nodes, chunk, rate=0.02)
    meta = json.loads((tmp_path / "truth" / "summary.json").read_text())
    assert meta["events"] == requests * EVENTS_PER_REQUEST and meta["placeholders"] > 0
    investigate(tmp_path / "bundle", tmp_path / "out")
    with (tmp_path / "out" / "exposures.csv").open() as f:
        engine = _pairs(csv.DictReader(f))
    exposures, hazards, events = peer.replay(tmp_path / "bundle")
    assert events == meta["events"]
    mine = {(rec, src, peer.KINDS[k]): slots for (_node, rec, src, k), slots in exposures.items()}
    assert engine, "the generated bundle should hold exposures"
    assert mine == engine
    assert len(hazards) == meta["placeholders"]  # each placeholder read also reaches never-written slots


def test_generator_is_valid(tmp_path: Path):
    """seq contiguous, ts monotone per node, and no slot held by two requests at once."""
    import numpy as np
    import pyarrow.parquet as pq

    _uniform(tmp_path, 500, 5, 2, 70)
    for f in sorted((tmp_path / "bundle" / "pages").glob("*.parquet")):
        t = pq.read_table(f)
        seq = t["seq"].to_numpy()
        assert (seq == np.arange(1, len(seq) + 1)).all()
        ts = t["ts"].cast("int64").to_numpy()
        assert (np.diff(ts) >= 0).all()
        held = np.zeros(int(t["end"].to_numpy().max()) + 1, np.int64)
        for op, room, s, e in zip(*(t[c].to_pylist() for c in ("op", "room", "start", "end")), strict=True):
            if op == "alloc":
                assert not held[s:e].any(), f"{f.name}: slots {s}..{e} allocated twice"
                held[s:e] = room
            elif op == "free":
                assert (held[s:e] == room).all()
                held[s:e] = 0
