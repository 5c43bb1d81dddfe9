"""The recorder's column chunks (one entry per op per batch) give the rows one event at a time would:
the same seq numbers, times, rooms and ranges in both file formats, and a full queue drops the tail
of a chunk as a seq gap. The recorder imports nothing of SGLang: these run in any venv."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from forensics.sglang.recorder import Recorder, iso_us

T0 = 1_787_997_600_000_000


def rows(rec: Recorder) -> list[tuple]:
    out = []
    for f in rec.files:
        if f.suffix == ".parquet":
            for r in pq.read_table(f).to_pylist():
                out.append((r["seq"], iso_us(int(r["ts"].timestamp() * 1e6)), r["op"], r["room"], r["start"],
                            r["end"], r["peer"], r["src"]))  # fmt: skip
        else:
            for line in f.read_text().splitlines():
                r = json.loads(line)
                out.append((r["seq"], r["ts"], r["op"], r["room"], r["start"], r["end"], r.get("peer"), r.get("src")))
    return out


def feed(rec: Recorder, chunked: bool) -> None:
    rooms, slots = np.array([7, 8, 9]), np.array([100, 40, 41])
    rec.ev("alloc", 7, 0, 16)
    if chunked:
        rec.ev_cols("alloc", rooms, slots, slots + 1)
        rec.ev_cols("write", rooms, slots, slots + 1, src="decode")
        rec.ev_cols("free", 8, np.array([40, 60]), np.array([42, 64]))
    else:
        for op, src in (("alloc", None), ("write", "decode")):
            for r, s in zip(rooms.tolist(), slots.tolist(), strict=True):
                rec.ev(op, r, s, s + 1, src=src)
        rec.ev("free", 8, 40, 42)
        rec.ev("free", 8, 60, 64)
    rec.ev("transfer", 7, 0, 16, peer="decode-1")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_column_chunks_give_the_rows_of_single_events(tmp_path: Path, fmt: str) -> None:
    got = {}
    for chunked in (False, True):
        clock = itertools.count(T0, 10)
        rec = Recorder(tmp_path / str(chunked), "decode-0", fmt, rotate_events=4, clock=lambda c=clock: next(c),
                       start=False)  # fmt: skip
        feed(rec, chunked)
        rec.close()
        got[chunked] = rows(rec)
        assert [r[0] for r in got[chunked]] == list(range(1, 11)) and len(rec.files) == 3  # rotated every 4
    single, chunked_rows = got[False], got[True]
    # one clock read per chunk: the chunk's events share its time, single events each take one
    assert [r[:1] + r[2:] for r in chunked_rows] == [r[:1] + r[2:] for r in single]
    assert chunked_rows[1][1] == chunked_rows[3][1] != chunked_rows[4][1]
    assert chunked_rows[3][2:] == ("alloc", 9, 41, 42, None, None)
    assert chunked_rows[5][2:] == ("write", 8, 40, 41, None, "decode")
    assert chunked_rows[8][2:] == ("free", 8, 60, 64, None, None)
    assert chunked_rows[9][2:] == ("transfer", 7, 0, 16, "decode-1", None)


def test_a_full_queue_drops_a_chunks_tail_as_a_seq_gap(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, "decode-0", "parquet", queue=5, start=False)
    s = np.arange(10, 18)
    rec.ev("alloc", 1, 0, 8)
    rec.ev_cols("alloc", np.arange(8), s, s + 1)  # 4 of 8 fit
    rec.ev_cols("write", 3, s, s + 1)  # none fit
    assert rec.dropped == 12 and rec.gaps == [(6, 17)]
    rec.drain()
    rec.ev_cols("write", np.arange(5), s[:5], s[:5] + 1)  # the queue drained: all 5 fit
    rec.close()
    seqs = [r[0] for r in rows(rec)]
    assert seqs == [1, 2, 3, 4, 5, *range(18, 23)] and rec.gaps == [(6, 17)]
    assert [r[3] for r in rows(rec)][1:5] == [0, 1, 2, 3]
