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
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from forensics.sglang.pagefile import Entry, columns, iso_us, jsonl_text, now_us, parquet_table, spans

log = logging.getLogger("forensics.sglang")

__all__ = ["Recorder", "iso_us", "now_us"]


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
                for a, b in spans(seqs):
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
        self._fh.write(jsonl_text(self.node, cols))
        self._fh.flush()

    def _write_parquet(self, cols: list[np.ndarray]) -> None:
        import pyarrow.parquet as pq

        from forensics.contract import PAGE_SCHEMA

        table = parquet_table(self.node, cols)
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
