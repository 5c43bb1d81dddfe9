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


def test_a_failed_write_is_a_seq_gap_said_once_and_the_writer_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder(tmp_path, "decode-0", "jsonl", start=False)
    rec.ev("alloc", 1, 0, 16)
    rec.drain()
    real = rec._write_jsonl
    fail = {"n": 2}

    def flaky(cols: list[np.ndarray]) -> None:
        if fail["n"]:
            fail["n"] -= 1
            raise OSError(28, "No space left on device")
        real(cols)

    monkeypatch.setattr(rec, "_write_jsonl", flaky)
    with caplog.at_level("ERROR", logger="forensics.sglang"):
        for seq_room in (2, 3):  # two drains whose writes fail: seqs 2-3, then 4
            rec.ev("write", seq_room, 0, 1, src="decode")
            if seq_room == 3:
                rec.ev("read", 3, 0, 1)
            rec.drain()
        rec.ev("free", 1, 0, 16)
        rec.close()
    assert rec.gaps == [(2, 4)] and rec.dropped == 3 and rec.failed_writes == 2
    assert [r[0] for r in rows(rec)] == [1, 5]  # the file shows the jump investigate reports
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 2  # the first loss (with its counts) and the totals at close
    assert "No space left on device" in errors[0] and "seq 2..2" in errors[0]
    assert "lost 3 page events in 1 seq gaps (2 failed writes); 2 written" in errors[1]


def test_a_dead_writer_drops_and_counts_instead_of_queueing_in_silence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder(tmp_path, "decode-0", "jsonl", flush_ms=1)

    def boom() -> int:
        raise MemoryError("writer")

    rec.drain = boom  # type: ignore[method-assign]
    with caplog.at_level("ERROR", logger="forensics.sglang"):
        rec.ev("alloc", 1, 0, 16)
        rec._thread.join(5)
        assert not rec._thread.is_alive() and rec.dead
        rec.ev_cols("write", 1, np.arange(4), np.arange(1, 5), src="decode")
        rec.ev("free", 1, 0, 16)
    assert rec.dropped == 6 and rec.gaps == [(1, 6)] and not rec.q
    assert sum("stopped" in r.getMessage() for r in caplog.records if r.levelname == "ERROR") == 2


def test_decode_steps_record_reads_of_the_slots_they_write(tmp_path: Path) -> None:
    """A decode step's output slot is attended by the room's next steps: its read is in the files
    (written once, at the step that writes it), so a late foreign write into it is a write into a
    slot the room reads."""
    from forensics.sglang.runtime import Runtime

    clock = itertools.count(T0, 10)
    rec = Recorder(tmp_path, "decode-0", "jsonl", clock=lambda: next(clock), start=False)
    rt = Runtime("decode-0", 1, rec, "off", clock=lambda: next(clock))
    for row, room, slots in ((0, 7, [0, 1, 2]), (1, 8, [3, 4])):
        rt.bind_row(row, room, f"r{room}")
        rt.on_alloc(np.array(slots))
        rt.on_row_write(row, np.array(slots))
    for step in range(2):  # two decode steps of both rooms: one new slot each
        out = np.array([10 + step, 20 + step])
        rt.on_alloc(out)
        rt.on_rows_write_batch(np.array([0, 1]), out)
        rt.on_batch(True, [7, 8], np.array([4 + step, 3 + step]), {}, out)
    rec.close()
    got = [(r[2], r[3], r[4]) for r in rows(rec) if r[2] in ("write", "read")]
    assert got == [("write", 7, 10), ("write", 8, 20), ("read", 7, 10), ("read", 8, 20),
                   ("write", 7, 11), ("write", 8, 21), ("read", 7, 11), ("read", 8, 21)]  # fmt: skip
