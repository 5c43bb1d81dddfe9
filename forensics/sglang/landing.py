"""What a decode process learns of each transfer from the transfer protocol alone (#48).

Mooncake writes a decode node's KV slots by RDMA: the decode process sees no write. What reaches it:
- the destination it publishes itself (DecodePreallocQueue._pre_alloc returns the slots, in the
  request's row from a first position on, whose pages the receiver's send_metadata then sends prefill;
  a _pre_alloc no send follows, a retracted request's resume or a host-staged one, publishes nothing);
- the room's conclusion: Success when the transfer queue commits it (DecodeTransferQueue.
  _commit_transfer_to_req, both releases: prefill reports Success only after its last chunk landed),
  a prefill rank's terminal status for the room (CommonKVManager.apply_prefill_status, 0.5.23, also
  for a room decode has already cleared), or the drain acknowledgement of an aborted room
  (CommonKVManager.is_abort_release_safe, 0.5.23's deferred release);
- the metadata buffer prefill fills with the first output token: its cached_tokens row has spare
  int32 columns (MetadataBuffers.set_buf, 0.5.11 and 0.5.23: columns 0-6 used, 7-15 spare, carried
  by RDMA with the rest of the row); the plugin on prefill writes there how many prompt tokens it
  computed (a placeholder: 1), with the room and a marker, so decode knows the transferred length.

Until its transfer is over, a room's destination pages may be written at any moment (a chunk still in
flight after decode aborted the room): such a page is "open". The guard does not hold open pages out
of the allocator (the plugin never changes what SGLang allocates); it refuses the request that is
given one while it is open (Landings.contended at its commit; open_outs for a decode step that writes
into one), because nothing the protocol delivers afterwards says
whether the late chunk landed before or after that request's own KV. A room that ends without a
Success commit may have written any of its pages: they are counted as its writes when they are freed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# columns of MetadataBuffers.cached_tokens[idx] (int32, 16 wide) the plugin uses: SGLang uses 0-6
COL_ROOM, COL_LEN, COL_MARK = 13, 14, 15
MARK = 0x4B5646  # "KVF": the prefill plugin wrote this row (a zero row: prefill runs without it)


def room32(room: int) -> int:
    """The room as the int32 column holds it (bootstrap rooms are 63-bit random numbers)."""
    return int(room) & 0x7FFFFFFF


class Landings:
    """A decode process's transfers in progress: per room its published destination and whether its
    transfer is still open; per page how many open transfers may still write it."""

    def __init__(self) -> None:
        self.dest: dict[int, tuple[int, np.ndarray]] = {}  # room -> (first row position, dest slots)
        self.open_pages: dict[int, np.ndarray] = {}  # room -> pages its open transfer may write
        self.open_n = np.zeros(1 << 12, np.int32)  # page -> open transfers that may write it
        # room -> rooms whose open transfer could write a page it was given (refused at its commit)
        self.contended: dict[int, list[int]] = {}
        # room -> prefill ranks whose terminal status ends its transfer (what the manager awaited when
        # the destination went out: SGLang drops its own count when it clears an aborted room)
        self.need: dict[int, int] = {}
        self.ranks: dict[int, set[int]] = {}  # room -> prefill ranks whose terminal status came

    def _grow(self, top: int) -> None:
        if top >= len(self.open_n):
            new = np.zeros(max(top + 1, 2 * len(self.open_n)), np.int32)
            new[: len(self.open_n)] = self.open_n
            self.open_n = new

    def stage(self, room: int, pos0: int, slots: np.ndarray) -> None:
        """The room's pre-allocation: the destination its receiver may send."""
        self.dest[room] = (pos0, slots)

    def publish(self, room: int, ps: int) -> None:
        """The room's destination is sent to prefill: its pages may be written from now on."""
        self.over(room)
        staged = self.dest.get(room)
        if staged is None:
            return
        pages = np.unique(staged[1] // ps)
        self._grow(int(pages.max()) if pages.size else 0)
        if pages.size and self.open_n[pages].any():
            hit = set(pages[self.open_n[pages] > 0].tolist())
            self.contended[room] = sorted(r for r, p in self.open_pages.items() if hit.intersection(p.tolist()))
        else:
            self.contended.pop(room, None)
        self.open_pages[room] = pages
        np.add.at(self.open_n, pages, 1)

    def rank_done(self, room: int, rank: Any) -> bool:
        """A prefill rank's terminal status for the room came: True when every rank the room awaited
        has said so (its transfer is then over)."""
        got = self.ranks.setdefault(room, set())
        got.add(rank)
        if len(got) < self.need.get(room, 1):
            return False
        self.ranks.pop(room, None)
        return True

    def over(self, room: int) -> None:
        """The room's transfer can write no more (its Success, prefill's terminal status, the drain ack)."""
        self.need.pop(room, None)
        self.ranks.pop(room, None)
        pages = self.open_pages.pop(room, None)
        if pages is not None:
            np.subtract.at(self.open_n, pages, 1)

    def take(self, room: int) -> tuple[int, np.ndarray] | None:
        """The room's destination, forgotten (its commit, or its pages freed)."""
        return self.dest.pop(room, None)

    def open_in(self, slots: np.ndarray, ps: int) -> bool:
        """Does any open transfer still reach these slots' pages?"""
        if not self.open_pages or slots.size == 0:
            return False
        pages = slots // ps
        n = self.open_n  # read once: publish may grow it (under the runtime's lock) meanwhile
        return bool(n[pages[pages < len(n)]].any())


# --- on the runtime's ledger (rt: forensics.sglang.runtime.Runtime; not imported: it imports this) -----
def stage(rt: Any, room: int, pos0: int, slots: np.ndarray) -> None:
    """Decode pre-allocates the room's destination: these slots, row positions pos0 on."""
    if slots.size:
        with rt.lock:
            rt._grow(int(rt._page_slots(slots).max()))
            rt.land.stage(room, pos0, slots)


def publish(rt: Any, room: int, ranks: int | None = None) -> None:
    """Decode sends prefill the room's destination; `ranks`: the prefill ranks that will each send
    the room's terminal status (None: one)."""
    with rt.lock:
        rt.land.publish(room, rt.ps)
        if ranks is not None and ranks > 1:
            rt.land.need[room] = int(ranks)


def commit(rt: Any, room: int, length: int | None) -> None:
    """Decode commits the room's Success: prefill wrote its destination's pages up to row position
    `length` (the prompt tokens it computed; None: it did not say, and nothing counts as written)."""
    with rt.lock:
        rt.land.over(room)
        dest = rt.land.take(room)
        if dest is None:
            return
        pos0, slots = dest
        if length is None:
            rt.unproven.add(room)
            return
        rt.unproven.discard(room)
        done = slots[: max(0, length - pos0)]
        if done.size:
            s = rt._page_slots(done)  # a transfer moves whole pages
            rt._grow(int(s.max()))
            rt._dirty(s, room)
            rt.tick += 1
            rt.writer[s] = room
            rt.wtick[s] = rt.tick


def settle(rt: Any, s: np.ndarray, held: np.ndarray) -> None:
    """Slots freed by a room whose transfer never committed: it may have written any of them."""
    for room in np.unique(held[held >= 0]).tolist():
        if rt.land.take(room) is not None:
            mine = s[held == room]
            rt.tick += 1
            rt.writer[mine] = room
            rt.wtick[mine] = rt.tick


def open_outs(rt: Any, outs: np.ndarray, n_reqs: int, out_n: np.ndarray | None) -> list[tuple[int, int, list[int]]]:
    """Decode output written into a page an unfinished transfer may still write (a page an aborted
    room's chunk is still flying to, freed at once and handed out by alloc_decode): the later steps
    attend that slot and no check reads it again (they check only positions not yet checked), so the
    step that writes it is refused. Returns (request index, slots, rooms that may write them) per
    request of the batch (outs: request after request, out_n[k] each; None: one each)."""
    n = rt.land.open_n  # read once: publish may grow it meanwhile
    pages = outs // rt.ps
    hit = np.zeros(outs.size, bool)
    inside = pages < len(n)
    hit[inside] = n[pages[inside]] > 0
    if not hit.any():
        return []
    who = np.arange(n_reqs) if out_n is None else np.repeat(np.arange(n_reqs), out_n)
    out = []
    for k in np.unique(who[hit]).tolist():
        mine = hit & (who == k)
        on = set(pages[mine].tolist())
        by = sorted(r for r, p in rt.land.open_pages.items() if on.intersection(p.tolist()))
        out.append((k, int(mine.sum()), by))
    return out
