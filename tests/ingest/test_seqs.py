"""Seq jumps kept from ingest's duplicate check equal those read again after ingest; when ingest
removed events (slots beyond the pool) they are read again, and the removed event shows as a jump."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import forensics.ingest.seqs as seqs
from forensics.db import run_query
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings


def gaps_again(run: Findings) -> list[tuple]:
    run.con.execute("DROP TABLE seq_jumps")
    seqs.store_seq_jumps(run.con, unchanged=False)  # read the final events' seqs again
    run_query(run.con, "ownership", "seq_gaps")
    return run.rows("SELECT * FROM seq_gaps ORDER BY ALL")


@pytest.mark.parametrize("gap_events", [0, 30])
def test_jumps_from_ingest_are_the_jumps_of_the_final_events(
    tmp_path: Path, gap_events: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = build_config("incident", seed=7, requests=300, gap_node="decode-0", gap_events=gap_events)
    simulate(tmp_path / "sim", cfg)
    reads = []
    node_seqs = seqs._node_seqs
    monkeypatch.setattr(seqs, "_node_seqs", lambda con: reads.append(1) or node_seqs(con))
    run = Findings(tmp_path / "sim" / "bundle")
    assert len(reads) == 1  # the seqs were read once, by ingest's duplicate check
    kept = run.rows("SELECT * FROM seq_gaps ORDER BY ALL")
    assert (len(kept) > 0) == (gap_events > 0)
    assert gaps_again(run) == kept


@pytest.mark.parametrize("seed", range(4))
def test_seq_scan_matches_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    seq = np.cumsum(rng.choice([0, 1, 1, 1, 2, 5], 5000)).astype(np.int64)  # repeats and jumps
    if seed % 2:
        seq = seq[rng.permutation(seq.size)]
    rising, repeat, at = seqs._scan(seq)
    d = np.diff(seq)
    assert rising == bool(np.all(d > 0))
    if rising or seed % 2 == 0:  # sorted input: repeats and jumps are exact
        assert repeat == bool(np.any(d == 0))
        assert at.tolist() == np.flatnonzero(d > 1).tolist()
    srt = np.sort(seq)
    _, repeat, at = seqs._scan(srt)
    assert repeat == bool(np.any(np.diff(srt) == 0)) and at.tolist() == np.flatnonzero(np.diff(srt) > 1).tolist()
    assert seqs._scan(np.arange(3, dtype=np.int64))[:2] == (True, False)
