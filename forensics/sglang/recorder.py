"""Page events (docs/evidence-bundle.md section 4) written by a background thread.

The scheduler's hot path appends one entry per call to a deque: no wake-up (the writer polls every
flush_ms), one uncontended lock for the seq numbers. An entry is one event (`ev`: a free, a transfer,
a prefill's alloc run) or a column chunk (`ev_cols`: the events of one op a batch makes, e.g. a decode
step's allocations or writes, one per request): the slot arrays the ledger has already computed, kept
as they are, so a decode step of 256 requests costs two appends, not 512 tuples. The writer thread
expands the entries into the rows of the bundle's page table (contract.page_columns), the same rows
one event at a time would give. When the deque already holds `queue` events an event is dropped, its
seq number is still used up, and the drop is counted: the file then shows a seq jump, which
`forensics investigate` reports as a gap and reasons around (it never blocks the scheduler). The
engine's log says so once, at the first drop (logging.error, with the counts), and again at close with
the totals. A write that fails (a full disk, a folder gone) loses the events it held the same way: a
seq gap, counted, said once; the thread goes on with a new file. Should the thread end anyway, the
events after it are dropped and counted like those of a full queue, never queued where nobody reads.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("forensics.sglang")

# seq of the first event, events in it, ts µs, op, room, start, end, peer, src: room, start and end are
# ints (one event) or arrays of the chunk's events (room may stay an int: every event of one room)
Entry = tuple[int, int, int, str, Any, Any, Any, str | None, str | None]


def iso_us(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_us() -> int:
    return time.time_ns() // 1000


class Recorder:
    def __init__(
        self,
        out_dir: Path,
        node: str,
        fmt: str = "jsonl",
        queue: int = 65_536,
        rotate_events: int = 1_000_000,
        flush_ms: int = 50,
        clock=now_us,  # noqa: ANN001 (a callable returning µs since the epoch)
        seq_base: int = 0,
        start: bool = True,
    ) -> None:
        self.dir, self.node, self.fmt = Path(out_dir) / "pages", node, fmt
        self.dir.mkdir(parents=True, exist_ok=True)
        self.q: collections.deque[Entry] = collections.deque()
        # events queued and events taken by the writer (the queue's depth is the difference); the seq
        # numbers and `queued` are taken under a lock: a prefill node's transfer threads record its
        # transfers (update_status) beside the scheduler (uncontended, it costs one acquire per call)
        self.queued = self.taken = 0
        self._lock = threading.Lock()
        self.limit, self.rotate, self.flush_s = queue, rotate_events, flush_ms / 1000
        self.clock = clock
        self.seq = seq_base
        self.dropped = 0
        self.failed_writes = 0  # drains whose write raised (their events dropped, a seq gap)
        self.dead = False  # the writer thread ended before close(): every later event is dropped
        self._said = False  # the engine's log has had the first loss (one error line, not one per gap)
        self.gaps: list[tuple[int, int]] = []  # (first, last) seq of each run of dropped events
        self.written = 0
        self.files: list[Path] = []
        self._in_file = 0
        self._fh: Any = None
        self._pq: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kvf-pages", daemon=True)
        if start:
            self._thread.start()

    # --- hot path: the scheduler thread ------------------------------------------------------------
    def ev(self, op: str, room: int, a: int, b: int, peer: str | None = None, src: str | None = None) -> None:
        with self._lock:
            self.seq += 1
            if self.dead or self.queued - self.taken >= self.limit:
                self._drop(self.seq)
                return
            self.queued += 1
            self.q.append((self.seq, 1, self.clock(), op, room, a, b, peer, src))

    def ev_cols(self, op: str, rooms: Any, starts: np.ndarray, ends: np.ndarray, src: str | None = None,
                peer: str | None = None) -> None:  # fmt: skip
        """Events of one op at one time, [starts[i], ends[i]) of rooms[i] (or all of room `rooms`):
        one clock read, one append; the arrays are the caller's and must not change afterwards. What
        does not fit the queue is dropped as in ev."""
        n = len(starts)
        if not n:
            return
        with self._lock:
            base = self.seq
            self.seq += n
            k = 0 if self.dead else max(0, min(n, self.limit - (self.queued - self.taken)))
            if k:
                if k < n:
                    starts, ends = starts[:k], ends[:k]
                    rooms = rooms if np.ndim(rooms) == 0 else rooms[:k]
                self.queued += k
                self.q.append((base + 1, k, self.clock(), op, rooms, starts, ends, peer, src))
            if k < n:
                self._drop(base + k + 1, base + n)

    def _drop(self, seq: int, last: int | None = None, why: str = "") -> None:
        last = seq if last is None else last
        self.dropped += last - seq + 1
        if self.gaps and self.gaps[-1][1] == seq - 1:
            self.gaps[-1] = (self.gaps[-1][0], last)
        else:
            self.gaps.append((seq, last))
        if not self._said:
            self._said = True
            why = why or ("the writer thread has stopped" if self.dead else f"the queue is full ({self.limit} events)")
            log.error(
                "kv-forensics: page events lost on %s (%s): seq %d..%d, %d events dropped so far; the page "
                "files show a seq gap there (investigate makes the range's readers indeterminate). Later "
                "losses are counted, not logged again (totals at shutdown)",
                self.node,
                why,
                seq,
                last,
                self.dropped,
            )

    # --- writer thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stop.wait(self.flush_s):
                self.drain()
            self.drain()
        except BaseException:  # not a write's failure (drain keeps those): the thread is ending
            log.exception("kv-forensics: the page writer thread of %s stopped", self.node)
        finally:
            if not self._stop.is_set():
                with self._lock:  # from now on ev/ev_cols drop (counted, a seq gap), nothing queues
                    self.dead = True
                    rest = list(self.q)
                    self.q.clear()
                    self.taken = self.queued
                    for e in rest:
                        self._drop(e[0], e[0] + e[1] - 1, "the writer thread has stopped")

    def drain(self) -> int:
        out: list[Entry] = []
        q = self.q
        while q:
            out.append(q.popleft())
        if not out:
            return 0
        cols = columns(out)
        n = len(cols[0])
        self.taken += n
        try:
            self._write(cols)
        except Exception as err:  # noqa: BLE001 (a full disk, a folder removed: the events are lost, said)
            self.failed_writes += 1
            self._abandon_file()
            seqs = cols[0].tolist()
            with self._lock:
                for a, b in _spans(seqs):
                    self._drop(a, b, f"a write failed: {type(err).__name__}: {err}")
        return n

    def _open(self) -> None:
        self._close_file()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path = self.dir / f"{self.node}-{stamp}-{len(self.files):05d}.{self.fmt}"
        self.files.append(path)
        self._in_file = 0
        if self.fmt == "jsonl":
            self._fh = path.open("a", encoding="utf-8")

    def _abandon_file(self) -> None:
        """After a failed write: the file is closed as far as it can be, the next write opens another."""
        try:
            self._close_file()
        except Exception:  # noqa: BLE001 (the file's own failure: nothing more to save in it)
            self._fh = self._pq = None
        self._in_file = self.rotate

    def _write(self, cols: list[np.ndarray]) -> None:
        i, n = 0, len(cols[0])
        while i < n:
            if self._in_file >= self.rotate or not self.files:
                self._open()
            k = min(n - i, self.rotate - self._in_file)
            part = [c[i : i + k] for c in cols[:8]] + [cols[8]]
            i += k
            self._in_file += k
            if self.fmt == "jsonl":
                self._write_jsonl(part)
            else:
                self._write_parquet(part)
            self.written += k

    def _write_jsonl(self, cols: list[np.ndarray]) -> None:
        assert self._fh is not None
        node = json.dumps(self.node)
        seq, ts, room, a, b = (cols[j].tolist() for j in (0, 1, 3, 4, 5))
        names = cols[8]
        op, peer, src = ([names[c] for c in cols[j].tolist()] for j in (2, 6, 7))
        iso = {t: iso_us(t) for t in set(ts)}
        lines = []
        for s, t, o, r, x, y, p, c in zip(seq, ts, op, room, a, b, peer, src, strict=True):
            tail = f', "peer": {json.dumps(p)}' if p is not None else ""
            tail += f', "src": "{c}"' if c is not None else ""
            lines.append(f'{{"node": {node}, "seq": {s}, "ts": "{iso[t]}", "op": "{o}", "room": {r}, '
                         f'"start": {x}, "end": {y}{tail}}}\n')  # fmt: skip
        self._fh.write("".join(lines))
        self._fh.flush()

    def _write_parquet(self, cols: list[np.ndarray]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from forensics.contract import PAGE_SCHEMA

        # whole columns: the strings (op, peer, src) taken from the chunk's few names by their codes, no
        # Python object per event (this thread shares the GIL with the scheduler)
        names = pa.array(cols[8].tolist(), pa.string())
        n = len(cols[0])
        arrays = [pa.repeat(pa.scalar(self.node, pa.string()), n), pa.array(cols[0], pa.int64()),
                  pa.array(cols[1], pa.int64()).cast(pa.timestamp("us", tz="UTC")), pc.take(names, cols[2]),
                  *(pa.array(cols[j], pa.int64()) for j in (3, 4, 5)), pc.take(names, cols[6]),
                  pc.take(names, cols[7])]  # fmt: skip
        table = pa.table(arrays, schema=PAGE_SCHEMA)
        if self._pq is None:
            self._pq = pq.ParquetWriter(self.files[-1], PAGE_SCHEMA)
        self._pq.write_table(table)

    def _close_file(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._pq is not None:  # a Parquet file is readable only once its footer is written
            self._pq.close()
            self._pq = None

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        elif not self.dead:
            self.drain()
        try:
            self._close_file()
        except Exception:  # noqa: BLE001 (its last write failed: the seq gap and the count say so)
            self._fh = self._pq = None
        if self.dropped:
            log.error(
                "kv-forensics: %s lost %d page events in %d seq gaps (%d failed writes); %d written to %s",
                self.node,
                self.dropped,
                len(self.gaps),
                self.failed_writes,
                self.written,
                self.dir,
            )


def columns(entries: list[Entry]) -> list[np.ndarray]:
    """The entries' events as columns (seq, ts, op, room, start, end, peer, src, names), in seq order
    (the transfer threads of a prefill node may append beside the scheduler): op, peer and src are
    int32 codes into `names` (an object array of the strings and None), one per entry repeated."""
    m = len(entries)
    counts = np.fromiter((e[1] for e in entries), np.int64, m)
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    seq = np.repeat(np.fromiter((e[0] for e in entries), np.int64, m) - offsets, counts) + np.arange(total)
    code: dict[Any, int] = {}  # op, peer and src values (str or None), in first-seen order

    def codes(j: int) -> np.ndarray:
        return np.repeat(np.fromiter((code.setdefault(e[j], len(code)) for e in entries), np.int32, m), counts)

    cols = [seq, np.repeat(np.fromiter((e[2] for e in entries), np.int64, m), counts), codes(3)]
    for j in (4, 5, 6):
        if total == m:  # one event per entry: ints, or arrays of one
            cols.append(np.fromiter((_one(e[j]) for e in entries), np.int64, m))
        else:
            cols.append(np.concatenate([_piece(e[j], e[1]) for e in entries]))
    cols += [codes(7), codes(8)]
    if total > 1 and (np.diff(seq) < 0).any():
        order = np.argsort(seq, kind="stable")
        cols = [c[order] for c in cols]
    names = np.empty(len(code), object)
    names[:] = list(code)
    return [*cols, names]


def _spans(seqs: list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive numbers in a rising list, as (first, last)."""
    out: list[tuple[int, int]] = []
    for x in seqs:
        if out and out[-1][1] == x - 1:
            out[-1] = (out[-1][0], x)
        else:
            out.append((x, x))
    return out


def _one(v: Any) -> int:
    return int(v[0]) if isinstance(v, np.ndarray) else int(v)


def _piece(v: Any, n: int) -> np.ndarray:
    if isinstance(v, np.ndarray):
        return v.astype(np.int64, copy=False)
    return np.full(n, v, np.int64)
