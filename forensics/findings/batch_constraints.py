"""Findings stage, the allocator model against the pool occupancy a decode node printed: SGLang's
periodic `Decode batch` lines (batch_stats, every --decode-log-interval decode steps) give, at each
printed batch, the tokens in use (`#token`), the running requests and, from 0.5.4 on, the requests
pre-allocated and waiting for their transfer (`#transfer-req`). The lifecycle the model replays
(node_lifecycle.sql) says the same from the requests' own lines, so the two can be compared.

What the replay holds at a line's time is a range, not a number: a line's time is its true time cut to
its resolution, and each room's events are known to their own spread (a finished room's line and its
rounded durations, an aborted room's clock fit). Per line and count: `sure` the rooms that held their
pages over the whole stretch the line may have been printed in, `possible` those that may have held
them at some moment of it. SGLang extends a request's page table one token at a time while it decodes
(the model allocates its output at decode start), so the sound lower bound counts a running room's
input pages only; the model's own count (output allocated at decode start) is the upper bound.

- `consistency`: the share of printed lines whose counts lie in the replay's range (within page
  rounding), and how many lie above it (tokens in use that no logged room explains: allocations the
  logs miss, or rooms whose lines were lost) or below it; reported in allocator_model's basis.
- `pin_aborted_allocs`: an aborted room's pre-allocation time is an estimate (its prefill's
  start_time moved onto the decode clock); where a printed `#transfer-req` (or, without it, `#token`)
  falls inside that estimate's spread and every other room's part in the count is settled, the count
  says whether the room was pre-allocated by then: the spread the ensemble draws from is cut there.

Reads batch_stats through batch_occupancy.sql. Called from forensics.findings.likelihood (marked
"batch lines").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Protocol, TypeVar

import duckdb
import numpy as np

from forensics.paths import load_query


class Lifecycle(Protocol):
    """What is read of forensics.findings.allocator_walk.Lifecycle (one decode node's rooms, in room order)."""

    room: np.ndarray
    n_read: np.ndarray
    n_out: np.ndarray
    aborted: np.ndarray
    times: dict[str, np.ndarray]
    unc_alloc: np.ndarray
    res: np.ndarray


L = TypeVar("L", bound=Lifecycle)

# a finished room's times come from one line and up to three durations printed with 4 decimals
ROUNDING = 2e-4
# how far before an aborted room's free the printed counts are searched for its pre-allocation (s)
LOOKBACK = 60.0


@dataclass
class Printed:
    """One decode node's printed batch lines: time (s, node clock), resolution (s) and counts (-1: not
    printed by the release)."""

    t: np.ndarray
    res: np.ndarray
    tokens: np.ndarray
    running: np.ndarray
    transfer: np.ndarray
    ranks: int = 1  # distinct rank prefixes among the lines (DP attention: one pool per rank)


def printed(con: duckdb.DuckDBPyConnection, node: str) -> Printed:
    t = con.execute(load_query("findings", "batch_occupancy"), {"node": node}).fetchnumpy()

    def col(name: str, dtype: type, fill: float) -> np.ndarray:
        v = t[name]
        if np.ma.isMaskedArray(v):
            v = v.filled(fill)
        return np.asarray(v, dtype=dtype)

    return Printed(
        col("t", float, np.nan), col("res", float, 1.0), col("tokens_used", np.int64, -1),
        col("running_req", np.int64, -1), col("transfer_req", np.int64, -1), len(set(t["rank"].tolist())),
    )  # fmt: skip


@dataclass
class Intervals:
    """Holdings of one count: per interval its start, end, their spreads and its weight."""

    start: np.ndarray
    end: np.ndarray
    u_start: np.ndarray
    u_end: np.ndarray
    weight: np.ndarray

    def bounds(self, q: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per line time q (printed in [q, q + r)): the weight surely held over all of it, and the
        weight possibly held at some moment of it."""
        sure = _held(self.start + self.u_start, self.end - self.u_end, self.weight, q, r, surely=True)
        maybe = _held(self.start - self.u_start, self.end + self.u_end, self.weight, q, r, surely=False)
        return sure, maybe


def _held(s: np.ndarray, e: np.ndarray, w: np.ndarray, q: np.ndarray, r: np.ndarray, surely: bool) -> np.ndarray:
    """Sum of w over intervals [s, e) holding (surely: all of [q, q + r); else: some of it). The line
    resolution r is the node's (its lines share one), so both are point queries on shifted intervals."""
    rr = float(r.max()) if len(r) else 0.0
    if surely:
        s, e = s, e - rr  # s < q and e > q + r
    else:
        s, e = s - rr, e  # s < q + r and e > q
    ok = ~(np.isnan(s) | np.isnan(e)) & (s < e)
    s, e, w = s[ok], e[ok], w[ok]
    os_, oe = np.argsort(s, kind="stable"), np.argsort(e, kind="stable")
    cs = np.concatenate(([0], np.cumsum(w[os_])))
    ce = np.concatenate(([0], np.cumsum(w[oe])))
    return cs[np.searchsorted(s[os_], q, side="left")] - ce[np.searchsorted(e[oe], q, side="right")]


def _spreads(lc: Lifecycle) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per room the spread of its logged times (finished: the line's resolution and the durations'
    rounding; aborted: its pre-allocation's estimate), of its pre-allocation, and of its free."""
    base = lc.res + ROUNDING
    u_alloc = np.where(lc.aborted, np.maximum(lc.unc_alloc, 0) + lc.res, base)
    return base, u_alloc, lc.res + ROUNDING


def intervals(lc: Lifecycle, ps: int) -> dict[str, Intervals]:
    """The replay's holdings per printed count: tokens (sound lower bound: input pages; model: input and
    output pages), the transfer queue (pre-allocated until the landing or the abort), the running batch."""
    t = lc.times
    fin, ab = ~lc.aborted, lc.aborted
    base, u_alloc, u_free = _spreads(lc)
    n_in = -(-lc.n_read // ps) * ps
    n_out = np.where(fin, -(-lc.n_out // ps) * ps, 0)
    held_end = np.where(ab, t["t_free"], t["t_end"])
    u_end = np.where(ab, u_free, base)
    xfer_end = np.where(ab, t["t_free"], t["t_land"])
    one = np.ones(len(lc.room), dtype=np.int64)
    return {
        "tokens_in": Intervals(t["t_alloc"], held_end, u_alloc, u_end, n_in),
        "tokens_out": Intervals(t["t_read"], t["t_end"], base, base, n_out),
        "transfer": Intervals(t["t_alloc"], xfer_end, u_alloc, u_end, one),
        "running": Intervals(np.where(fin, t["t_read"], np.nan), t["t_end"], base, base, one),
    }


@dataclass
class Consistency:
    lines: int
    agree: int  # every printed count within the replay's range
    above: int  # tokens in use above what the replay can hold
    below: int
    excess: int  # the most tokens in use above the replay's range at one line
    exact: int  # tokens in use within the model's own count (output at decode start)

    def text(self, node: str) -> str:
        if not self.lines:
            return ""
        pct = 100 / self.lines
        out = (
            f"; {node}'s {self.lines:,} Decode batch lines against the replay: {self.agree * pct:.1f}% within its "
            f"range (tokens in use, running and pre-allocated requests), tokens {self.above * pct:.1f}% above it"
        )
        if self.above:
            out += f" (up to {self.excess:,} tokens the logged rooms do not explain: allocations the logs miss)"
        return out + f", {self.below * pct:.1f}% below; the model's own token count at {self.exact * pct:.1f}%"


def consistency(p: Printed, lc: Lifecycle, ps: int) -> Consistency:
    if not len(p.t):
        return Consistency(0, 0, 0, 0, 0, 0)
    iv = intervals(lc, ps)
    in_s, in_m = iv["tokens_in"].bounds(p.t, p.res)
    out_s, out_m = iv["tokens_out"].bounds(p.t, p.res)
    lo, hi = in_s, in_m + out_m  # SGLang grows a running room's pages one token at a time
    ok = (p.tokens < 0) | ((p.tokens >= lo) & (p.tokens <= hi))
    above = (p.tokens >= 0) & (p.tokens > hi)
    below = (p.tokens >= 0) & (p.tokens < lo)
    exact = (p.tokens >= 0) & (p.tokens >= in_s + out_s) & (p.tokens <= hi)
    for name, got in (("transfer", p.transfer), ("running", p.running)):
        s, m = iv[name].bounds(p.t, p.res)
        ok &= (got < 0) | ((got >= s) & (got <= m))
    excess = int((p.tokens - hi)[above].max()) if above.any() else 0
    return Consistency(len(p.t), int(ok.sum()), int(above.sum()), int(below.sum()), excess, int(exact.sum()))


def _counts(p: Printed, lc: Lifecycle, ps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Intervals]:
    """The count the pre-allocations are pinned on: (printed, sure, possible, per-room weight, the
    holdings). #transfer-req where the release prints it; else (0.4.9) #token, settled only where no
    room decodes (a running room's output grows unseen)."""
    iv = intervals(lc, ps)
    if (p.transfer >= 0).any():
        sure, maybe = iv["transfer"].bounds(p.t, p.res)
        return p.transfer, sure, maybe, iv["transfer"].weight, iv["transfer"]
    in_s, in_m = iv["tokens_in"].bounds(p.t, p.res)
    _, out_m = iv["tokens_out"].bounds(p.t, p.res)
    return p.tokens, in_s, in_m + out_m, iv["tokens_in"].weight, iv["tokens_in"]


def _explained(p: Printed, lc: Lifecycle, ps: int) -> np.ndarray:
    """Per line: its tokens in use lie in the replay's range (or are not printed). A line above it
    shows a room the logs miss, which would count as this room's part: it settles nothing."""
    iv = intervals(lc, ps)
    in_s, in_m = iv["tokens_in"].bounds(p.t, p.res)
    _, out_m = iv["tokens_out"].bounds(p.t, p.res)
    return np.asarray((p.tokens < 0) | ((p.tokens >= in_s) & (p.tokens <= in_m + out_m)))


def pin_aborted_allocs(p: Printed, lc: L, ps: int, passes: int = 2) -> tuple[L, int]:
    """lc with each aborted room's pre-allocation time narrowed to what the printed counts allow, and how
    many rooms were narrowed. The lines of the LOOKBACK seconds before the room's free whose count the
    other rooms settle (their part is the same whether or not they held it: sure = possible) say either
    "not yet pre-allocated" (the count is their part: the time is after the line) or "pre-allocated"
    (their part plus this room's: before the line's end). The time lies between the last such "not yet"
    and the first "pre-allocated" after it; within the estimate's own spread where the two overlap,
    else (the estimate is a median offset, the lines are evidence) where the lines say. A line whose
    tokens in use the replay cannot explain (a room the logs miss) settles nothing."""
    ab = np.flatnonzero(lc.aborted & ~np.isnan(lc.times["t_alloc"]) & ~np.isnan(lc.times["t_free"]))
    if not len(p.t) or not len(ab):
        return lc, 0
    out = copy.copy(lc)
    out.times, out.unc_alloc = dict(lc.times), lc.unc_alloc.copy()
    r = float(p.res.max())
    pinned: set[int] = set()
    for _ in range(passes):  # a room pinned may settle the count for another
        got, sure, maybe, w, hold = _counts(p, out, ps)
        explained = _explained(p, out, ps)
        t_alloc, unc = out.times["t_alloc"].copy(), out.unc_alloc.copy()
        for j in ab:
            free_lo = out.times["t_free"][j] - hold.u_end[j]  # lines clear of the free's own spread
            a = np.searchsorted(p.t, free_lo - LOOKBACK)
            b = np.searchsorted(p.t, free_lo - r)
            if a >= b:
                continue
            k = np.arange(a, b)
            q = p.t[k]
            # this room's own part in each line's range, as the count has it
            s0, e0, us, ue = hold.start[j], hold.end[j], hold.u_start[j], hold.u_end[j]
            mine_sure = (s0 + us < q) & (e0 - ue - r > q)
            mine_maybe = (s0 - us - r < q) & (e0 + ue > q)
            other_s = sure[k] - w[j] * mine_sure
            settled = (got[k] >= 0) & explained[k] & (other_s == maybe[k] - w[j] * mine_maybe)
            before = settled & (got[k] == other_s)
            after = settled & (got[k] == other_s + w[j])
            if not (before.any() or after.any()):
                continue
            lo_c = float(q[before].max()) if before.any() else -np.inf
            later = after & (q > lo_c)
            hi_c = float(q[later].min()) + r if later.any() else float(free_lo)
            p_lo, p_hi = t_alloc[j] - unc[j] - out.res[j], min(t_alloc[j] + unc[j] + out.res[j], float(free_lo))
            lo_t, hi_t = max(p_lo, lo_c), min(p_hi, hi_c)
            if lo_t > hi_t:  # the estimate and the lines disagree: the lines
                lo_t, hi_t = (lo_c if lo_c > -np.inf else hi_c - (p_hi - p_lo)), hi_c
            if (lo_t, hi_t) == (p_lo, p_hi) or lo_t > hi_t:
                continue
            pinned.add(int(j))
            t_alloc[j] = (lo_t + hi_t) / 2
            unc[j] = max((hi_t - lo_t) / 2 - out.res[j], 0.0)  # the walk adds the resolution's shift
        out.times["t_alloc"], out.unc_alloc = t_alloc, unc
    if not pinned:
        return lc, 0
    return out, len(pinned)


def constrain(con: duckdb.DuckDBPyConnection, node: str, lc: L, ps: int) -> tuple[L, str]:
    """The lifecycle with what node's batch lines settle, and the basis text saying what they showed
    (empty without batch lines)."""
    p = printed(con, node)
    if not len(p.t):
        return lc, ""
    if p.ranks > 1:  # which rank's pool each room used the logs do not say
        return lc, f"; {node}'s Decode batch lines come from {p.ranks} ranks (DP attention, a pool each): not compared"
    c = consistency(p, lc, ps)
    lc2, pinned = pin_aborted_allocs(p, lc, ps)
    text = c.text(node)
    if pinned:
        text += f"; {pinned:,} aborted rooms' pre-allocation times narrowed by the printed counts"
    return lc2, text
