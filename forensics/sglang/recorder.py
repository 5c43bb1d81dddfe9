"""Page events (docs/evidence-bundle.md section 4) written by a background thread.

The scheduler's hot path only numbers an event and appends a tuple to a deque: no lock, no wake-up
(the writer polls every flush_ms). When the deque already holds `queue` events the event is dropped,
its seq number is still used up, and the drop is counted and logged: the file then shows a seq jump,
which `forensics investigate` reports as a gap and reasons around (it never blocks the scheduler).
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from datetime import UTC, datetime
from itertools import repeat
from pathlib import Path
from typing import Any

log = logging.getLogger("forensics.sglang")

Event = tuple[int, int, str, int, int, int, str | None, str | None]  # seq, ts µs, op, room, start, end, peer, src


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
        self.q: collections.deque[Event] = collections.deque()
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
        self.seq += 1
        if len(self.q) >= self.limit:
            self._drop(self.seq)
            return
        self.q.append((self.seq, self.clock(), op, room, a, b, peer, src))

    def ev_many(self, op: str, rooms: list[int], starts: list[int], ends: list[int], src: str | None = None) -> None:
        """Many events of one op at one time (a decode step's allocations or writes): one clock read,
        one deque extend; what does not fit the queue is dropped as in ev."""
        n = len(rooms)
        base = self.seq
        self.seq += n
        k = max(0, min(n, self.limit - len(self.q)))
        if k:
            ts = self.clock()
            self.q.extend(
                zip(
                    range(base + 1, base + k + 1),
                    repeat(ts, k),
                    repeat(op, k),
                    rooms[:k],
                    starts[:k],
                    ends[:k],
                    repeat(None, k),
                    repeat(src, k),
                    strict=False,
                )  # fmt: skip
            )
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
        out: list[Event] = []
        q = self.q
        while q:
            out.append(q.popleft())
        if out:
            self._write(out)
        return len(out)

    def _open(self) -> None:
        self._close_file()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path = self.dir / f"{self.node}-{stamp}-{len(self.files):05d}.{self.fmt}"
        self.files.append(path)
        self._in_file = 0
        if self.fmt == "jsonl":
            self._fh = path.open("a", encoding="utf-8")

    def _write(self, evs: list[Event]) -> None:
        i = 0
        while i < len(evs):
            if self._in_file >= self.rotate or not self.files:
                self._open()
            part = evs[i : i + self.rotate - self._in_file]
            i += len(part)
            self._in_file += len(part)
            self.written += len(part)
            if self.fmt == "jsonl":
                self._write_jsonl(part)
            else:
                self._write_parquet(part)

    def _write_jsonl(self, evs: list[Event]) -> None:
        assert self._fh is not None
        node = json.dumps(self.node)
        lines = []
        for seq, ts, op, room, a, b, peer, src in evs:
            tail = (f', "peer": {json.dumps(peer)}' if peer is not None else "") + (
                f', "src": "{src}"' if src is not None else ""
            )
            lines.append(
                f'{{"node": {node}, "seq": {seq}, "ts": "{iso_us(ts)}", "op": "{op}", "room": {room}, '
                f'"start": {a}, "end": {b}{tail}}}\n'
            )
        self._fh.write("".join(lines))
        self._fh.flush()

    def _write_parquet(self, evs: list[Event]) -> None:
        import pyarrow.parquet as pq

        from forensics.contract import PAGE_SCHEMA, page_table

        table = page_table(self.node, evs)
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
