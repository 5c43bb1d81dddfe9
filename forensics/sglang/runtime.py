"""One engine process's view: who holds each KV slot, who last wrote it, and the page events.

The SGLang hooks (forensics.sglang.hooks) translate the engine's calls into the few methods below;
nothing here imports SGLang, so the ledger's logic and cost are the same on every release.

Attribution: SGLang's allocators hand out slots without saying for whom. A slot is "fresh" from its
allocation until the request-to-token pool writes it into a request's row; that write names the
request, so the alloc event is logged then (a page that never reaches a row is not a request's).
The ledger (numpy arrays, one entry per slot: holder, alloc tick, writer, write tick, reader) answers
the guard's question before a decode batch runs: does every slot a request attends hold KV that
request wrote (or that the radix cache shared to it) since it allocated the slot? A slot last written
by another room is a violation: the placeholder path (slots allocated, only the first transferred:
the rest still hold their previous owner's KV) and a late transfer into slots another request holds.
A slot nobody ever wrote holds zeros, no one's data: it is not counted as an exposure.

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

from forensics.sglang import alerts, landing
from forensics.sglang.landing import Landings
from forensics.sglang.recorder import Recorder

NONE = -1


def run_cols(slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half-open ranges of consecutive slots, in the order given, as two arrays (starts, ends): what the
    recorder takes in one call, no tuple per run."""
    if slots.size == 0:
        return slots[:0], slots[:0]
    brk = np.flatnonzero(np.diff(slots) != 1) + 1
    return slots[np.concatenate(([0], brk))], slots[np.concatenate((brk - 1, [slots.size - 1]))] + 1


def runs_of(slots: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """run_cols() of many requests' slots at once, `owner[i]` the request of slots[i] (requests one after
    another): (index of each run's request, its start, its end), in the order given."""
    brk = np.flatnonzero((np.diff(slots) != 1) | (np.diff(owner) != 0)) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk, [slots.size])) - 1
    return owner[first], slots[first], slots[last] + 1


@dataclass
class Violation:
    room: int
    rid: str
    slots: int
    sources: list[int]
    kind: str  # stale, foreign_write, in_flight, unproven, guard_error (alerts.why says each)


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
        """The row of a request now names these slots: fresh ones are its allocation, slots another
        room holds are a radix-cache share."""
        owner = self.rows.get(row)
        if owner is None or slots.size == 0:
            return
        room = owner[0]
        self._grow(int(slots.max()))
        fr = self.fresh[slots]
        if fr.any():
            self.tick += 1
            s = self._page_slots(slots[fr])
            self.fresh[s] = False
            self.holder[s] = room
            self.atick[s] = self.tick
            self.stats.allocated_pages += len(s) // self.ps
            if self.rec is not None:
                self.rec.ev_cols("alloc", room, *run_cols(s))
        other = slots[~fr]
        if other.size:
            h = self.holder[other]
            sh = other[(h >= 0) & (h != room)]
            if sh.size:
                self.shared.setdefault(room, set()).update(sh.tolist())
                self.reader[sh] = room
                if self.rec is not None:
                    self.rec.ev_cols("share", room, *run_cols(sh))

    def on_rows_write_batch(self, rows: np.ndarray, slots: np.ndarray) -> None:
        """One slot per (row, slot) pair, many rows at once (a decode step's out_cache_loc written into
        the rows): the common case, fresh slots, handled for the whole batch; others row by row."""
        if slots.size == 0:
            return
        self._grow(int(slots.max()))
        rr = self.row_room
        rooms = np.where(rows < len(rr), rr[np.minimum(rows, len(rr) - 1)], NONE)
        fr = self.fresh[slots] & (rooms != NONE)
        if fr.any() and (self.ps == 1 or np.unique(slots[fr] // self.ps).size == int(fr.sum())):
            # each fresh slot opens a page of its own (a decode step: one slot per request): the pages
            # taken at once, an alloc event per page, as on_row_write gives them one by one
            s, rm, ps = slots[fr], rooms[fr], self.ps
            first = s - s % ps
            full = (first[:, None] + np.arange(ps)).ravel() if ps > 1 else s
            self.tick += 1
            self.fresh[full] = False
            self.holder[full] = np.repeat(rm, ps) if ps > 1 else rm
            self.atick[full] = self.tick
            self.stats.allocated_pages += int(s.size)
            if self.rec is not None:
                self.rec.ev_cols("alloc", rm, first, first + ps)
            rest = ~fr
        else:
            rest = np.ones(slots.size, bool)
        rest &= rooms != NONE
        if rest.any():
            h = self.holder[slots]
            rest &= self.fresh[slots] | ((h >= 0) & (h != rooms))  # fresh pages (ps > 1) or shares
            for k in np.flatnonzero(rest).tolist():
                self.on_row_write(int(rows[k]), slots[k : k + 1])

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
        """Before a forward pass over the room's KV (its transfer's commit, then each batch's new
        positions): the attended slots (less the ones the batch writes) must hold KV the room wrote
        since it allocated them, or a prefix shared to it, and no unfinished transfer may reach them."""
        if room in self.land.contended or (attended.size and self.land.open_in(attended, self.ps)):
            return Violation(room, "", int(attended.size), self.land.contended.get(room, [])[:10], "in_flight")
        if room in self.unproven:
            return Violation(room, "", int(attended.size), [], "unproven")
        if attended.size == 0:
            return None
        self._grow(int(attended.max()))
        w = self.writer[attended]
        bad = (w != room) & (w != NONE)
        if not bad.any():
            return None
        sh = self.shared.get(room)
        if sh:
            bad &= ~np.isin(attended, np.fromiter(sh, np.int64, len(sh)))
            if not bad.any():
                return None
        late = self.wtick[attended][bad] > self.atick[attended][bad]
        return Violation(
            room, "", int(bad.sum()), np.unique(w[bad]).tolist()[:10], "foreign_write" if late.any() else "stale"
        )

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
        """A forward batch, request k of room rooms[k], req_to_token row rows[k] and row length lens[k]:
        atts[k] = (rid, the attended slots not yet checked) for the requests with any; outs the slots
        the batch writes, request after request, out_n[k] of them for request k (None: one each, a
        decode step). Returns the (index, violation) of requests the guard flags; writes and reads are
        logged after the check. Without rows, no position counts as checked for a later batch.
        The whole batch is checked with one gather and compare (suspects); Python runs check() only
        for the requests that gather cannot clear."""
        self.stats.batches += 1
        flagged: list[tuple[int, Violation]] = []
        todo = sorted(atts)  # requests with positions to check and read
        room_arr = np.asarray(rooms, np.int64)
        if todo:
            att = np.concatenate([atts[k][1] for k in todo])
            who = np.repeat(np.asarray(todo, np.int64), [atts[k][1].size for k in todo])
            att_room = room_arr[who]
            if att.size:
                self._grow(int(att.max()))
        if decode and self.guard != "off":
            for k in self._suspects(todo, rooms, att, who, att_room) if todo else []:
                rid, a = atts[k]
                v = self.check(rooms[k], a)
                if v is not None:
                    v.rid = rid
                    flagged.append((k, v))
                    self._alert(v)
            if self.land.open_pages and outs.size:  # decode output into a page a late chunk may write
                done = {k for k, _ in flagged}
                for k, n, by in landing.open_outs(self, outs, len(rooms), out_n):
                    if k not in done:
                        v = Violation(rooms[k], rid_of(k) if rid_of is not None else "", n, by[:10], "in_flight")
                        flagged.append((k, v))
                        self._alert(v)
        rec = self.rec
        if outs.size:  # the ledger's writes, the whole batch at once
            wk = np.arange(len(rooms)) if out_n is None else np.repeat(np.arange(len(rooms)), out_n)
            wrooms = room_arr[wk]
            self._grow(int(outs.max()))
            self._dirty(outs, wrooms)
            self.tick += 1
            self.writer[outs] = wrooms
            self.wtick[outs] = self.tick
            self.reader[outs] = wrooms
            if rec is not None:  # a run per request and stretch of consecutive slots, as run_cols() gives
                src = "decode" if decode else "prefill"
                if out_n is None:  # outs may be a view of the batch's tensor: the recorder keeps a copy
                    s = outs.copy()
                    rec.ev_cols("write", wrooms, s, s + 1, src=src)
                    # the next steps attend what this one writes (its reader is set above, so no
                    # later batch logs it): bound from now until the room frees it, as a read says
                    rec.ev_cols("read", wrooms, s, s + 1)
                else:
                    who_run, starts, ends = runs_of(outs, wk)
                    rec.ev_cols("write", room_arr[who_run], starts, ends, src=src)
                    if decode:  # several tokens a step (speculative decoding): read from now on, as above
                        rec.ev_cols("read", room_arr[who_run], starts, ends)
        if todo and att.size:
            self._reads(todo, rooms, atts, att, who, att_room)
        if rows is not None and rows.size == len(rooms):
            self._grow_rows(int(rows.max()) if rows.size else 0)
            self.checked[rows] = lens
            self.checked_room[rows] = room_arr
        return flagged

    def _suspects(self, todo: list[int], rooms: list[int], att: np.ndarray, who: np.ndarray,
                  att_room: np.ndarray) -> list[int]:  # fmt: skip
        """The requests among todo that check() may flag: a slot another room wrote, a page an open
        transfer may write, or a room contended or unproven. The rest pass check() unseen."""
        land = self.land
        sus = {k for k in todo if rooms[k] in land.contended or rooms[k] in self.unproven} if (
            land.contended or self.unproven) else set()  # fmt: skip
        if att.size:
            w = self.writer[att]
            bad = (w != att_room) & (w != NONE)
            if land.open_pages:
                pages = att // self.ps
                n = land.open_n  # read once: publish may grow it meanwhile
                inside = pages < len(n)
                bad[inside] |= n[pages[inside]] > 0
            if bad.any():
                sus.update(np.unique(who[bad]).tolist())
        return sorted(sus)

    def _reads(self, todo: list[int], rooms: list[int], atts: dict[int, tuple[str, np.ndarray]], att: np.ndarray,
               who: np.ndarray, att_room: np.ndarray) -> None:  # fmt: skip
        """The batch's first reads of the attended slots (reader set, a read event per run), in one pass;
        request by request where two requests attend a slot (a shared prefix: the later one reads it
        after the earlier one's read, as in order)."""
        if len(todo) > 1:
            mark = self.mark
            mark[att] = np.arange(att.size)
            if (mark[att] != np.arange(att.size)).any():
                for k in todo:
                    self._reads([k], rooms, atts, atts[k][1], who[who == k], att_room[who == k])
                return
        new = self.reader[att] != att_room
        if not new.any():
            return
        ns, nw, nr = att[new], who[new], att_room[new]
        self.reader[ns] = nr
        if self.rec is not None:
            kr, a, b = runs_of(ns, nw)
            self.rec.ev_cols("read", np.asarray(rooms, np.int64)[kr], a, b)

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
