"""One engine process's view: who holds each KV slot, who last wrote it, and the page events.

The SGLang hooks (forensics.sglang.hooks) translate the engine's calls into the few methods below;
nothing here imports SGLang, so the ledger's logic and cost are the same on every release.

Attribution: a slot is "fresh" from its allocation until a request's row names it (forensics.sglang.rows).
The ledger (numpy arrays, one entry per slot: holder, alloc tick, writer, write tick, reader) answers
the guard's question before a decode batch runs: does every slot a request attends hold KV that
request wrote (or that the radix cache shared to it) since it allocated the slot? (forensics.sglang.checks)

What a decode node learns of a transfer is what the protocol delivers (forensics.sglang.landing): the
destination it publishes, the Success commit with the prompt length the plugin on prefill writes into
the metadata row (those pages count as the room's writes; without it the room is `unproven`), and the
end of an aborted room's transfer. The guard first checks a request at its commit, before any forward
pass (admit); a page an unfinished transfer may still write refuses its next holder (`in_flight`).
In-process landings (`peers`: the tests' simulator driver) still reach on_landed.
Each prefill rank's terminal status ends a room's transfer (on_prefill_status: 0.5.23's
apply_prefill_status; 0.5.11's decode thread, whose socket the plugin taps). A refusal found only at a
later batch (in-process landings, fail-closed) still runs that batch, its output dropped
(finish_with_error).
The guard alerts once per room (a flagged room's later batches are flagged to enforce, not alerted).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from forensics.sglang import alerts, checks, landing
from forensics.sglang.checks import Violation
from forensics.sglang.landing import Landings
from forensics.sglang.recorder import Recorder
from forensics.sglang.rows import row_write, rows_write_batch
from forensics.sglang.runs import NONE, run_cols, runs_of

__all__ = ["Runtime", "Stats", "Violation"]


@dataclass
class Stats:
    allocated_pages: int = 0
    batches: int = 0
    violations: int = 0
    enforced: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class Runtime:
    def __init__(
        self,
        node: str,
        page_size: int,
        recorder: Recorder | None,
        guard: str = "observe",
        alerts: Path | None = None,
        metrics: Path | None = None,
        clock: Callable[[], int] | None = None,
        role: str = "decode",
        slots: int = 1 << 16,
    ) -> None:
        self.node, self.ps, self.rec, self.guard, self.role = node, page_size, recorder, guard, role
        self.alerts_path, self.metrics_path = alerts, metrics
        self.clock = clock or (lambda: time.time_ns() // 1000)
        self.tick = 0
        n = slots  # the ledger's first size (the pool's, where known: hooks.from_config); it grows past it
        self.holder = np.full(n, NONE, np.int64)
        self.atick = np.zeros(n, np.int64)
        self.writer = np.full(n, NONE, np.int64)
        self.wtick = np.zeros(n, np.int64)
        self.reader = np.full(n, NONE, np.int64)
        self.fresh = np.zeros(n, bool)
        self.mark = np.zeros(n, np.int64)  # scratch: a batch's attended slots, to find one attended twice
        self.shared: dict[int, set[int]] = {}  # room -> slots the radix cache shared to it
        self.rows: dict[int, tuple[int, str]] = {}  # req_to_token row -> (room, rid)
        self.row_room = np.full(1 << 12, NONE, np.int64)  # the same rooms, by row, for a batch's rows at once
        self.stats = Stats()
        self.alerted: set[int] = set()  # rooms already alerted (one alert line per room)
        # row -> positions already checked and read, and the room they were checked for: a later batch
        # of that room checks only the positions past it; a write into the room's slots by someone
        # else (a landing) sets them back to 0
        self.checked = np.zeros(len(self.row_room), np.int64)
        self.checked_room = np.full(len(self.row_room), NONE, np.int64)
        self.peers: dict[str, Runtime] = {}  # in-process receivers (tests, single-host setups)
        self.land = Landings()  # decode: what the transfer protocol says of each room (landing.py)
        self.unproven: set[int] = set()  # rooms committed without the transferred length
        self.lock = threading.Lock()  # the transfer threads of a prefill node call in beside the scheduler

    # --- arrays -------------------------------------------------------------------------------------
    def _grow(self, top: int) -> None:
        n = len(self.holder)
        if top < n:
            return
        m = max(top + 1, 2 * n)
        for name, fill in (("holder", NONE), ("atick", 0), ("writer", NONE), ("wtick", 0), ("reader", NONE)):
            old = getattr(self, name)
            new = np.full(m, fill, old.dtype)
            new[:n] = old
            setattr(self, name, new)
        f = np.zeros(m, bool)
        f[:n] = self.fresh
        self.fresh = f
        self.mark = np.zeros(m, np.int64)

    def _page_slots(self, slots: np.ndarray) -> np.ndarray:
        """Every slot of the pages `slots` touch, pages in first-touch order."""
        if self.ps == 1:
            return slots
        pages = slots // self.ps
        _, first = np.unique(pages, return_index=True)
        pages = pages[np.sort(first)]
        return (pages[:, None] * self.ps + np.arange(self.ps)).ravel()

    # --- allocator ----------------------------------------------------------------------------------
    def on_alloc(self, slots: np.ndarray) -> None:
        if slots.size == 0:
            return
        ps = self.ps
        if ps == 1:
            self._grow(int(slots.max()))
            self.fresh[slots] = True
            return
        # alloc_extend / alloc_decode hand out the rest of a request's last page too: that page is the
        # request's already, only new pages are fresh. A page has one holder (rows and frees take whole
        # pages), so its first slot answers for it: the holder is read once per slot handed out, and
        # only the new pages are expanded (a decode step: one page in ps)
        first = slots - slots % ps
        self._grow(int(first.max()) + ps - 1)
        new = np.unique(first[self.holder[first] == NONE])
        self.fresh[(new[:, None] + np.arange(ps)).ravel()] = True

    def on_free(self, slots: np.ndarray) -> None:
        if slots.size == 0:
            return
        s = self._page_slots(slots)
        self._grow(int(s.max()))
        held = self.holder[s]
        if self.land.dest:
            landing.settle(self, s, held)
        if self.rec is not None:
            m = held >= 0
            if m.any():  # rooms in ascending order, each room's slots sorted, a run per stretch
                hs, ss = held[m], s[m]
                o = np.lexsort((ss, hs))
                who, a, b = runs_of(ss[o], hs[o])
                self.rec.ev_cols("free", who, a, b)
        self.holder[s] = NONE
        self.reader[s] = NONE
        self.fresh[s] = False

    # --- req_to_token rows --------------------------------------------------------------------------
    def bind_row(self, row: int, room: int, rid: str) -> None:
        self.rows[row] = (room, rid)
        self._grow_rows(row)
        self.row_room[row] = room
        self.checked[row] = 0

    def _grow_rows(self, top: int) -> None:
        if top >= len(self.row_room):
            self.row_room = np.concatenate((self.row_room, np.full(top + 1, NONE, np.int64)))
            self.checked = np.concatenate((self.checked, np.zeros(top + 1, np.int64)))
            self.checked_room = np.concatenate((self.checked_room, np.full(top + 1, NONE, np.int64)))

    def unbind_row(self, row: int) -> None:
        owner = self.rows.pop(row, None)
        if owner is not None:
            self.row_room[row] = NONE
            self.checked[row] = 0
            self.land.contended.pop(owner[0], None)
            self.unproven.discard(owner[0])

    def unchecked(self, rows: np.ndarray, rooms: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The first row position of each request (its req_to_token row and room) a batch attending
        positions [0, end) must still check."""
        if rows.size:
            self._grow_rows(int(rows.max()))
        return np.minimum(np.where(self.checked_room[rows] == rooms, self.checked[rows], 0), end)

    def _dirty(self, slots: np.ndarray, writer: int | np.ndarray) -> None:
        """Slots written by `writer`: a room holding any of them (another room) is checked in full again."""
        h = self.holder[slots]
        hit = (h >= 0) & (h != writer)
        if hit.any():
            self.checked[np.isin(self.checked_room, h[hit])] = 0

    def on_row_write(self, row: int, slots: np.ndarray) -> None:
        """The row of a request now names these slots: rows.row_write."""
        row_write(self, row, slots)

    def on_rows_write_batch(self, rows: np.ndarray, slots: np.ndarray) -> None:
        """One slot per (row, slot) pair, many rows at once: rows.rows_write_batch."""
        rows_write_batch(self, rows, slots)

    # --- transfers ----------------------------------------------------------------------------------
    def on_transfer(self, room: int, peer: str, slots: np.ndarray) -> None:
        """Sender side: the KV of `room` landed in `peer`'s slots (logged by the sender, section 4)."""
        if self.rec is not None:
            self.rec.ev_cols("transfer", room, *run_cols(slots), peer=peer)
        rt = self.peers.get(peer)
        if rt is not None:
            rt.on_landed(room, slots)

    def on_send(self, room: int, peer: str, slots: np.ndarray, status: str) -> None:
        """Sender side: the KV of `room` handed to the transfer engine for `peer`'s slots ("sent"), or
        its room ended Failed after that ("failed"): possibly landed, never proven (section 4)."""
        if self.rec is not None:
            self.rec.ev_cols("transfer", room, *run_cols(slots), peer=peer, src=status)

    def on_landed(self, room: int, slots: np.ndarray) -> None:
        """Receiver side: a transfer of `room` wrote these slots (whoever holds them now)."""
        with self.lock:
            self._grow(int(slots.max()))
            self._dirty(slots, room)
            self.tick += 1
            self.writer[slots] = room
            self.wtick[slots] = self.tick

    # --- what the transfer protocol tells a decode node (landing.py does the work) ------------------
    def on_stage(self, room: int, pos0: int, slots: np.ndarray) -> None:
        landing.stage(self, room, pos0, slots)

    def on_publish(self, room: int, ranks: int | None = None) -> None:
        landing.publish(self, room, ranks)

    def on_over(self, room: int) -> None:
        with self.lock:
            self.land.over(room)

    def on_prefill_status(self, room: int, rank: int | None) -> None:
        """A prefill rank's terminal status (Success or Failed) for the room reached this process: that
        rank's transfer worker is done with it. The room is over once every awaited rank has said so."""
        with self.lock:
            if self.land.rank_done(room, rank):
                self.land.over(room)

    def on_commit(self, room: int, length: int | None) -> None:
        landing.commit(self, room, length)

    # --- forward pass -------------------------------------------------------------------------------
    def check(self, room: int, attended: np.ndarray) -> Violation | None:
        """Before a forward pass over the room's KV: checks.check."""
        return checks.check(self, room, attended)

    def admit(self, room: int, rid: str, attended: np.ndarray) -> Violation | None:
        """A transferred request is about to join the running batch (its commit): the guard's first
        check of its prompt, before any forward pass over it."""
        if self.guard == "off":
            return None
        v = self.check(room, attended)
        if v is not None:
            v.rid = rid
            self._alert(v)
        return v

    def on_batch(
        self,
        decode: bool,
        rooms: list[int],
        lens: np.ndarray,
        atts: dict[int, tuple[str, np.ndarray]],
        outs: np.ndarray,
        out_n: np.ndarray | None = None,
        rid_of: Callable[[int], str] | None = None,
        rows: np.ndarray | None = None,
    ) -> list[tuple[int, Violation]]:
        """A forward batch: checks.batch (the guard's check, then the batch's writes and reads)."""
        return checks.batch(self, decode, rooms, lens, atts, outs, out_n, rid_of, rows)

    # --- alerts and metrics (forensics.sglang.alerts) ----------------------------------------------
    def _alert(self, v: Violation) -> None:
        if v.room in self.alerted:
            return
        self.alerted.add(v.room)
        self.stats.violations += 1
        self.stats.by_kind[v.kind] = self.stats.by_kind.get(v.kind, 0) + 1
        if self.guard == "enforce":
            self.stats.enforced += 1
        alerts.alert(self, v)

    def write_metrics(self) -> None:
        alerts.write_metrics(self)
