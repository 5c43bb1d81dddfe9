"""Page events (docs/evidence-bundle.md section 4) written by a background thread.

The scheduler's hot path appends one entry per call to a deque: no wake-up (the writer polls every
flush_ms), one uncontended lock for the seq numbers. An entry is one event (`ev`: a free, a transfer,
a prefill's alloc run) or a column chunk (`ev_cols`: the events of one op a batch makes, e.g. a decode
step's allocations or writes, one per request): the slot arrays the ledger has already computed, kept
as they are, so a decode step of 256 requests costs two appends, not 512 tuples. The writer thread
expands the entries into the rows of the bundle's page table (contract.page_columns), the same rows
one event at a time would give. When the deque already holds `queue` events an event is dropped, its
seq number is still used up, and the drop is counted and logged: the file then shows a seq jump,
which `forensics investigate` reports as a gap and reasons around (it never blocks the scheduler).
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
            if self.queued - self.taken >= self.limit:
                self._drop(self.seq)
                return
            self.queued += 1
            self.q.append((self.seq, 1, self.clock(), op, room, a, b, peer, src))

    def ev_cols(self, op: str, rooms: Any, starts: np.ndarray, ends: np.ndarray, src: str | None = None) -> None:
        """Events of one op at one time, [starts[i], ends[i]) of rooms[i] (or all of room `rooms`):
        one clock read, one append; the arrays are the caller's and must not change afterwards. What
        does not fit the queue is dropped as in ev."""
        n = len(starts)
        if not n:
            return
        with self._lock:
            base = self.seq
            self.seq += n
            k = max(0, min(n, self.limit - (self.queued - self.taken)))
            if k:
                if k < n:
                    starts, ends = starts[:k], ends[:k]
                    rooms = rooms if isinstance(rooms, int) else rooms[:k]
                self.queued += k
                self.q.append((base + 1, k, self.clock(), op, rooms, starts, ends, None, src))
            if k < n:
                self._drop(base + k + 1, base + n)

    def _drop(self, seq: int, last: int | None = None) -> None:
        last = seq if last is None else last
        self.dropped += last - seq + 1
        if self.gaps and self.gaps[-1][1] == seq - 1:
            self.gaps[-1] = (self.gaps[-1][0], last)
        else:
            self.gaps.append((seq, last))
            log.warning(
                "kv-forensics: page event queue full (%d events) on %s: events from seq %d on are dropped; "
                "the files show a seq gap there",
                self.limit,
                self.node,
                seq,
            )

    # --- writer thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(self.flush_s):
            self.drain()
        self.drain()

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
        self._write(cols)
        return n

    def _open(self) -> None:
        self._close_file()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path = self.dir / f"{self.node}-{stamp}-{len(self.files):05d}.{self.fmt}"
        self.files.append(path)
        self._in_file = 0
        if self.fmt == "jsonl":
            self._fh = path.open("a", encoding="utf-8")

    def _write(self, cols: list[np.ndarray]) -> None:
        i, n = 0, len(cols[0])
        while i < n:
            if self._in_file >= self.rotate or not self.files:
                self._open()
            k = min(n - i, self.rotate - self._in_file)
            part = [c[i : i + k] for c in cols]
            i += k
            self._in_file += k
            self.written += k
            if self.fmt == "jsonl":
                self._write_jsonl(part)
            else:
                self._write_parquet(part)

    def _write_jsonl(self, cols: list[np.ndarray]) -> None:
        assert self._fh is not None
        node = json.dumps(self.node)
        seq, ts, op, room, a, b, peer, src = (c.tolist() for c in cols)
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
        import pyarrow.parquet as pq

        from forensics.contract import PAGE_SCHEMA, page_columns

        table = page_columns(self.node, *cols)
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
        else:
            self.drain()
        self._close_file()


def columns(entries: list[Entry]) -> list[np.ndarray]:
    """The entries' events as columns (seq, ts, op, room, start, end, peer, src), in seq order (the
    transfer threads of a prefill node may append beside the scheduler)."""
    m = len(entries)
    counts = np.fromiter((e[1] for e in entries), np.int64, m)
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    seq = np.repeat(np.fromiter((e[0] for e in entries), np.int64, m) - offsets, counts) + np.arange(total)
    cols = [seq, np.repeat(np.fromiter((e[2] for e in entries), np.int64, m), counts)]
    cols.append(np.repeat(np.array([e[3] for e in entries], object), counts))
    for j in (4, 5, 6):
        if total == m:  # one event per entry: ints, or arrays of one
            cols.append(np.fromiter((_one(e[j]) for e in entries), np.int64, m))
        else:
            cols.append(np.concatenate([_piece(e[j], e[1]) for e in entries]))
    for j in (7, 8):
        cols.append(np.repeat(np.array([e[j] for e in entries], object), counts))
    if total > 1 and (np.diff(seq) < 0).any():
        order = np.argsort(seq, kind="stable")
        cols = [c[order] for c in cols]
    return cols


def _one(v: Any) -> int:
    return int(v[0]) if isinstance(v, np.ndarray) else int(v)


def _piece(v: Any, n: int) -> np.ndarray:
    if isinstance(v, np.ndarray):
        return v.astype(np.int64, copy=False)
    return np.full(n, v, np.int64)
