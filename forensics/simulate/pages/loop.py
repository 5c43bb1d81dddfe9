"""The realistic generator's compiled event loop: arrivals, each request's prefill, transfer, decode read,
end, abort and late landing, run until a buffer fills, the chunk of drawn requests ends, no request
slot is free, or everything has happened (forensics.simulate.pages.realistic drives it)."""

# ruff: noqa: F405 (the layout's column names)
from __future__ import annotations

import numpy as np
from numba import njit

from forensics.simulate.pages.common import ALLOC, FREE, READ, TRANSFER, WRITE
from forensics.simulate.pages.kernel import (
    alloc,
    emit,
    emit_pages,
    emit_tokens,
    hpop,
    hpush,
    push_runs,
    runs_of,
    sort_runs,
)
from forensics.simulate.pages.layout import *  # noqa: F403
from forensics.simulate.pages.rooms import finish, late_conflict, track


# fmt: off
@njit(cache=True, nogil=True)
def run(
    G: np.ndarray, CF: np.ndarray, FS: np.ndarray, EPRC: np.ndarray, EPRN: np.ndarray, BX0: np.ndarray,
    BX1: np.ndarray, BM: np.ndarray, NS: np.ndarray, ST: np.ndarray, H: np.ndarray, SLOTS: np.ndarray,
    B: np.ndarray, B8: np.ndarray, stack: np.ndarray, pos: np.ndarray, holder: np.ndarray, rlen: np.ndarray,
    rnext: np.ndarray, free_t: np.ndarray, late_t: np.ndarray, AR: np.ndarray, c_gap: np.ndarray, c_dn: np.ndarray,
    c_pn: np.ndarray, c_prompt: np.ndarray, c_out: np.ndarray, c_flags: np.ndarray, c_room: np.ndarray,
    c_off: np.ndarray, o_t: np.ndarray, o_status: np.ndarray, RS: np.ndarray
) -> int:
    # fmt: on
    """Run the cluster until a node's buffer holds a row group (R_FLUSH), the chunk of requests is used
    up (R_CHUNK), no request slot is free (R_GROW), or everything has happened (R_DONE)."""
    ps = CF[C_PS]
    D = CF[C_D]
    N = D + CF[C_P]
    dark = CF[C_DARK]
    clear = CF[C_CLEAR]
    rowg = CF[C_ROWG]
    t_warm = CF[C_T_WARM]
    amask = (1 << ARENA_BITS) - 1
    while True:
        for node in range(N):
            if NS[node, NB_FILL] >= rowg:
                return R_FLUSH
        ht = (H[0] >> SLOT_BITS) if G[G_HEAP] > 0 else (1 << 62)
        if G[G_STOPPED] == 0:
            if G[G_NEXT_T] < 0:
                if G[G_CI] >= G[G_CLEN]:
                    return R_CHUNK
                if CF[C_TARGET] > 0:  # the events of the requests so far: finished ones, and estimates
                    projected = max(float(G[G_EVENTS]), G[G_FIN_EV] + FS[1])
                    x = projected / CF[C_TARGET]
                else:
                    x = G[G_K] / CF[C_MAXREQ]
                if x >= 1.0 or (CF[C_MAXREQ] > 0 and G[G_K] >= CF[C_MAXREQ]):
                    G[G_STOPPED] = 1
                    G[G_T_STOP] = G[G_LAST_T]
                    for d in range(D):
                        track(NS, d, G[G_LAST_T], 0, 0, t_warm, False)
                    continue
                mult = 1.0
                for j in range(len(BM)):
                    if BX0[j] <= x < BX1[j]:
                        mult = BM[j]
                G[G_NEXT_T] = G[G_LAST_T] + max(1, int(c_gap[G[G_CI]] / (FS[0] * mult)))
            if G[G_NEXT_T] <= ht:
                if G[G_NFREE] == 0:
                    return R_GROW
                # --- arrival: decode pre-allocates the prompt, both pools reserve the rest ---
                ci = G[G_CI]
                t = G[G_NEXT_T]
                G[G_NOW] = t
                G[G_LAST_T] = t
                G[G_CI] += 1
                G[G_K] += 1
                G[G_NEXT_T] = -1
                o_t[ci] = t
                dn = c_dn[ci]
                pn = D + c_pn[ci]
                flags = c_flags[ci]
                prompt = c_prompt[ci]
                out = c_out[ci]
                sent = 1 if flags & PH else prompt
                dpp = (prompt + ps - 1) // ps
                dop = (out + ps - 1) // ps
                pfp = (sent + ps - 1) // ps
                if NS[dn, NB_AVAIL] < dpp + dop:
                    o_status[ci] = 503
                    G[G_N503D] += 1
                    continue
                if NS[pn, NB_AVAIL] < pfp:
                    o_status[ci] = 503
                    G[G_N503P] += 1
                    continue
                G[G_NFREE] -= 1
                slot = SLOTS[G[G_NFREE]]
                G[G_ALIVE] += 1
                ST[slot, ROOM] = c_room[ci]
                ST[slot, DN] = dn
                ST[slot, PN] = pn
                ST[slot, PROMPT] = prompt
                ST[slot, OUT] = out
                ST[slot, SENT] = sent
                ST[slot, FLAGS] = flags
                ST[slot, EV] = 0
                ST[slot, NUDGES] = 0
                ST[slot, JIT] = c_off[ci, 6]
                ST[slot, T_A] = t
                ST[slot, T_P] = t + c_off[ci, 0]
                if flags & AB:
                    ST[slot, T_X] = -1
                    ST[slot, T_R] = -1
                    ST[slot, T_END] = -1
                    ST[slot, T_AB] = t + c_off[ci, 4]
                    ST[slot, T_LATE] = t + c_off[ci, 5]
                    G[G_NAB] += 1
                    o_status[ci] = 499
                else:
                    ST[slot, T_X] = t + c_off[ci, 1]
                    ST[slot, T_R] = t + c_off[ci, 2]
                    ST[slot, T_END] = t + c_off[ci, 3]
                    ST[slot, T_AB] = -1
                    ST[slot, T_LATE] = -1
                    o_status[ci] = 200
                if flags & PH:
                    G[G_NPH] += 1
                c = min(31, int(np.log2(dpp + dop))) + (32 if dn == dark else 0) + (64 if flags & AB else 0)
                est = EPRC[c] if EPRN[c] > 0 else (G[G_FIN_EV] / G[G_FIN_N] if G[G_FIN_N] else float(CF[C_EPR0]))
                ST[slot, CLS] = c
                ST[slot, EST] = int(est * 16)
                FS[1] += ST[slot, EST] / 16.0
                head, runs, amb = alloc(NS, dn, dpp, slot, t, clear, stack, pos, holder, rlen, rnext, late_t, RS)
                G[G_AMBIG] += amb
                ST[slot, DP_HEAD] = head
                ST[slot, DP_PAGES] = dpp
                ST[slot, DO_PAGES] = dop
                ST[slot, PF_PAGES] = pfp
                G[G_D_ALLOCS] += 1
                G[G_D_RANGES] += runs
                emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, ALLOC, head, ps, rlen, rnext, -1)
                NS[dn, NB_AVAIL] -= dpp + dop
                NS[pn, NB_AVAIL] -= pfp
                track(NS, dn, t, 1, dpp, t_warm, G[G_STOPPED] == 1)
                ST[slot, KIND] = K_PALLOC
                G[G_HEAP] = hpush(H, G[G_HEAP], (ST[slot, T_P] << SLOT_BITS) | slot)
                continue
        if G[G_HEAP] == 0:
            return R_DONE
        key, n = hpop(H, G[G_HEAP])
        G[G_HEAP] = n
        t = key >> SLOT_BITS
        slot = key & SLOT_MASK
        G[G_NOW] = t
        kind = ST[slot, KIND]
        dn = ST[slot, DN]
        pn = ST[slot, PN]
        frozen = G[G_STOPPED] == 1
        if kind == K_PALLOC:  # prefill computes the prompt (one slot for a placeholder)
            head, runs, amb = alloc(
                NS, pn, ST[slot, PF_PAGES], slot, t, clear, stack, pos, holder, rlen, rnext, late_t, RS
            )
            ST[slot, PF_HEAD] = head
            G[G_P_ALLOCS] += 1
            G[G_P_RANGES] += runs
            emit_pages(G, NS, B, B8, ST, slot, pn, dark, t, ALLOC, head, ps, rlen, rnext, -1)
            sent = ST[slot, SENT]
            emit_tokens(G, NS, B, B8, ST, slot, pn, pn, dark, t, WRITE, head, sent, ps, rlen, rnext, -1)
            emit_tokens(G, NS, B, B8, ST, slot, pn, pn, dark, t, READ, head, sent, ps, rlen, rnext, -1)
            if ST[slot, FLAGS] & AB:
                ST[slot, KIND] = K_ABORT
                G[G_HEAP] = hpush(H, G[G_HEAP], (ST[slot, T_AB] << SLOT_BITS) | slot)
            else:
                ST[slot, KIND] = K_LAND
                G[G_HEAP] = hpush(H, G[G_HEAP], (ST[slot, T_X] << SLOT_BITS) | slot)
        elif kind == K_LAND:  # the transfer lands in decode's pre-allocation; prefill lets go
            dp, sent = ST[slot, DP_HEAD], ST[slot, SENT]
            emit_tokens(G, NS, B, B8, ST, slot, pn, dn, dark, t, TRANSFER, dp, sent, ps, rlen, rnext, dn)
            emit_pages(G, NS, B, B8, ST, slot, pn, dark, t, FREE, ST[slot, PF_HEAD], ps, rlen, rnext, -1)
            k = runs_of(ST[slot, PF_HEAD], rlen, rnext, RS, 0)
            push_runs(NS, pn, RS, k, t, stack, pos, holder, free_t)
            NS[pn, NB_AVAIL] += ST[slot, PF_PAGES]
            ST[slot, KIND] = K_READ
            G[G_HEAP] = hpush(H, G[G_HEAP], (ST[slot, T_R] << SLOT_BITS) | slot)
        elif kind == K_READ:  # decode starts: reads the prompt, allocates the output
            dp = ST[slot, DP_HEAD]
            emit_tokens(G, NS, B, B8, ST, slot, dn, dn, dark, t, READ, dp, ST[slot, PROMPT], ps, rlen, rnext, -1)
            head, runs, amb = alloc(
                NS, dn, ST[slot, DO_PAGES], slot, t, clear, stack, pos, holder, rlen, rnext, late_t, RS
            )
            G[G_AMBIG] += amb
            ST[slot, DO_HEAD] = head
            G[G_D_ALLOCS] += 1
            G[G_D_RANGES] += runs
            emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, ALLOC, head, ps, rlen, rnext, -1)
            track(NS, dn, t, 0, ST[slot, DO_PAGES], t_warm, frozen)
            ST[slot, KIND] = K_END
            G[G_HEAP] = hpush(H, G[G_HEAP], (ST[slot, T_END] << SLOT_BITS) | slot)
        elif kind == K_END:  # the output is written; everything goes back
            dp = ST[slot, DP_HEAD]
            do = ST[slot, DO_HEAD]
            emit_tokens(G, NS, B, B8, ST, slot, dn, dn, dark, t, WRITE, do, ST[slot, OUT], ps, rlen, rnext, -1)
            emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, FREE, dp, ps, rlen, rnext, -1)
            emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, FREE, do, ps, rlen, rnext, -1)
            k = runs_of(dp, rlen, rnext, RS, 0)
            k = runs_of(do, rlen, rnext, RS, k)
            sort_runs(RS, k)  # both holdings' pages go back together, sorted
            push_runs(NS, dn, RS, k, t, stack, pos, holder, free_t)
            NS[dn, NB_AVAIL] += ST[slot, DP_PAGES] + ST[slot, DO_PAGES]
            track(NS, dn, t, -1, -(ST[slot, DP_PAGES] + ST[slot, DO_PAGES]), t_warm, frozen)
            finish(G, ST, SLOTS, slot, FS, EPRC, EPRN)
        elif kind == K_ABORT:  # decode gives the pre-allocation back; the transfer is still in flight
            dp = ST[slot, DP_HEAD]
            off = G[G_ARENA]
            p0 = dp
            done = 0
            nr = 0
            base = NS[dn, NB_BASE]
            sent = ST[slot, SENT]
            while p0 >= 0 and done < sent:
                cover = min(rlen[p0] * ps, sent - done)
                s = (p0 - base) * ps
                AR[(off + nr) & amask, 0] = s
                AR[(off + nr) & amask, 1] = s + cover
                nr += 1
                done += cover
                p0 = rnext[p0]
            ST[slot, AR_OFF] = off
            ST[slot, AR_N] = nr
            G[G_ARENA] = off + nr
            emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, FREE, dp, ps, rlen, rnext, -1)
            k = runs_of(dp, rlen, rnext, RS, 0)
            push_runs(NS, dn, RS, k, t, stack, pos, holder, free_t)
            NS[dn, NB_AVAIL] += ST[slot, DP_PAGES] + ST[slot, DO_PAGES]
            track(NS, dn, t, -1, -ST[slot, DP_PAGES], t_warm, frozen)
            ST[slot, T_AB] = -1  # no longer holds: its times no longer bound anyone's late landing
            ST[slot, KIND] = K_LATE
            G[G_HEAP] = hpush(H, G[G_HEAP], (ST[slot, T_LATE] << SLOT_BITS) | slot)
        else:  # K_LATE: the aborted request's transfer lands late, into pages it no longer holds
            if G[G_ARENA] - ST[slot, AR_OFF] > (1 << ARENA_BITS):
                raise ValueError("late-landing arena overrun")
            why = late_conflict(ST, NS, slot, t, ps, clear, CF[C_DEPTH], AR, holder, pos, free_t, late_t)
            if why and ST[slot, NUDGES] < MAX_NUDGES:
                ST[slot, NUDGES] += 1
                G[G_NUDGE] += 1
                t2 = t + clear + 5_000 + (ST[slot, JIT] + 7_919 * ST[slot, NUDGES]) % 35_000
                ST[slot, T_LATE] = t2
                G[G_HEAP] = hpush(H, G[G_HEAP], (t2 << SLOT_BITS) | slot)
                continue
            if why == 1:
                G[G_UNCLEAR] += 1
            elif why == 2:
                G[G_NEARTOP] += 1
            G[G_LATE] += 1
            base = NS[dn, NB_BASE]
            room = ST[slot, ROOM]
            for r in range(ST[slot, AR_N]):
                i = (ST[slot, AR_OFF] + r) & amask
                s = AR[i, 0]
                e = AR[i, 1]
                emit(G, NS, B, B8, ST, slot, pn, dark, t, TRANSFER, room, s, e, dn)
                for p in range(s // ps, (e - 1) // ps + 1):
                    late_t[base + p] = t
            emit_pages(G, NS, B, B8, ST, slot, pn, dark, t, FREE, ST[slot, PF_HEAD], ps, rlen, rnext, -1)
            k = runs_of(ST[slot, PF_HEAD], rlen, rnext, RS, 0)
            push_runs(NS, pn, RS, k, t, stack, pos, holder, free_t)
            NS[pn, NB_AVAIL] += ST[slot, PF_PAGES]
            ST[slot, T_LATE] = -1
            finish(G, ST, SLOTS, slot, FS, EPRC, EPRN)
