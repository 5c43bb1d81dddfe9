"""The vectorized numpy peer gives the same exposures and hazards as the per-event replay peer and
`forensics investigate`, on generated bundles and on a hand-built tiny bundle."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forensics.contract import PAGE_SCHEMA
from forensics.pipeline import investigate
from forensics.simulate.pages import PageEvents, generate
from tests import support

BENCH = support.BENCH


_module = support.bench_module


def _uniform(out: Path, requests: int, seed: int, nodes: int, chunk: int, rate: float = 0.01, page: int = 64) -> None:
    """A `forensics simulate --scale --page-events uniform` bundle in OUT (its summary in OUT/truth)."""
    opts = PageEvents("uniform", requests=requests, seed=seed, decode_nodes=nodes, placeholder_rate=rate, chunk=chunk)
    generate(out, replace(opts, page_size=page))


peer = _module("replay_peer")
npeer = _module("numpy_peer")
STALE, FOREIGN = peer.STALE, peer.FOREIGN


def _engine_pairs(out: Path) -> dict[tuple[int, int, str], int]:
    with (out / "exposures.csv").open() as f:
        return {
            (int(r["recipient_room"]), int(r["source_room"]), r["kind"]): int(r["slots"]) for r in csv.DictReader(f)
        }


def _pairs(exposures: dict) -> dict[tuple[int, int, str], int]:
    out: dict = {}
    for (_node, rec, src, k), slots in exposures.items():
        out[(rec, src, npeer.KINDS[k])] = out.get((rec, src, npeer.KINDS[k]), 0) + slots
    return out


@pytest.mark.parametrize(
    "seed,requests,nodes,chunk,page,rate",
    [
        (3, 300, 1, 400_000, 64, 0.02),
        (11, 500, 2, 90, 64, 0.03),
        (5, 700, 3, 150, 16, 0.02),
        (8, 400, 2, 400_000, 128, 0.05),
    ],
)
def test_matches_replay_peer_and_investigate(
    tmp_path: Path, seed: int, requests: int, nodes: int, chunk: int, page: int, rate: float
):
    _uniform(tmp_path, requests, seed, nodes, chunk, rate=rate, page=page)
    meta = json.loads((tmp_path / "truth" / "summary.json").read_text())
    assert meta["placeholders"] > 0
    bundle = tmp_path / "bundle"
    stats: dict = {}
    exposures, hazards, events = npeer.replay(bundle, stats=stats)
    ref_exposures, ref_hazards, ref_events = peer.replay(bundle)
    assert events == ref_events == meta["events"]
    assert exposures and exposures == ref_exposures
    assert hazards == ref_hazards and len(hazards) == meta["placeholders"]
    assert stats["expansion"] >= events  # every slot-holding event covers at least one segment
    investigate(bundle, tmp_path / "out")
    assert _pairs(exposures) == _engine_pairs(tmp_path / "out")


@pytest.mark.parametrize("max_chunk,pairs", [(1, 10**9), (37, 50), (1000, 10**9), (1000, 7)])
def test_chunked_path_gives_the_same_answer(tmp_path: Path, monkeypatch, max_chunk: int, pairs: int):
    _uniform(tmp_path, 600, 21, 2, 200, rate=0.03)
    bundle = tmp_path / "bundle"
    whole: dict = {}
    ref = npeer.replay(bundle, max_chunk=10**12, stats=whole)
    monkeypatch.setattr(npeer, "PAIRS", pairs)  # (event, chunk) pairs built per block of chunks
    small: dict = {}
    got = npeer.replay(bundle, max_chunk=max_chunk, stats=small)
    assert whole["chunks"] == 4  # one chunk per node
    assert small["chunks"] > 4 * 5 and small["expansion"] == whole["expansion"]
    # a chunk holds whole segments: at most max_chunk entries plus the last segment's history
    assert small["peak_chunk"] < max_chunk + whole["peak_chunk"] and small["peak_chunk"] < whole["peak_chunk"]
    # a block of chunks: under `pairs` (event, chunk) pairs plus its last chunk's events
    assert 0 < small["peak_pairs"] < pairs + small["peak_chunk"]
    assert got == ref == peer.replay(bundle)


# --- a hand-built bundle ---------------------------------------------------------------------------

A, B, C, D, E, F, G, H = 11, 22, 33, 44, 55, 66, 77, 88
T0 = np.datetime64("2026-08-27T00:00:00", "us")

# (ts us, op, room, start, end, peer); seq is the order within a node
DECODE = [
    (100, "alloc", A, 0, 64, None),
    (110, "write", A, 0, 50, None),
    (120, "read", A, 0, 40, None),  # A bound to 0..40
    (130, "write", B, 30, 50, None),  # into A's bound 30..40: foreign_write (A, B) 10
    (140, "free", A, 0, 64, None),
    (150, "alloc", C, 0, 64, None),
    (160, "read", C, 0, 60, None),  # partial page: A's 0..30 and B's 30..50 stale, 50..60 never written
    (170, "alloc", D, 64, 128, None),
    (175, "share", D, 64, 100, None),  # D bound to 64..100; E's transfer lands right after this
    (180, "read", D, 64, 128, None),  # E's landing 64..96 after D's alloc: foreign_write 32; 96..128 blank
    (190, "write", C, 55, 70, None),  # 55..60 C's own binding, 60..64 unbound, 64..70 D's: foreign (D, C) 6
    (200, "alloc", G, 200, 264, None),
    (210, "write", H, 200, 232, None),  # after G's alloc, G not yet bound: nothing now
    (220, "read", G, 200, 264, None),  # foreign_write (G, H) 32, 232..264 never written
    (230, "free", G, 200, 264, None),
    (240, "write", H, 200, 264, None),  # G freed: no longer bound, nothing
    (250, "share", A, 0, 8, None),  # share by A of C's slots: sanctioned, no exposure
    (260, "write", E, 4, 6, None),  # into A's share binding: foreign_write (A, E) 2
    (270, "write", A, 0, 0, None),  # empty range: ignored
    (280, "read", A, 0, 4, None),  # slots 0..4 still hold A's own write (at 110): nothing
]
PREFILL = [
    (50, "alloc", E, 0, 32, None),
    (60, "write", E, 0, 32, None),
    (70, "read", E, 0, 32, None),
    (80, "alloc", F, 64, 96, None),
    (177, "transfer", E, 64, 96, "decode-0"),  # lands on decode-0 at 64..96; inert in prefill's pool
    (178, "free", E, 0, 32, None),
    (190, "read", F, 64, 96, None),  # never written here (the transfer record wrote nothing): hazard 32
]
EXPECTED = {
    ("decode-0", A, B, FOREIGN): 10,
    ("decode-0", C, A, STALE): 30,
    ("decode-0", C, B, STALE): 20,
    ("decode-0", D, E, FOREIGN): 32 + 32,  # the landing into D's share binding, then D's read
    ("decode-0", D, C, FOREIGN): 6,
    ("decode-0", G, H, FOREIGN): 32,
    ("decode-0", A, E, FOREIGN): 2,
}
EXPECTED_HAZARDS = {("decode-0", C): 10, ("decode-0", D): 32, ("decode-0", G): 32, ("prefill-0", F): 32}


def _tiny_bundle(root: Path, nodes=(("decode-0", DECODE), ("prefill-0", PREFILL))) -> Path:
    pages = root / "bundle" / "pages"
    pages.mkdir(parents=True)
    for node, rows in nodes:
        n = len(rows)
        order = np.random.default_rng(len(node)).permutation(n)  # rows need not be stored in seq order
        ts, op, room, start, end, peer_ = (list(c) for c in zip(*(rows[i] for i in order), strict=True))
        table = pa.Table.from_arrays(
            [
                pa.array([node] * n),
                pa.array((order + 1).astype(np.int64)),
                pa.array(T0 + np.array(ts, "timedelta64[us]"), pa.timestamp("us", tz="UTC")),
                pa.array(op),
                pa.array(room, pa.int64()),
                pa.array(start, pa.int64()),
                pa.array(end, pa.int64()),
                pa.array(peer_, pa.string()),
                pa.array([None] * n, pa.string()),
            ],
            schema=PAGE_SCHEMA,
        )
        pq.write_table(table, pages / f"{node}.parquet")
    return root / "bundle"


@pytest.mark.parametrize("max_chunk", [npeer.MAX_CHUNK, 1, 5])
def test_hand_built_bundle(tmp_path: Path, max_chunk: int):
    bundle = _tiny_bundle(tmp_path)
    exposures, hazards, events = npeer.replay(bundle, max_chunk=max_chunk)
    assert events == len(DECODE) + len(PREFILL)
    assert exposures == EXPECTED
    assert hazards == EXPECTED_HAZARDS
    assert peer.replay(bundle) == (EXPECTED, EXPECTED_HAZARDS, events)


def test_cli(tmp_path: Path, capsys):
    bundle = _tiny_bundle(tmp_path)
    assert npeer.main([str(bundle), "--out", str(tmp_path / "n.csv")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["events"] == len(DECODE) + len(PREFILL)
    assert summary["exposure_pairs"] == len(EXPECTED) and summary["hazard_reads"] == len(EXPECTED_HAZARDS)
    peer.main([str(bundle), "--out", str(tmp_path / "r.csv")])
    assert (tmp_path / "n.csv").read_text() == (tmp_path / "r.csv").read_text()


def test_room_zero_follows_replay_peer(tmp_path: Path):
    """Room 0 stands for "nobody" in replay_peer's arrays; the numpy peer keeps its quirks exactly."""
    rows = [
        (10, "alloc", 0, 0, 64, None),
        (20, "write", 0, 0, 16, None),  # a write by room 0 reads as never-written
        (30, "write", A, 16, 32, None),
        (40, "read", 0, 0, 48, None),  # finds A's KV: its blank slots 0..16 and 32..48 count as hazards
        (50, "read", 0, 48, 64, None),  # all blank: room 0's own, no hazard
        (60, "write", B, 40, 56, None),  # room 0 as the bound reader binds nobody
        (70, "read", C, 0, 64, None),
    ]
    bundle = _tiny_bundle(tmp_path, (("decode-0", rows),))
    ref = peer.replay(bundle)
    assert ref[1][("decode-0", 0)] == 32 and ref[0][("decode-0", 0, A, FOREIGN)] == 16
    for max_chunk in (npeer.MAX_CHUNK, 1, 3):
        assert npeer.replay(bundle, max_chunk=max_chunk) == ref
