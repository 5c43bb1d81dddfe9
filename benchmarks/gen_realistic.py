"""Fast generator of benchmark bundles shaped like real incidents (a compiled event loop; not a
ground-truth simulator: it writes no truth files).

Cluster: `--prefill-nodes` prefill nodes (180,000-slot pools) and `--decode-nodes` decode nodes
(1,048,576-slot pools), context length 262,144, `--page-size` 1..64. `--dark-node` (default: the last
decode node; '' for none) writes no page events, but the transfers prefill sends it are logged. Each
node's clock is off by a fixed skew of up to +-1.5 s.

Traffic: Poisson arrivals whose rate a few bursts (`--bursts`, `--burst-mult` 3-5x, each a few per
cent of the trace's time) modulate; request k goes to a decode and a prefill node drawn at random.
Prompts are log-normal (median 1,500 tokens, sigma 1.3) clipped to the context minus the output,
outputs log-normal (median 300, sigma 0.7, at most 4,096). A prompt at or over the prefill limit
(the prefill pool less 6 tokens, SGLang's max_req_input_len) takes the placeholder path; besides the
few the log-normal tail gives, a share `--placeholder-rate` of requests get such a prompt (uniform
up to the context): prefill computes and transfers one slot, decode reads the whole prompt (stale KV
of earlier holders, and never-written slots).

Per request (true clock; each node logs on its own): decode allocates the prompt's pages at arrival
and reserves the output's; 0.5-3 ms later prefill allocates, writes and reads the prompt (its pages
reserved at arrival too); its transfer (logged by prefill, peer = the decode node, the receiver's
slots) lands 2.5-8 ms (plus about 1 us per token) after decode's allocation; prefill frees its pages
as it sends; decode reads the prompt 2-20 ms after the landing (so ordinary transfers bound each
clock offset to about 5 ms), allocates the output pages, and at the end of its hold writes the
output and frees everything. A request that either pool cannot hold (free pages less those
reserved) gets HTTP 503 and no page events.

Aborts (`--abort-rate`): the client aborts between prefill's allocation and the landing; decode frees
the prompt pages at once (no read); the transfer lands 200-900 ms after the abort, into pages LIFO
reuse has likely handed on: a late foreign write. A late landing is moved on (by 55-90 ms, up to 40
times) while an event on its receiver pages is, or is scheduled, within 50 ms of it, or one of its
pages is free near the top of the free stack (likely to be handed out within 50 ms); counts.json says
how many still landed near an event (late_unclear) and how many allocations took a page within 50 ms
after a late landing into it while it was free (late_ambiguous_allocs): those few may be ambiguous.

Allocators: each node has a LIFO stack of free pages (page 0 and the pool's last page unused): a free
pushes the request's pages sorted, lowest on top; an allocation pops the top n and holds them in
ascending order. After warm-up the stack is shuffled by reuse, so a holding is many ranges: one
alloc/free event per maximal run of consecutive pages, one read/write/transfer event per run of the
token range (as forensics.simulate does).

Concurrency (`--concurrency C`, default 300): the mean number of rooms holding pages on a decode
node. The arrival rate is set from C and the mean hold (Little's law), so `--events` and C are
independent (counts.json's inflight: the time average from two mean holds after the first arrival
to the last). Holds: decode time = 20 ms + output x 12-35 ms per token x w (at most 150 s),
w = min(4, (S0/size)^beta), size the request's slots, S0 the median size. With beta = 0 (holds
independent of size) a decode pool of 1,048,576 slots holds only about 200 rooms of this length
distribution on average (the output alone weighs about 600 slots in the time-weighted mean), so the
generator picks beta
(`--hold-exponent auto`): the smallest that fits C rooms into 60% of the pool, and then scales the
bursts down (towards 1x) until the burst peak fits 90% of it. counts.json's `sizing` says what it
chose; a large C leaves no room for bursts.

Page events go to pages/<node>.parquet per node (PAGE_SCHEMA), in seq order (seq from 1, ts
monotone), written as 1M-row row groups while the loop runs (bounded memory at any size). Gateway
records (gen_bundle's schema; status 200, 499 for aborts, 503) go to gateway/gateway.parquet;
engine/<node>/server.log has the startup lines (server_args, KV Cache, max_total_num_tokens) of
every node, the dark one too; counts.json the counts.

    python benchmarks/gen_realistic.py OUT --events 2000000 --concurrency 300 --page-size 32 --seed 1
"""

from __future__ import annotations

import argparse
import json
import math
import queue
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_bundle import GATEWAY_SCHEMA, OPS, T0, _strings, startup_log  # noqa: E402

from forensics.contract import PAGE_SCHEMA  # noqa: E402

DECODE_POOL = 1_048_576
PREFILL_POOL = 180_000
CONTEXT = 262_144
PROMPT_MEDIAN, PROMPT_SIGMA = 1_500, 1.3
OUT_MEDIAN, OUT_SIGMA, OUT_MAX = 300, 0.7, 4_096
MIN_PROMPT = 16
CLEAR_US = 50_000  # late landings kept this far from other events on their slots
MAX_NUDGES = 40
W_HI = 4.0  # the longest hold factor (small requests)
MAX_DECODE_US = 150_000_000  # the longest decode time
BETA_MAX = 2.5
FIT_MEAN, FIT_PEAK = 0.6, 0.9  # shares of the decode pool the mean and the burst peak may fill
EPR0 = 40  # events per request, until the first requests finish
ALLOC, FREE, WRITE, READ, SHARE, TRANSFER = range(6)

# per request (slot) state: columns of ST
(ROOM, DN, PN, PROMPT, OUT, SENT, FLAGS, KIND, T_A, T_P, T_X, T_R, T_END, T_AB, T_LATE, DP_HEAD,
 DP_PAGES, DO_HEAD, DO_PAGES, PF_HEAD, PF_PAGES, NUDGES, AR_OFF, AR_N, EV, JIT, CLS, EST) = range(28)  # fmt: skip
NF = 28
PH, AB = 1, 2  # FLAGS bits: placeholder, aborted
K_PALLOC, K_LAND, K_READ, K_END, K_ABORT, K_LATE = range(1, 7)  # the slot's pending event
# global scalars: G
(G_HEAP, G_NFREE, G_CI, G_CLEN, G_K, G_NEXT_T, G_LAST_T, G_STOPPED, G_EVENTS, G_ALLEV, G_FIN_EV,
 G_FIN_N, G_ALIVE, G_ARENA, G_T_STOP, G_N503D, G_N503P, G_NAB, G_NPH, G_NUDGE, G_UNCLEAR, G_AMBIG,
 G_D_ALLOCS, G_D_RANGES, G_P_ALLOCS, G_P_RANGES, G_LATE, G_NOW, G_NEARTOP) = range(29)  # fmt: skip
NG = 29
# configuration: CF
(C_PS, C_D, C_P, C_DARK, C_CLEAR, C_DEPTH, C_MAXREQ, C_TARGET, C_ROWG, C_EPR0, C_T_WARM) = range(11)  # fmt: skip
NC = 11
# per node: NS
(NB_BASE, NB_NPG, NB_TOP, NB_AVAIL, NB_FILL, NB_CNT, NB_INFL, NB_LASTT, NB_MAXINFL, NB_USED, NB_MAXUSED,
 NB_AREA, NB_UAREA, NB_AREA_ALL, NB_UAREA_ALL) = range(15)  # fmt: skip
NN = 15
R_CHUNK, R_FLUSH, R_GROW, R_DONE = range(4)
SLOT_BITS = 24
SLOT_MASK = (1 << SLOT_BITS) - 1
NEVER = -(1 << 62)
ARENA_BITS = 20


# --- the compiled loop --------------------------------------------------------------------------------
@njit(cache=True)
def _hpush(H, n, key):
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if H[p] <= key:
            break
        H[i] = H[p]
        i = p
    H[i] = key
    return n + 1


@njit(cache=True)
def _hpop(H, n):
    top = H[0]
    n -= 1
    last = H[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and H[c + 1] < H[c]:
            c += 1
        if H[c] >= last:
            break
        H[i] = H[c]
        i = c
    H[i] = last
    return top, n


@njit(cache=True)
def _emit(G, NS, B, B8, ST, slot, node, dark, t, op, room, s, e, peer):
    NS[node, NB_CNT] += 1
    G[G_ALLEV] += 1
    if node == dark:
        return
    i = NS[node, NB_FILL]
    B[node, 0, i] = t
    B[node, 1, i] = room
    B[node, 2, i] = s
    B[node, 3, i] = e
    B8[node, 0, i] = op
    B8[node, 1, i] = peer
    NS[node, NB_FILL] = i + 1
    G[G_EVENTS] += 1
    ST[slot, EV] += 1


@njit(cache=True)
def _emit_pages(G, NS, B, B8, ST, slot, node, dark, t, op, head, ps, rlen, rnext, peer):
    """One event per run of the holding that starts at page `head` (global page numbers)."""
    base = NS[node, NB_BASE]
    room = ST[slot, ROOM]
    p0 = head
    while p0 >= 0:
        n = rlen[p0]
        s = (p0 - base) * ps
        _emit(G, NS, B, B8, ST, slot, node, dark, t, op, room, s, s + n * ps, peer)
        p0 = rnext[p0]


@njit(cache=True)
def _emit_tokens(G, NS, B, B8, ST, slot, node, pool_node, dark, t, op, head, ntok, ps, rlen, rnext, peer):
    """One event per run of tokens [0, ntok) of the holding at `head` in pool_node's pool."""
    base = NS[pool_node, NB_BASE]
    room = ST[slot, ROOM]
    p0 = head
    done = 0
    while p0 >= 0 and done < ntok:
        cover = min(rlen[p0] * ps, ntok - done)
        s = (p0 - base) * ps
        _emit(G, NS, B, B8, ST, slot, node, dark, t, op, room, s, s + cover, peer)
        done += cover
        p0 = rnext[p0]


@njit(cache=True)
def _alloc(NS, node, n, slot, t, clear, stack, pos, holder, rlen, rnext, late_t, RS):
    """Pop the top n pages of node's free stack and link them, ascending, into runs of consecutive pages
    (a free pushed a holding's pages in descending order, so the pops come in ascending runs: sorting
    those runs is cheaper than sorting the pages). Returns (head page, runs, whether a page had a late
    landing within `clear` before now)."""
    base = NS[node, NB_BASE]
    tp = NS[node, NB_TOP]
    amb = 0
    k = 0
    prev = -2
    for j in range(n):
        g = stack[base + tp - 1 - j]
        pos[g] = -1
        holder[g] = slot
        if late_t[g] > t - clear:
            amb = 1
        if g == prev + 1:
            RS[1, k - 1] += 1
        else:
            RS[0, k] = g
            RS[1, k] = 1
            k += 1
        prev = g
    NS[node, NB_TOP] = tp - n
    _sort_runs(RS, k)
    head = RS[0, 0]
    cur = head
    cl = RS[1, 0]
    runs = 1
    for j in range(1, k):
        if RS[0, j] == cur + cl:  # adjacent: one run
            cl += RS[1, j]
        else:
            rlen[cur] = cl
            rnext[cur] = RS[0, j]
            cur = RS[0, j]
            cl = RS[1, j]
            runs += 1
    rlen[cur] = cl
    rnext[cur] = -1
    return head, runs, amb


@njit(cache=True)
def _sort_runs(RS, k):
    """Runs RS[:, :k] in ascending order of their first page."""
    if k > 1:
        order = np.argsort(RS[0, :k])
        st = RS[0, :k][order]
        ln = RS[1, :k][order]
        RS[0, :k] = st
        RS[1, :k] = ln


@njit(cache=True)
def _runs_of(head, rlen, rnext, RS, k):
    """Append the runs of the holding at `head` to RS[:, k:]; returns the new count."""
    p0 = head
    while p0 >= 0:
        RS[0, k] = p0
        RS[1, k] = rlen[p0]
        k += 1
        p0 = rnext[p0]
    return k


@njit(cache=True)
def _push_runs(NS, node, RS, k, t, stack, pos, holder, free_t):
    """Give the pages of runs RS[:, :k] (ascending) back: highest first, so the lowest ends on top."""
    base = NS[node, NB_BASE]
    tp = NS[node, NB_TOP]
    for r in range(k - 1, -1, -1):
        s = RS[0, r]
        for g in range(s + RS[1, r] - 1, s - 1, -1):
            stack[base + tp] = g
            pos[g] = tp
            holder[g] = -1
            free_t[g] = t
            tp += 1
    NS[node, NB_TOP] = tp


@njit(cache=True)
def _track(NS, d, t, dinfl, dused, t_warm, frozen):
    """Rooms in flight and pages held on decode node d, integrated over time (after the warm-up and
    until the arrivals stop: NB_AREA; from the start: NB_AREA_ALL)."""
    lt = NS[d, NB_LASTT]
    if not frozen:
        a = max(lt, t_warm)
        if t > a:
            NS[d, NB_AREA] += NS[d, NB_INFL] * (t - a)
            NS[d, NB_UAREA] += NS[d, NB_USED] * (t - a)
        NS[d, NB_AREA_ALL] += NS[d, NB_INFL] * (t - lt)
        NS[d, NB_UAREA_ALL] += NS[d, NB_USED] * (t - lt)
    NS[d, NB_LASTT] = t
    NS[d, NB_INFL] += dinfl
    NS[d, NB_USED] += dused
    if NS[d, NB_INFL] > NS[d, NB_MAXINFL]:
        NS[d, NB_MAXINFL] = NS[d, NB_INFL]
    if NS[d, NB_USED] > NS[d, NB_MAXUSED]:
        NS[d, NB_MAXUSED] = NS[d, NB_USED]


@njit(cache=True)
def _near(x, t, clear):
    return x >= 0 and abs(x - t) < clear


@njit(cache=True)
def _late_conflict(ST, NS, slot, t, ps, clear, depth, AR, holder, pos, free_t, late_t):
    """0 if nothing stands within `clear` of a late landing at t on its receiver pages; 1 if an event on
    them is (or is scheduled for their holder) that near; 2 if only a page free near the top of the
    stack (likely handed out within `clear`) stands in the way."""
    dn = ST[slot, DN]
    base = NS[dn, NB_BASE]
    top = NS[dn, NB_TOP]
    amask = (1 << ARENA_BITS) - 1
    worst = 0
    for r in range(ST[slot, AR_N]):
        i = (ST[slot, AR_OFF] + r) & amask
        for p in range(AR[i, 0] // ps, (AR[i, 1] - 1) // ps + 1):
            g = base + p
            if late_t[g] > t - clear:
                return 1
            h = holder[g]
            if h < 0:
                if free_t[g] > t - clear:
                    return 1
                if top - 1 - pos[g] < depth:
                    worst = 2
            elif (
                _near(ST[h, T_A], t, clear)
                or _near(ST[h, T_X], t, clear)
                or _near(ST[h, T_R], t, clear)
                or _near(ST[h, T_END], t, clear)
                or _near(ST[h, T_AB], t, clear)
            ):
                return 1
    return worst


@njit(cache=True)
def _finish(G, ST, SLOTS, slot, FS, EPRC, EPRN):
    c = ST[slot, CLS]
    FS[1] -= ST[slot, EST] / 16.0
    EPRN[c] += 1
    EPRC[c] += (ST[slot, EV] - EPRC[c]) / min(EPRN[c], 200)  # the mean, then a moving one (fragmentation grows)
    G[G_FIN_EV] += ST[slot, EV]
    G[G_FIN_N] += 1
    G[G_ALIVE] -= 1
    SLOTS[G[G_NFREE]] = slot
    G[G_NFREE] += 1


@njit(cache=True, nogil=True)
def _run(G, CF, FS, EPRC, EPRN, BX0, BX1, BM, NS, ST, H, SLOTS, B, B8, stack, pos, holder, rlen, rnext, free_t, late_t,
         AR, c_gap, c_dn, c_pn, c_prompt, c_out, c_flags, c_room, c_off, o_t, o_status, RS):  # fmt: skip
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
                        _track(NS, d, G[G_LAST_T], 0, 0, t_warm, False)
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
                head, runs, amb = _alloc(NS, dn, dpp, slot, t, clear, stack, pos, holder, rlen, rnext, late_t, RS)
                G[G_AMBIG] += amb
                ST[slot, DP_HEAD] = head
                ST[slot, DP_PAGES] = dpp
                ST[slot, DO_PAGES] = dop
                ST[slot, PF_PAGES] = pfp
                G[G_D_ALLOCS] += 1
                G[G_D_RANGES] += runs
                _emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, ALLOC, head, ps, rlen, rnext, -1)
                NS[dn, NB_AVAIL] -= dpp + dop
                NS[pn, NB_AVAIL] -= pfp
                _track(NS, dn, t, 1, dpp, t_warm, G[G_STOPPED] == 1)
                ST[slot, KIND] = K_PALLOC
                G[G_HEAP] = _hpush(H, G[G_HEAP], (ST[slot, T_P] << SLOT_BITS) | slot)
                continue
        if G[G_HEAP] == 0:
            return R_DONE
        key, n = _hpop(H, G[G_HEAP])
        G[G_HEAP] = n
        t = key >> SLOT_BITS
        slot = key & SLOT_MASK
        G[G_NOW] = t
        kind = ST[slot, KIND]
        dn = ST[slot, DN]
        pn = ST[slot, PN]
        frozen = G[G_STOPPED] == 1
        if kind == K_PALLOC:  # prefill computes the prompt (one slot for a placeholder)
            head, runs, amb = _alloc(
                NS, pn, ST[slot, PF_PAGES], slot, t, clear, stack, pos, holder, rlen, rnext, late_t, RS
            )
            ST[slot, PF_HEAD] = head
            G[G_P_ALLOCS] += 1
            G[G_P_RANGES] += runs
            _emit_pages(G, NS, B, B8, ST, slot, pn, dark, t, ALLOC, head, ps, rlen, rnext, -1)
            sent = ST[slot, SENT]
            _emit_tokens(G, NS, B, B8, ST, slot, pn, pn, dark, t, WRITE, head, sent, ps, rlen, rnext, -1)
            _emit_tokens(G, NS, B, B8, ST, slot, pn, pn, dark, t, READ, head, sent, ps, rlen, rnext, -1)
            if ST[slot, FLAGS] & AB:
                ST[slot, KIND] = K_ABORT
                G[G_HEAP] = _hpush(H, G[G_HEAP], (ST[slot, T_AB] << SLOT_BITS) | slot)
            else:
                ST[slot, KIND] = K_LAND
                G[G_HEAP] = _hpush(H, G[G_HEAP], (ST[slot, T_X] << SLOT_BITS) | slot)
        elif kind == K_LAND:  # the transfer lands in decode's pre-allocation; prefill lets go
            dp, sent = ST[slot, DP_HEAD], ST[slot, SENT]
            _emit_tokens(G, NS, B, B8, ST, slot, pn, dn, dark, t, TRANSFER, dp, sent, ps, rlen, rnext, dn)
            _emit_pages(G, NS, B, B8, ST, slot, pn, dark, t, FREE, ST[slot, PF_HEAD], ps, rlen, rnext, -1)
            k = _runs_of(ST[slot, PF_HEAD], rlen, rnext, RS, 0)
            _push_runs(NS, pn, RS, k, t, stack, pos, holder, free_t)
            NS[pn, NB_AVAIL] += ST[slot, PF_PAGES]
            ST[slot, KIND] = K_READ
            G[G_HEAP] = _hpush(H, G[G_HEAP], (ST[slot, T_R] << SLOT_BITS) | slot)
        elif kind == K_READ:  # decode starts: reads the prompt, allocates the output
            dp = ST[slot, DP_HEAD]
            _emit_tokens(G, NS, B, B8, ST, slot, dn, dn, dark, t, READ, dp, ST[slot, PROMPT], ps, rlen, rnext, -1)
            head, runs, amb = _alloc(
                NS, dn, ST[slot, DO_PAGES], slot, t, clear, stack, pos, holder, rlen, rnext, late_t, RS
            )
            G[G_AMBIG] += amb
            ST[slot, DO_HEAD] = head
            G[G_D_ALLOCS] += 1
            G[G_D_RANGES] += runs
            _emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, ALLOC, head, ps, rlen, rnext, -1)
            _track(NS, dn, t, 0, ST[slot, DO_PAGES], t_warm, frozen)
            ST[slot, KIND] = K_END
            G[G_HEAP] = _hpush(H, G[G_HEAP], (ST[slot, T_END] << SLOT_BITS) | slot)
        elif kind == K_END:  # the output is written; everything goes back
            dp = ST[slot, DP_HEAD]
            do = ST[slot, DO_HEAD]
            _emit_tokens(G, NS, B, B8, ST, slot, dn, dn, dark, t, WRITE, do, ST[slot, OUT], ps, rlen, rnext, -1)
            _emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, FREE, dp, ps, rlen, rnext, -1)
            _emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, FREE, do, ps, rlen, rnext, -1)
            k = _runs_of(dp, rlen, rnext, RS, 0)
            k = _runs_of(do, rlen, rnext, RS, k)
            _sort_runs(RS, k)  # both holdings' pages go back together, sorted
            _push_runs(NS, dn, RS, k, t, stack, pos, holder, free_t)
            NS[dn, NB_AVAIL] += ST[slot, DP_PAGES] + ST[slot, DO_PAGES]
            _track(NS, dn, t, -1, -(ST[slot, DP_PAGES] + ST[slot, DO_PAGES]), t_warm, frozen)
            _finish(G, ST, SLOTS, slot, FS, EPRC, EPRN)
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
            _emit_pages(G, NS, B, B8, ST, slot, dn, dark, t, FREE, dp, ps, rlen, rnext, -1)
            k = _runs_of(dp, rlen, rnext, RS, 0)
            _push_runs(NS, dn, RS, k, t, stack, pos, holder, free_t)
            NS[dn, NB_AVAIL] += ST[slot, DP_PAGES] + ST[slot, DO_PAGES]
            _track(NS, dn, t, -1, -ST[slot, DP_PAGES], t_warm, frozen)
            ST[slot, T_AB] = -1  # no longer holds: its times no longer bound anyone's late landing
            ST[slot, KIND] = K_LATE
            G[G_HEAP] = _hpush(H, G[G_HEAP], (ST[slot, T_LATE] << SLOT_BITS) | slot)
        else:  # K_LATE: the aborted request's transfer lands late, into pages it no longer holds
            if G[G_ARENA] - ST[slot, AR_OFF] > (1 << ARENA_BITS):
                raise ValueError("late-landing arena overrun")
            why = _late_conflict(ST, NS, slot, t, ps, clear, CF[C_DEPTH], AR, holder, pos, free_t, late_t)
            if why and ST[slot, NUDGES] < MAX_NUDGES:
                ST[slot, NUDGES] += 1
                G[G_NUDGE] += 1
                t2 = t + clear + 5_000 + (ST[slot, JIT] + 7_919 * ST[slot, NUDGES]) % 35_000
                ST[slot, T_LATE] = t2
                G[G_HEAP] = _hpush(H, G[G_HEAP], (t2 << SLOT_BITS) | slot)
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
                _emit(G, NS, B, B8, ST, slot, pn, dark, t, TRANSFER, room, s, e, dn)
                for p in range(s // ps, (e - 1) // ps + 1):
                    late_t[base + p] = t
            _emit_pages(G, NS, B, B8, ST, slot, pn, dark, t, FREE, ST[slot, PF_HEAD], ps, rlen, rnext, -1)
            k = _runs_of(ST[slot, PF_HEAD], rlen, rnext, RS, 0)
            _push_runs(NS, pn, RS, k, t, stack, pos, holder, free_t)
            NS[pn, NB_AVAIL] += ST[slot, PF_PAGES]
            ST[slot, T_LATE] = -1
            _finish(G, ST, SLOTS, slot, FS, EPRC, EPRN)


# --- traffic ------------------------------------------------------------------------------------------
def _lengths(rng, n: int, context: int, limit: int, placeholder_rate: float):
    out = np.clip(np.exp(rng.normal(math.log(OUT_MEDIAN), OUT_SIGMA, n)), 1, OUT_MAX).astype(np.int64)
    prompt = np.clip(np.exp(rng.normal(math.log(PROMPT_MEDIAN), PROMPT_SIGMA, n)), MIN_PROMPT, context - out)
    prompt = prompt.astype(np.int64)
    forced = rng.random(n) < placeholder_rate
    long = limit + (rng.random(n) * np.maximum(1, context - out - limit)).astype(np.int64)
    prompt = np.where(forced, np.minimum(long, context - out), prompt)
    return prompt, out, prompt >= limit


def _timings(prompt, out, ph, ab, u, ps: int, beta: float, s0: float) -> np.ndarray:
    """Per request, microseconds after its arrival: prefill start, landing, decode read, end, abort,
    late landing, nudge jitter, gateway lead (columns of c_off)."""
    n = len(prompt)
    sent = np.where(ph, 1, prompt)
    d_p = 500 + (u[:, 0] * 2_500).astype(np.int64)
    d_x = d_p + (2_000 + sent * (0.9 + 0.2 * u[:, 1]) + u[:, 2] * 3_000).astype(np.int64)
    d_r = d_x + 2_000 + (u[:, 3] * 18_000).astype(np.int64)
    size = (-(-prompt // ps) - (-out // ps)) * ps
    w = np.minimum(W_HI, (s0 / size) ** beta) if beta else np.ones(n)
    tpot = 12_000 + u[:, 4] * 23_000
    d_end = d_r + 20_000 + np.minimum(out * tpot * w, MAX_DECODE_US).astype(np.int64)
    lo = np.maximum(d_p, 1_000) + 100
    hi = d_x - 100
    d_ab = lo + (u[:, 5] * (hi - lo)).astype(np.int64)
    d_late = d_ab + 200_000 + (u[:, 6] * 700_000).astype(np.int64)
    off = np.zeros((n, 8), np.int64)
    off[:, 0], off[:, 1], off[:, 2], off[:, 3] = d_p, d_x, d_r, d_end
    off[:, 4] = np.where(ab, d_ab, 0)
    off[:, 5] = np.where(ab, d_late, 0)
    off[:, 6] = (u[:, 7] * 35_000).astype(np.int64)
    off[:, 7] = 1_000 + ((u[:, 7] * 1e6) % 1 * 4_000).astype(np.int64)
    return off


def _draw(rng, n: int, p: dict) -> dict[str, np.ndarray]:
    prompt, out, ph = _lengths(rng, n, p["context"], p["limit"], p["placeholder_rate"])
    ab = rng.random(n) < p["abort_rate"]
    u = rng.random((n, 8))
    return {
        "gap": rng.exponential(1.0, n),
        "dn": rng.integers(0, p["D"], n),
        "pn": rng.integers(0, p["P"], n),
        "prompt": prompt,
        "out": out,
        "flags": ph.astype(np.int64) * PH + ab.astype(np.int64) * AB,
        "room": rng.integers(1, 2**62, n, dtype=np.int64),
        "off": _timings(prompt, out, ph, ab, u, p["ps"], p["beta"], p["s0"]),
        "acct": rng.zipf(1.3, n) % 5000,
        "tail": rng.integers(500, 3_000, n),
    }


def _sizing(seed: int, p: dict, concurrency: float, beta: float | None, bursts: int, mult: tuple[float, float]):
    """The hold exponent and the bursts: the time-weighted room size (slots) against the pool."""
    rng = np.random.default_rng([seed, 7])
    n = 200_000
    prompt, out, ph = _lengths(rng, n, p["context"], p["limit"], p["placeholder_rate"])
    ab = rng.random(n) < p["abort_rate"]
    u = rng.random((n, 8))
    ps = p["ps"]
    dpp, dop = -(-prompt // ps), -(-out // ps)
    s0 = float(np.median((dpp + dop) * ps))
    pool = (p["decode_pool"] // ps - 1) * ps

    off = _timings(prompt, out, ph, ab, u, ps, 0.0, s0)
    dec = off[:, 3] - off[:, 2] - 20_000  # decode time at w = 1
    size = ((dpp + dop) * ps).astype(float)
    held_size = np.where(ab, dpp, dpp + dop) * ps

    def weigh(b: float):
        w = np.minimum(W_HI, (s0 / size) ** b) if b else 1.0
        end = off[:, 2] + 20_000 + np.minimum(dec * w, MAX_DECODE_US).astype(np.int64)
        hold = np.where(ab, off[:, 4], end).astype(float)
        held = np.where(ab, dpp * off[:, 4], dpp * end + dop * (end - off[:, 2])) * ps
        m_tw = held.sum() / hold.sum()
        e2 = (held_size.astype(float) ** 2 * hold).sum() / hold.sum()
        return m_tw, e2, hold.mean()

    def need(m_tw: float, e2: float, c: float) -> float:
        return (c * m_tw + 3 * math.sqrt(c * e2)) / pool

    if beta is None:  # the smallest beta (to 0.01) that fits: the fill falls as beta grows
        if need(*weigh(0.0)[:2], concurrency) <= FIT_MEAN:
            beta = 0.0
        elif need(*weigh(BETA_MAX)[:2], concurrency) > FIT_MEAN:
            beta = BETA_MAX
        else:
            lo, hi = 0.0, BETA_MAX
            while hi - lo > 0.01:
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if need(*weigh(mid)[:2], concurrency) <= FIT_MEAN else (mid, hi)
            beta = round(hi, 2)
    m_tw, e2, hold = weigh(beta)
    brng = np.random.default_rng([seed, 11])
    want = brng.uniform(mult[0], mult[1], bursts) if bursts else np.zeros(0)
    share = brng.uniform(0.04, 0.08, bursts)  # of the trace's time

    def layout(scale: float):
        m = 1 + scale * (want - 1)
        mean_t = 1 + float((share * (m - 1)).sum())
        return m, mean_t, (float(m.max()) if bursts else 1.0) / mean_t

    lo, hi = 0.0, 1.0
    if bursts and need(m_tw, e2, concurrency * layout(1.0)[2]) > FIT_PEAK:
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if need(m_tw, e2, concurrency * layout(mid)[2]) <= FIT_PEAK else (lo, mid)
        scale = lo
    else:
        scale = 1.0
    m, mean_t, peak = layout(scale)
    q = share * m / mean_t  # the bursts' shares of the requests
    seg = 0.9 / max(1, bursts)
    x0 = np.array([0.05 + j * seg + brng.random() * max(0.0, seg - q[j]) for j in range(bursts)])
    return {
        "beta": float(beta),
        "s0": s0,
        "mean_hold_s": hold / 1e6,
        "mean_request_slots": float(((dpp + dop) * ps).mean()),
        "room_slots_time_weighted": m_tw,
        "mean_fill": need(m_tw, e2, concurrency) - 3 * math.sqrt(concurrency * e2) / pool,
        "burst_scale": scale,
        "burst_mult": [round(float(x), 3) for x in m],
        "burst_time_share": [round(float(x), 4) for x in share],
        "burst_request_share": [round(float(x), 4) for x in q],
        "burst_start": [round(float(x), 4) for x in x0],
        "peak_factor": peak,
        "peak_fill_3sigma": need(m_tw, e2, concurrency * peak),
        "mean_time_mult": mean_t,
        "_bx0": x0,
        "_bx1": x0 + q,
        "_bm": m.astype(np.float64),
    }


# --- output ---------------------------------------------------------------------------------------------
DICT = pa.dictionary(pa.int8(), pa.string())
# PAGE_SCHEMA with its text columns handed over dictionary-encoded (as Parquet stores them anyway); the
# files keep no Arrow schema, so every reader sees PAGE_SCHEMA's plain strings
PAGE_WRITE_SCHEMA = pa.schema([pa.field(f.name, DICT) if f.type == pa.string() else f for f in PAGE_SCHEMA])
WRITE_OPTIONS = {"use_dictionary": ["node", "op", "peer", "src"], "compression": "snappy", "store_schema": False}


def _codes(codes: np.ndarray, values: pa.Array) -> pa.DictionaryArray:
    """int8 codes (-1: null) -> a dictionary array, without strings per row."""
    mask = codes < 0
    idx = pa.array(np.where(mask, 0, codes).astype(np.int8), mask=mask if mask.any() else None)
    return pa.DictionaryArray.from_arrays(idx, values)


def _ints(arr: np.ndarray, typ: pa.DataType = pa.int64()) -> pa.Array:
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    return pa.Array.from_buffers(typ, len(arr), [None, pa.py_buffer(arr)])


class _Pages:
    """Page-event writers, one file per node; row groups are built and written by a thread of their own
    while the compiled loop (which releases the GIL) goes on."""

    def __init__(self, pages: Path, names: list[str], roles: list[str], skews: np.ndarray, dark: int):
        self.names, self.roles, self.skews, self.dark = names, roles, skews, dark
        self.writers = {
            j: pq.ParquetWriter(pages / f"{n}.parquet", PAGE_WRITE_SCHEMA, **WRITE_OPTIONS)
            for j, n in enumerate(names)
            if j != dark
        }
        self.seq = np.zeros(len(names), np.int64)
        self.ops = pa.array(OPS)
        self.peers = pa.array([n for n, r in zip(names, roles, strict=True) if r == "decode"])
        self.queue: queue.Queue = queue.Queue(maxsize=3)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self._write(*item)
                except BaseException as e:  # handed to the caller at its next submit or close
                    self.error = e

    def submit(self, j: int, B: np.ndarray, B8: np.ndarray, m: int) -> None:
        if self.error is not None:
            raise self.error
        if m:
            self.queue.put((j, B[j, :, :m].copy(), B8[j, :, :m].copy()))

    def _write(self, j: int, B: np.ndarray, B8: np.ndarray) -> None:
        m = B.shape[1]
        op = B8[0]
        src = np.where(op == WRITE, 0, -1).astype(np.int8)
        seq = self.seq[j] + 1 + np.arange(m, dtype=np.int64)
        self.seq[j] += m
        table = pa.Table.from_arrays(
            [
                _codes(np.zeros(m, np.int8), pa.array([self.names[j]])),
                _ints(seq),
                _ints(B[0] + (self.skews[j] + T0.astype(np.int64)), pa.timestamp("us", tz="UTC")),
                _codes(op, self.ops),
                _ints(B[1]),
                _ints(B[2]),
                _ints(B[3]),
                _codes(B8[1], self.peers),
                _codes(src, pa.array([self.roles[j]])),
            ],
            schema=PAGE_WRITE_SCHEMA,
        )
        self.writers[j].write_table(table, row_group_size=m)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
        for w in self.writers.values():
            w.close()
        if self.error is not None:
            raise self.error


def generate(
    out: Path,
    events: int | None = None,
    requests: int | None = None,
    seed: int = 1,
    concurrency: float = 300,
    page_size: int = 32,
    prefill_nodes: int = 3,
    decode_nodes: int = 4,
    dark_node: str | None = None,
    placeholder_rate: float = 0.002,
    abort_rate: float = 0.02,
    decode_pool: int = DECODE_POOL,
    prefill_pool: int = PREFILL_POOL,
    context_len: int = CONTEXT,
    hold_exponent: float | None = None,
    bursts: int = 3,
    burst_mult: tuple[float, float] = (3.0, 5.0),
    row_group: int = 1_000_000,
    chunk: int = 65_536,
    verbose: bool = False,
) -> dict:
    """Write a bundle to out/bundle and out/counts.json; returns the counts. Size by `events` (page
    events written, about) or `requests` (default 100,000 requests)."""
    t_start = time.perf_counter()
    out = Path(out)
    ps = int(page_size)
    if not 1 <= ps <= 64:
        raise ValueError("page_size must be 1..64")
    D, P = int(decode_nodes), int(prefill_nodes)
    if not (1 <= D <= 100 and 1 <= P <= 100):
        raise ValueError("1..100 decode and prefill nodes")
    if events is None and requests is None:
        requests = 100_000
    if (events is not None and events < 1) or (requests is not None and requests < 1) or concurrency <= 0:
        raise ValueError("events, requests and concurrency must be positive")
    dec_names = [f"decode-{j}" for j in range(D)]
    pre_names = [f"prefill-{i}" for i in range(P)]
    names = dec_names + pre_names
    roles = ["decode"] * D + ["prefill"] * P
    dark_name = dec_names[-1] if dark_node is None else dark_node
    if dark_name and dark_name not in names:
        raise ValueError(f"--dark-node {dark_name!r} is not a node ({', '.join(names)})")
    dark = names.index(dark_name) if dark_name else -1
    limit = min(context_len - 1, prefill_pool - 1) - 5
    if context_len - OUT_MAX <= limit and placeholder_rate > 0:
        raise ValueError("the context must exceed the prefill limit by more than the longest output")
    p = {
        "context": context_len, "limit": limit, "placeholder_rate": placeholder_rate, "abort_rate": abort_rate,
        "D": D, "P": P, "ps": ps, "decode_pool": decode_pool,
    }  # fmt: skip
    sz = _sizing(seed, p, concurrency, hold_exponent, bursts, burst_mult)
    p["beta"], p["s0"] = sz["beta"], sz["s0"]
    lam_mean = D * concurrency / (sz["mean_hold_s"] * 1e6)  # arrivals per us
    lam0 = lam_mean / sz["mean_time_mult"]
    rng = np.random.default_rng(seed)
    skews = rng.integers(-1_500_000, 1_500_001, D + P)

    # node pools: pages 1 .. npg-1 of each (page 0 and the last page unused: slots stay inside the pool)
    pools = [decode_pool] * D + [prefill_pool] * P
    npg = np.array([pl // ps for pl in pools], np.int64)
    base = np.concatenate([[0], np.cumsum(npg)[:-1]]).astype(np.int64)
    total = int(npg.sum())
    stack = np.zeros(total, np.int32)
    for j in range(D + P):
        usable = int(npg[j]) - 1
        stack[base[j] : base[j] + usable] = base[j] + np.arange(usable, 0, -1)  # page 1 on top
    pos = np.full(total, -1, np.int32)
    for j in range(D + P):
        usable = int(npg[j]) - 1
        pos[base[j] + np.arange(usable, 0, -1)] = np.arange(usable)
    holder = np.full(total, -1, np.int32)
    rlen = np.zeros(total, np.int32)
    rnext = np.full(total, -1, np.int32)
    free_t = np.full(total, NEVER, np.int64)
    late_t = np.full(total, NEVER, np.int64)
    NS = np.zeros((D + P, NN), np.int64)
    NS[:, NB_BASE] = base
    NS[:, NB_NPG] = npg
    NS[:, NB_TOP] = npg - 1
    NS[:, NB_AVAIL] = npg - 1
    max_pages = -(-context_len // ps) + 2
    cap = row_group + 2 * max_pages + 16
    B = np.zeros((D + P, 4, cap), np.int64)
    B8 = np.zeros((D + P, 2, cap), np.int8)
    RS = np.zeros((2, 2 * max_pages + 16), np.int64)  # runs (first page, pages) being allocated or freed
    AR = np.zeros((1 << ARENA_BITS, 2), np.int64)
    slots = 1 << 14
    ST = np.zeros((slots, NF), np.int64)
    H = np.zeros(slots, np.int64)
    SLOTS = np.arange(slots - 1, -1, -1, dtype=np.int64)
    G = np.zeros(NG, np.int64)
    G[G_NFREE] = slots
    G[G_NEXT_T] = -1
    mean_pages = sz["mean_request_slots"] / ps
    epr0 = EPR0
    n_est = (events / epr0) if events else requests
    t_est = n_est / lam_mean
    CF = np.zeros(NC, np.int64)
    CF[C_PS], CF[C_D], CF[C_P], CF[C_DARK], CF[C_CLEAR] = ps, D, P, dark, CLEAR_US
    # a free page this near the top of its stack may be handed out within CLEAR_US
    CF[C_DEPTH] = int(4 * lam_mean / D * sz["peak_factor"] * CLEAR_US * max(mean_pages, 1)) + 64
    CF[C_MAXREQ] = requests or 0
    CF[C_TARGET] = events or 0
    CF[C_ROWG], CF[C_EPR0] = row_group, epr0
    CF[C_T_WARM] = int(min(2 * sz["mean_hold_s"] * 1e6, 0.1 * t_est))

    bundle = out / "bundle"
    pages_dir = bundle / "pages"
    pages_dir.mkdir(parents=True, exist_ok=True)
    for old in pages_dir.glob("*.parquet"):
        old.unlink()
    writer = _Pages(pages_dir, names, roles, skews, dark)
    (bundle / "gateway").mkdir(parents=True, exist_ok=True)
    gw_w = pq.ParquetWriter(bundle / "gateway" / "gateway.parquet", GATEWAY_SCHEMA)
    accounts = pa.array([f"acct-{a:05d}" for a in range(5000)])
    status_counts: dict[int, int] = {}
    k_written = 0
    ch: dict[str, np.ndarray] | None = None
    o_t = o_status = np.zeros(0, np.int64)

    def write_gateway(n: int) -> None:
        nonlocal k_written
        if ch is None or n == 0:
            return
        st = o_status[:n].astype(np.int32)
        for s, c in zip(*np.unique(st, return_counts=True), strict=True):
            status_counts[int(s)] = status_counts.get(int(s), 0) + int(c)
        off = ch["off"][:n]
        t = o_t[:n]
        gw_t = t - off[:, 7]
        dur = np.where(st == 200, off[:, 3] + ch["tail"][:n], np.where(st == 499, off[:, 4], ch["tail"][:n]))
        dur = (dur + off[:, 7]) / 1000.0
        k = np.arange(k_written, k_written + n, dtype=np.int64)
        k_written += n
        gw_w.write_table(
            pa.Table.from_arrays(
                [
                    pa.array((gw_t + T0.astype(np.int64)).astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
                    pc.binary_join_element_wise("req-", pc.utf8_lpad(pc.cast(pa.array(k), pa.string()), 9, "0"), ""),
                    accounts.take(pa.array(ch["acct"][:n])),
                    _strings(np.zeros(n), ["tok"]),
                    _strings(np.zeros(n), ["203.0.113.9"]),
                    _strings(np.zeros(n), ["bench"]),
                    _strings(np.zeros(n), ["glm-5.3"]),
                    pa.array(st),
                    pa.array(ch["prompt"][:n]),
                    pa.array(np.where(st == 200, ch["out"][:n], 0)),
                    pa.array(np.round(dur, 3)),
                    pa.array(ch["room"][:n]),
                    _strings(ch["pn"][:n], pre_names),
                    _strings(ch["dn"][:n], dec_names),
                ],
                schema=GATEWAY_SCHEMA,
            )
        )

    bx0, bx1, bm = sz["_bx0"], sz["_bx1"], sz["_bm"]
    FS = np.array([lam0, 0.0])  # arrival rate (per us, outside bursts); events still expected of live requests
    EPRC = np.zeros(128)  # events written per finished request, by size class, dark decode node, abort
    EPRN = np.zeros(128, np.int64)
    flushes = 0
    while True:
        if ch is None:
            code = R_CHUNK
        else:
            code = _run(
                G, CF, FS, EPRC, EPRN, bx0, bx1, bm, NS, ST, H, SLOTS, B, B8, stack, pos, holder, rlen, rnext, free_t,
                late_t, AR, ch["gap"], ch["dn"], ch["pn"], ch["prompt"], ch["out"], ch["flags"], ch["room"], ch["off"],
                o_t, o_status, RS,
            )  # fmt: skip
        if code == R_CHUNK:
            write_gateway(int(G[G_CI]))
            ch = _draw(rng, chunk, p)
            o_t = np.zeros(chunk, np.int64)
            o_status = np.zeros(chunk, np.int64)
            G[G_CI], G[G_CLEN] = 0, chunk
        elif code == R_FLUSH:
            for j in range(D + P):
                m = int(NS[j, NB_FILL])
                if m >= row_group:
                    writer.submit(j, B, B8, row_group)
                    rest = m - row_group
                    B[j, :, :rest] = B[j, :, row_group:m]
                    B8[j, :, :rest] = B8[j, :, row_group:m]
                    NS[j, NB_FILL] = rest
                    flushes += 1
            if verbose:
                print(f"  {int(G[G_EVENTS]):,} events, {int(G[G_K]):,} requests, "
                      f"{time.perf_counter() - t_start:.1f} s", flush=True)  # fmt: skip
        elif code == R_GROW:
            grow = len(ST)
            if 2 * grow > SLOT_MASK + 1:
                raise RuntimeError("too many requests in flight")
            ST = np.concatenate([ST, np.zeros((grow, NF), np.int64)])
            H = np.concatenate([H, np.zeros(grow, np.int64)])
            SLOTS = np.concatenate([SLOTS, np.arange(2 * grow - 1, grow - 1, -1, dtype=np.int64)])
            G[G_NFREE] += grow
        else:
            break
    write_gateway(int(G[G_CI]))
    for j in range(D + P):
        if j != dark:
            writer.submit(j, B, B8, int(NS[j, NB_FILL]))
    writer.close()
    gw_w.close()
    for j, name in enumerate(names):
        d = bundle / "engine" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "server.log").write_text(
            startup_log(roles[j], pools[j], ps, context_len, tp_size=8, max_running_requests=4096)
        )

    t_stop = int(G[G_T_STOP])
    win = max(1, t_stop - int(CF[C_T_WARM]))
    usable = (npg - 1) * ps
    inflight = {
        dec_names[j]: {
            "mean": round(NS[j, NB_AREA] / win, 2) if t_stop > CF[C_T_WARM] else None,
            "mean_from_start": round(NS[j, NB_AREA_ALL] / max(1, t_stop), 2),
            "max": int(NS[j, NB_MAXINFL]),
            "pool_fill_mean": round(NS[j, NB_UAREA] * ps / win / usable[j], 4) if t_stop > CF[C_T_WARM] else None,
            "pool_fill_max": round(float(NS[j, NB_MAXUSED] * ps / usable[j]), 4),
        }
        for j in range(D)
    }
    means = [v["mean"] for v in inflight.values() if v["mean"] is not None]
    n_req = int(G[G_K])
    counts = {n: int(NS[j, NB_CNT]) for j, n in enumerate(names) if j != dark}
    meta = {
        "generator": "gen_realistic",
        "requests": n_req,
        "seed": seed,
        "events": int(G[G_EVENTS]),
        "events_target": events,
        "counts": counts,
        "dark_node": dark_name or None,
        "dark_node_events_not_written": int(NS[dark, NB_CNT]) if dark >= 0 else 0,
        "status": {str(k): v for k, v in sorted(status_counts.items())},
        "rejected_503": {"decode_full": int(G[G_N503D]), "prefill_full": int(G[G_N503P])},
        "placeholders": int(G[G_NPH]),
        "aborts": int(G[G_NAB]),
        "late_landings": int(G[G_LATE]),
        "late_nudges": int(G[G_NUDGE]),
        "late_unclear": int(G[G_UNCLEAR]),
        "late_free_near_top": int(G[G_NEARTOP]),
        "late_ambiguous_allocs": int(G[G_AMBIG]),
        "concurrency": concurrency,
        "inflight_mean": round(float(np.mean(means)), 2) if means else None,
        "inflight": inflight,
        "inflight_window_us": [int(CF[C_T_WARM]), t_stop],
        "ranges_per_alloc": {
            "decode": round(float(G[G_D_RANGES] / max(1, G[G_D_ALLOCS])), 3),
            "prefill": round(float(G[G_P_RANGES] / max(1, G[G_P_ALLOCS])), 3),
        },
        "events_per_request": round(G[G_EVENTS] / max(1, n_req), 2),
        "events_per_request_with_dark": round(G[G_ALLEV] / max(1, n_req), 2),
        "page_size": ps,
        "nodes": {"prefill": P, "decode": D},
        "pools": {"decode": decode_pool, "prefill": prefill_pool, "context": context_len, "prefill_limit": limit},
        "placeholder_rate": placeholder_rate,
        "abort_rate": abort_rate,
        "clock_skew_us": {n: int(s) for n, s in zip(names, skews, strict=True)},
        "trace_seconds": round(t_stop / 1e6, 1),
        "sizing": {k: v for k, v in sz.items() if not k.startswith("_")},
        "seconds": round(time.perf_counter() - t_start, 2),
    }
    (out / "counts.json").write_text(json.dumps(meta, indent=1))
    return meta


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--requests", type=int, help="number of requests (default 100000)")
    size.add_argument("--events", type=int, help="about this many page events written")
    ap.add_argument("--concurrency", type=float, default=300, help="mean rooms in flight per decode node")
    ap.add_argument("--page-size", type=int, default=32, help="1..64 (default 32)")
    ap.add_argument("--prefill-nodes", type=int, default=3)
    ap.add_argument("--decode-nodes", type=int, default=4)
    ap.add_argument("--dark-node", default=None, help="decode node without page events (default the last; '' none)")
    ap.add_argument("--placeholder-rate", type=float, default=0.002, help="share of prompts over the prefill limit")
    ap.add_argument("--abort-rate", type=float, default=0.02, help="share of requests aborted mid-transfer")
    ap.add_argument("--decode-pool", type=int, default=DECODE_POOL)
    ap.add_argument("--prefill-pool", type=int, default=PREFILL_POOL)
    ap.add_argument("--context", type=int, default=CONTEXT)
    ap.add_argument("--hold-exponent", default="auto", help="beta of the hold factor (S0/size)^beta, or auto")
    ap.add_argument("--bursts", type=int, default=3)
    ap.add_argument("--burst-mult", default="3,5", help="burst rate multipliers, LO,HI (scaled down to fit)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if not 1 <= a.page_size <= 64:
        ap.error("--page-size must be 1..64")
    lo, hi = (float(x) for x in a.burst_mult.split(","))
    try:
        meta = generate(
            a.out, events=a.events, requests=a.requests, seed=a.seed, concurrency=a.concurrency, page_size=a.page_size,
            prefill_nodes=a.prefill_nodes, decode_nodes=a.decode_nodes, dark_node=a.dark_node,
            placeholder_rate=a.placeholder_rate, abort_rate=a.abort_rate, decode_pool=a.decode_pool,
            prefill_pool=a.prefill_pool, context_len=a.context,
            hold_exponent=None if a.hold_exponent == "auto" else float(a.hold_exponent), bursts=a.bursts,
            burst_mult=(lo, hi), verbose=a.verbose,
        )  # fmt: skip
    except ValueError as e:
        ap.error(str(e))
    keys = ("requests", "events", "status", "placeholders", "aborts", "inflight_mean", "ranges_per_alloc", "seconds")
    print(json.dumps({k: meta[k] for k in keys}))


if __name__ == "__main__":
    # run as the module gen_realistic (benchmarks/ is on sys.path): numba's cache of the compiled loop
    # names its module, and a cache written under __main__ could not be loaded by an import
    import gen_realistic

    gen_realistic.main()
