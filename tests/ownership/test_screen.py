"""Issue #7: the screening pass (forensics.ownership.steps.screen) decides which rooms get the detailed replay.

Two things must hold: the compiled run-map walk computes exactly the flags its rules define (checked
against a slot-by-slot model), and screening never changes an answer: on simulated incidents with
placeholders, aborted transfers, shares, seq gaps and a replay window, every findings table is the
same as with every room replayed, and every room the full replay has anything to say about was
screened in."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from forensics.intake import Window
from forensics.ownership import Execution
from forensics.ownership.steps.screen import RunMap, screen_events
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings


def slot_model(opc, room, start, end) -> tuple[np.ndarray, list[tuple[int, int, int, int]]]:
    """The screening rules, one slot at a time (no runs, no bitsets): the flags, and for each flagged
    read its maximal runs of one last write (event, start, end, write event or -1)."""
    flag = np.zeros(len(opc), dtype=bool)
    hold: dict[int, int] = {}
    wrote: dict[int, int] = {}
    shared: set[int] = set()
    prov: list[tuple[int, int, int, int]] = []
    for i, (op, r, a, b) in enumerate(zip(opc, room, start, end, strict=True)):
        for s in range(a, b):
            h, w = hold.get(s, -1), wrote.get(s, -1)
            held = h >= 0 and room[h] == r
            if s in shared:
                flag[i] = True
                if h >= 0:
                    flag[h] = True
            if op == 0:  # alloc
                if h >= 0 and not held:
                    flag[i] = flag[h] = True
                    shared.add(s)
                hold[s] = i
            elif op == 1:  # free
                if held:
                    hold[s] = -1
                else:
                    flag[i] = True
                    if h >= 0:
                        flag[h] = True
            elif op <= 3:  # write, xfer
                if not held:
                    flag[i] = True
                    if h >= 0:
                        flag[h] = True
                wrote[s] = i
            elif not (held and w > h and room[w] == r):  # read, share
                flag[i] = True
        if op >= 4 and flag[i] and b > a:
            for s in range(a, b):
                w = wrote.get(s, -1)
                if s > a and prov[-1][3] == w:
                    prov[-1] = (i, prov[-1][1], s + 1, w)
                else:
                    prov.append((i, s, s + 1, w))
    return flag, prov


def tidy_stream(rng: np.random.Generator, rooms: int, blocks: int, mess: float):
    """Rooms that behave (alloc, write, read, free of one range in a free block of 40 slots; blocks
    are reused, so rooms allocate slots that still hold older rooms' data), with a share `mess` of
    random events mixed in: without mess nothing may be flagged, with it some but not all."""
    ev = []
    live: list[tuple[int, int, int, int, int]] = []  # room, block, a, b, stage
    free_blocks = list(range(blocks))
    next_room = 0
    while next_room < rooms or live:
        if live and (next_room >= rooms or not free_blocks or rng.random() < 0.5):
            j = int(rng.integers(len(live)))
            r, blk, a, b, stage = live[j]
            ev.append(((2, 4, 1)[stage], r, a, b))
            if stage == 2:
                live.pop(j)
                free_blocks.append(blk)
            else:
                live[j] = (r, blk, a, b, stage + 1)
        else:
            blk = free_blocks.pop(int(rng.integers(len(free_blocks))))
            a = blk * 40 + int(rng.integers(0, 10))
            b = a + int(rng.integers(1, 30))
            ev.append((0, next_room, a, b))
            live.append((next_room, blk, a, b, 0))
            next_room += 1
        if rng.random() < mess:
            a = int(rng.integers(0, blocks * 40 - 1))
            ev.append((int(rng.integers(0, 6)), int(rng.integers(0, rooms)), a, int(rng.integers(a + 1, a + 60))))
    cols = list(zip(*ev, strict=True))
    return tuple(np.array(c, dtype=t) for c, t in zip(cols, (np.int8, np.int64, np.int64, np.int64), strict=True))


@pytest.mark.parametrize("seed", range(12))
def test_run_map_walk_matches_the_slot_model(seed: int) -> None:
    rng = np.random.default_rng(seed)
    if seed % 3 == 0:  # random events over few rooms: many splits and merges
        n, slots = int(rng.integers(1, 300)), int(rng.integers(2, 900))
        opc = rng.integers(0, 6, n).astype(np.int8)
        room = rng.integers(0, int(rng.integers(1, 6)), n).astype(np.int64)
        start = rng.integers(0, slots - 1, n).astype(np.int64)
        end = np.minimum(start + rng.integers(1, 200, n), slots).astype(np.int64)
    else:
        opc, room, start, end = tidy_stream(
            rng, rooms=200, blocks=int(rng.integers(3, 40)), mess=0.0 if seed % 3 == 1 else 0.03
        )
        slots = int(end.max())
    want, want_prov = slot_model(opc, room, start, end)
    # the walk in chunks (the run map carries over) with small buffers (it stops and resumes); some
    # of each chunk's events come as a side stream (as landed transfers do), merged by key in the walk
    runmap = RunMap(slots + 1)
    k = np.arange(len(opc), dtype=np.int64)
    cuts = sorted({0, len(opc), *rng.integers(0, len(opc) + 1, 3).tolist()})
    side = rng.random(len(opc)) < [0.0, 0.3, 0.9][seed % 4 % 3]
    rooms, prov = [], []
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        cols = [c[lo:hi] for c in (k, opc, room, start, end)]
        own = [c[~side[lo:hi]] for c in cols]
        f, p = screen_events(*own, runmap, buffer=1, side=tuple(c[side[lo:hi]] for c in cols))
        rooms.append(f)
        prov.append(p)
    got = np.unique(np.concatenate(rooms))
    assert got.tolist() == sorted(set(room[want].tolist()))
    assert [tuple(r) for r in np.concatenate(prov).tolist()] == [tuple(r) for r in want_prov]
    if seed % 3 == 1:  # tidy streams without mess: nothing to flag
        assert not want.any()
    if seed % 3 == 2:
        assert 0 < len(got) < len(set(room.tolist()))


FINDINGS = {
    "affected_responses": "SELECT * FROM affected_responses",
    "exposures": "SELECT * FROM exposures",
    "hazards": "SELECT * FROM hazards",
    "read_provenance": "SELECT * FROM read_provenance",
    "write_effects": "SELECT * FROM write_effects",
    "room_flags": "SELECT * FROM room_flags",
    "accounts": "SELECT * FROM accounts",
    "history_found": "SELECT * FROM history_found",
    "history_open": "SELECT * FROM history_open",
    # the join keeps every pair overlapping in time; its readers keep the pairs that overlap in slots
    "alloc_overlaps": """SELECT * FROM alloc_overlaps
                         WHERE h_node = node AND h_room <> room AND h_start < x_end AND h_end > x_start""",
    "anomalous_writes": "SELECT * FROM anomalous_writes",
    "room_injected": "SELECT * FROM room_injected",
}

CASES = {
    "incident": dict(preset="incident", seed=5, requests=700),
    "slots": dict(preset="default", seed=3, requests=500, page_size=1),
    "gaps": dict(preset="incident", seed=7, requests=700, page_size=16, gap_node="decode-0", gap_events=30),
    "window": dict(preset="incident", seed=9, requests=700),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_screened_replay_gives_the_full_answer(tmp_path: Path, case: str) -> None:
    cfg = dict(CASES[case])
    simulate(tmp_path / "sim", build_config(cfg.pop("preset"), **cfg))
    bundle = tmp_path / "sim" / "bundle"
    window = None
    if case == "window":  # start the replay part way through: reads of slots written before it
        full_ts = Findings(bundle).rows("SELECT quantile_disc(ts, 0.4) FROM page_events")[0][0]
        window = Window(since=full_ts)
    full = Findings(bundle, Execution(screen=False), window)
    screened = Findings(bundle, Execution(screen=True), window)
    for name, q in FINDINGS.items():
        assert sorted(screened.rows(q), key=repr) == sorted(full.rows(q), key=repr), name
    assert full.rows("SELECT count(*) FROM exposures")[0][0] > 0
    # the screened room_state is the full one, restricted to the screened rooms ...
    scope = {tuple(r) for r in screened.rows("SELECT node, room FROM room_scope")}
    state = "SELECT * FROM room_state ORDER BY node, room, seg_start, k"
    assert screened.rows(state) == [r for r in full.rows(state) if (r[0], r[1]) in scope]
    # ... and leaves out the many rooms with nothing to report
    rooms = full.rows("SELECT count(DISTINCT (node, room)) FROM room_state")[0][0]
    assert 0 < len(scope) < rooms
    # every room any anomaly table of the full replay names is in scope
    named = full.rows(
        """SELECT node, room FROM read_provenance UNION SELECT node, holder FROM write_effects
           UNION SELECT node, room FROM hazards UNION SELECT node, room FROM anomalous_writes
           UNION SELECT node, holder FROM room_injected UNION SELECT node, room FROM hazards"""
    )
    assert named and {tuple(r) for r in named} <= scope


def test_page_files_out_of_seq_order_give_the_same_answer(tmp_path: Path) -> None:
    """Page files whose rows are not in seq order (shuffled): the seq checks notice and sort, the
    streams read in order; the findings do not change."""
    import pyarrow.parquet as pq

    simulate(tmp_path / "sim", build_config("incident", seed=5, requests=500))
    bundle = tmp_path / "sim" / "bundle"
    want = Findings(bundle)
    shuffled = tmp_path / "shuffled"
    shutil.copytree(bundle, shuffled)
    files = sorted((shuffled / "pages").rglob("*.parquet"))
    assert files
    rng = np.random.default_rng(0)
    for f in files:
        t = pq.read_table(f)
        pq.write_table(t.take(rng.permutation(t.num_rows)), f)
    got = Findings(shuffled)
    assert got.rows("SELECT count(*) FROM exposures")[0][0] > 0
    for name, q in FINDINGS.items():
        assert sorted(got.rows(q), key=repr) == sorted(want.rows(q), key=repr), name


@pytest.mark.parametrize("seed", range(6))
def test_room_marks_names_every_room_of_the_own_events_and_repeats_only_evicted_ones(seed: int) -> None:
    """room_marks over chunks: every room of an own event is written at least once, no room of only
    landed transfers (OP_XFER) is, and a room is written again only after another room took its place in
    the table (a table of 8 entries here, so that evictions happen)."""
    from forensics.keys import OP_XFER
    from forensics.ownership.kernels.room_marks import room_marks

    rng = np.random.default_rng(seed)
    n = 3_000
    room = rng.integers(0, [5, 40, 2_000, 1 << 62][seed % 4], size=n, dtype=np.int64)
    for i in np.flatnonzero(rng.random(n) < 0.4):  # runs: an event of the room just before
        room[i] = room[i - 1]
    opc = rng.integers(0, 6, size=n).astype(np.int8)
    opc[room % 7 == 3] = OP_XFER  # some rooms only ever land as transfers
    recent, used = np.zeros(8, dtype=np.int64), np.zeros(8, dtype=np.bool_)
    marks: list[int] = []
    for a, b in zip([0, 1, 700, 700, 2_000], [1, 700, 700, 2_000, n], strict=True):
        out = np.empty(b - a, dtype=np.int64)
        marks += out[: room_marks(opc[a:b], room[a:b], recent, used, out)].tolist()
    own = room[opc != OP_XFER]
    assert set(marks) == set(own.tolist())
    # a room is written again only when some other room was written in between (the one that took its slot)
    last: dict[int, int] = {}
    for i, r in enumerate(marks):
        if r in last:
            assert any(m != r for m in marks[last[r] + 1 : i])
        last[r] = i
    # back to back, a room is written once
    assert all(a != b for a, b in zip(marks, marks[1:], strict=False))
    assert len(marks) <= len(own)
