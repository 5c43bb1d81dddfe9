"""The guard's checks against the ledger (forensics.sglang.runtime: its arrays, each a method's
delegate here): check() of one room's attended slots, and the batch check: one gather and compare over a
batch's new positions, check() only for the requests that gather cannot clear, then the batch's writes
and first reads into the ledger and the recorder.

A slot last written by another room is a violation: the placeholder path (slots allocated, only the
first transferred: the rest still hold their previous owner's KV) and a late transfer into slots another
request holds. A slot nobody ever wrote holds zeros, no one's data: it is not counted as an exposure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from forensics.sglang import landing
from forensics.sglang.runs import NONE, runs_of


@dataclass
class Violation:
    room: int
    rid: str
    slots: int
    sources: list[int]
    kind: str  # stale, foreign_write, in_flight, unproven, guard_error (alerts.why says each)


def check(rt: Any, room: int, attended: np.ndarray) -> Violation | None:
    """Before a forward pass over the room's KV (its transfer's commit, then each batch's new
    positions): the attended slots (less the ones the batch writes) must hold KV the room wrote
    since it allocated them, or a prefix shared to it, and no unfinished transfer may reach them."""
    if room in rt.land.contended or (attended.size and rt.land.open_in(attended, rt.ps)):
        return Violation(room, "", int(attended.size), rt.land.contended.get(room, [])[:10], "in_flight")
    if room in rt.unproven:
        return Violation(room, "", int(attended.size), [], "unproven")
    if attended.size == 0:
        return None
    rt._grow(int(attended.max()))
    w = rt.writer[attended]
    bad = (w != room) & (w != NONE)
    if not bad.any():
        return None
    sh = rt.shared.get(room)
    if sh:
        bad &= ~np.isin(attended, np.fromiter(sh, np.int64, len(sh)))
        if not bad.any():
            return None
    late = rt.wtick[attended][bad] > rt.atick[attended][bad]
    return Violation(
        room, "", int(bad.sum()), np.unique(w[bad]).tolist()[:10], "foreign_write" if late.any() else "stale"
    )


def batch(
    rt: Any,
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
    rt.stats.batches += 1
    flagged: list[tuple[int, Violation]] = []
    todo = sorted(atts)  # requests with positions to check and read
    room_arr = np.asarray(rooms, np.int64)
    if todo:
        att = np.concatenate([atts[k][1] for k in todo])
        who = np.repeat(np.asarray(todo, np.int64), [atts[k][1].size for k in todo])
        att_room = room_arr[who]
        if att.size:
            rt._grow(int(att.max()))
    if decode and rt.guard != "off":
        for k in _suspects(rt, todo, rooms, att, who, att_room) if todo else []:
            rid, a = atts[k]
            v = check(rt, rooms[k], a)
            if v is not None:
                v.rid = rid
                flagged.append((k, v))
                rt._alert(v)
        if rt.land.open_pages and outs.size:  # decode output into a page a late chunk may write
            done = {k for k, _ in flagged}
            for k, n, by in landing.open_outs(rt, outs, len(rooms), out_n):
                if k not in done:
                    v = Violation(rooms[k], rid_of(k) if rid_of is not None else "", n, by[:10], "in_flight")
                    flagged.append((k, v))
                    rt._alert(v)
    rec = rt.rec
    if outs.size:  # the ledger's writes, the whole batch at once
        wk = np.arange(len(rooms)) if out_n is None else np.repeat(np.arange(len(rooms)), out_n)
        wrooms = room_arr[wk]
        rt._grow(int(outs.max()))
        rt._dirty(outs, wrooms)
        rt.tick += 1
        rt.writer[outs] = wrooms
        rt.wtick[outs] = rt.tick
        rt.reader[outs] = wrooms
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
        _reads(rt, todo, rooms, atts, att, who, att_room)
    if rows is not None and rows.size == len(rooms):
        rt._grow_rows(int(rows.max()) if rows.size else 0)
        rt.checked[rows] = lens
        rt.checked_room[rows] = room_arr
    return flagged


def _suspects(rt: Any, todo: list[int], rooms: list[int], att: np.ndarray, who: np.ndarray,
              att_room: np.ndarray) -> list[int]:  # fmt: skip
    """The requests among todo that check() may flag: a slot another room wrote, a page an open
    transfer may write, or a room contended or unproven. The rest pass check() unseen."""
    land = rt.land
    sus = {k for k in todo if rooms[k] in land.contended or rooms[k] in rt.unproven} if (
        land.contended or rt.unproven) else set()  # fmt: skip
    if att.size:
        w = rt.writer[att]
        bad = (w != att_room) & (w != NONE)
        if land.open_pages:
            pages = att // rt.ps
            n = land.open_n  # read once: publish may grow it meanwhile
            inside = pages < len(n)
            bad[inside] |= n[pages[inside]] > 0
        if bad.any():
            sus.update(np.unique(who[bad]).tolist())
    return sorted(sus)


def _reads(rt: Any, todo: list[int], rooms: list[int], atts: dict[int, tuple[str, np.ndarray]], att: np.ndarray,
           who: np.ndarray, att_room: np.ndarray) -> None:  # fmt: skip
    """The batch's first reads of the attended slots (reader set, a read event per run), in one pass;
    request by request where two requests attend a slot (a shared prefix: the later one reads it
    after the earlier one's read, as in order)."""
    if len(todo) > 1:
        mark = rt.mark
        mark[att] = np.arange(att.size)
        if (mark[att] != np.arange(att.size)).any():
            for k in todo:
                _reads(rt, [k], rooms, atts, atts[k][1], who[who == k], att_room[who == k])
            return
    new = rt.reader[att] != att_room
    if not new.any():
        return
    ns, nw, nr = att[new], who[new], att_room[new]
    rt.reader[ns] = nr
    if rt.rec is not None:
        kr, a, b = runs_of(ns, nw)
        rt.rec.ev_cols("read", np.asarray(rooms, np.int64)[kr], a, b)
