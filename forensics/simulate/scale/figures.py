"""The scale generator's batch lines: the Prefill batch line of each request and the Decode batch lines of
each decode node while it has requests running, their figures counted over the requests' intervals
(queue slots, pages held), carried from slice to slice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.simulate.config import S
from forensics.simulate.scale.options import DAY, TICK_US
from forensics.simulate.scale.rows import Rows
from forensics.simulate.scale.traffic import active, centi

if TYPE_CHECKING:
    from forensics.simulate.scale.templates import Bundle


class Carry:
    """Requests of earlier slices still holding a queue slot or pages, the nodes' last line times."""

    def __init__(self, b: Bundle) -> None:
        self.dec: dict[str, np.ndarray] = {}
        self.pre: dict[str, np.ndarray] = {}
        self.last_tick = np.full(b.D, -1, dtype=np.int64)
        self.tick_no = np.zeros(b.D, dtype=np.int64)
        self.last_pline = np.full(b.P, -1, dtype=np.int64)
        self.pline_no = np.zeros(b.P, dtype=np.int64)
        self.last_end = np.zeros(b.P, dtype=np.int64)
        self.ticks = 0


def _join(old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.concatenate((old[k], v)) if old else v for k, v in new.items()}


def prefill_figures(b: Bundle, r: dict[str, Any], c: Carry, t_hi: int) -> None:
    """The Prefill batch line of each request (0.5.11: after its forward, its pages counted)."""
    ps, pool = b.cfg.page_size, b.cfg.prefill_nodes[0].pool_tokens
    base = b.cfg.start_us - DAY
    eng = ~r["ov"]
    new = {
        "node": r["pn"][eng],
        "ready": r["p_ready"][eng],
        "start": r["p_start"][eng],
        "pend": r["p_end"][eng],
        "land": r["land"][eng],
        "pages": (-(-r["n_new"][eng] // ps)) * ps,
    }
    iv = _join(c.pre, new)
    q_node, q = new["node"], new["start"]
    used = active(iv["node"], iv["start"], iv["land"], iv["pages"], q_node, q, base)
    queue = active(iv["node"], iv["ready"], iv["start"], np.ones_like(iv["node"]), q_node, q, base)
    inflight = active(iv["node"], iv["pend"], iv["land"], np.ones_like(iv["node"]), q_node, q, base)
    # per node, in order of start: the gap since the node's previous line, the line count
    order = np.lexsort((q, q_node))
    gap = np.zeros_like(q)
    no = np.zeros_like(q)
    qs, ns = q[order], q_node[order]
    first = np.r_[True, ns[1:] != ns[:-1]]
    prev = np.r_[0, qs[:-1]]
    prev[first] = c.last_pline[ns[first]]
    g = np.where(prev >= 0, qs - prev, 0)
    gap[order] = g
    rank = np.arange(len(ns)) - np.maximum.accumulate(np.where(first, np.arange(len(ns)), 0))
    no[order] = c.pline_no[ns] + rank + 1
    for n in np.unique(ns):
        sel = ns == n
        c.last_pline[n] = qs[sel][-1]
        c.pline_no[n] += int(sel.sum())
    thr = np.where(gap > 0, centi(r["n_new"][eng] * S, gap), 0)
    z = np.zeros(len(r["t0"]), dtype=np.int64)

    def full(v: np.ndarray) -> np.ndarray:
        out = z.copy()
        out[eng] = v
        return out

    r["pbatch"] = {
        "new": r["n_new"],
        "cached": r["K"],
        "used": full(used),
        "usage": full(centi(used, pool)),
        "queue": full(queue),
        "boot": z,
        "inflight": full(inflight),
        "thr": full(thr),
        "it": full(no),
    }
    keep = iv["land"] >= t_hi
    c.pre = {k: v[keep] for k, v in iv.items()}


def decode_ticks(b: Bundle, r: dict[str, Any], c: Carry, t_lo: int, t_hi: int, rows: Rows) -> None:
    """Decode batch lines of [t_lo, t_hi): every TICK_US while a decode node has requests running."""
    ps, pool = b.cfg.page_size, b.cfg.decode_nodes[0].pool_tokens
    base = b.cfg.start_us - DAY
    eng = ~r["ov"]
    ab = r["ab"][eng]
    xend = np.where(ab, r["abort_t"][eng], r["land"][eng])
    new = {
        "node": r["dn"][eng],
        "t0": r["t0"][eng],
        "alloc": r["d_alloc"][eng],
        "xend": xend,
        "land": np.where(ab, xend, r["land"][eng]),
        "read": np.where(ab, xend, r["read"][eng]),
        "end": np.where(ab, xend, r["end"][eng]),
        "L": r["L"][eng],
        "lpages": (-(-r["L"][eng] // ps)) * ps,
        "opages": np.where(ab, 0, (-(-r["out"][eng] // ps)) * ps),
    }
    iv = _join(c.dec, new)
    node, rd, end = iv["node"], iv["read"], iv["end"]
    # busy segments: the union of [read, end) per node
    live = end > rd
    o = np.lexsort((rd[live], node[live]))
    nd, s, e = node[live][o], rd[live][o], end[live][o]
    big = np.int64(1) << np.int64(42)
    ek = np.maximum.accumulate(nd * big + (e - b.cfg.start_us))
    sk = nd * big + (s - b.cfg.start_us)
    starts = np.r_[True, sk[1:] > ek[:-1]]
    seg_node, seg_a = nd[starts], s[starts]
    seg_b = (ek[np.r_[np.flatnonzero(starts)[1:] - 1, len(ek) - 1]] - seg_node * big) + b.cfg.start_us
    seg_a, seg_b = np.maximum(seg_a, t_lo), np.minimum(seg_b, t_hi)
    ok = seg_b > seg_a
    seg_node, seg_a, seg_b = seg_node[ok], seg_a[ok], seg_b[ok]
    phase = (np.arange(b.D) * 97_003) % TICK_US
    ph = phase[seg_node]
    k0 = -(-(seg_a - ph) // TICK_US)
    k1 = -(-(seg_b - ph) // TICK_US)
    cnt = np.maximum(k1 - k0, 0)
    tn = np.repeat(seg_node, cnt)
    first = np.repeat(np.cumsum(cnt) - cnt, cnt)
    tau = (np.repeat(k0, cnt) + np.arange(int(cnt.sum())) - first) * TICK_US + ph[np.repeat(np.arange(len(cnt)), cnt)]
    if len(tau):
        o = np.lexsort((tau, tn))
        tn, tau = tn[o], tau[o]
        ones = np.ones_like(node)
        running = active(node, rd, end, ones, tn, tau, base)
        held = active(node, iv["alloc"], end, iv["lpages"], tn, tau, base) + active(
            node, rd, end, iv["opages"], tn, tau, base
        )
        pre_tok = active(node, iv["alloc"], iv["xend"], iv["L"], tn, tau, base)
        prealloc = active(node, iv["t0"], iv["alloc"], ones, tn, tau, base)
        transfer = active(node, iv["alloc"], iv["xend"], ones, tn, tau, base)
        queue = active(node, iv["land"], rd, ones, tn, tau, base)
        fst = np.r_[True, tn[1:] != tn[:-1]]
        prev = np.r_[0, tau[:-1]]
        prev[fst] = c.last_tick[tn[fst]]
        gap = np.where(prev >= 0, tau - prev, TICK_US)
        rank = np.arange(len(tn)) - np.maximum.accumulate(np.where(fst, np.arange(len(tn)), 0))
        it = (c.tick_no[tn] + rank + 1) * 40
        for n in np.unique(tn):
            sel = tn == n
            c.last_tick[n] = tau[sel][-1]
            c.tick_no[n] += int(sel.sum())
        used = np.minimum(held, pool)
        gen = centi(running * 40 * S, gap)
        dnode = tn + b.P
        prog_tab = np.array([b.prog.get(("dbatch", n), -1) for n in range(b.NN)], dtype=np.int64)
        seq = (np.int64(1) << np.int64(60)) + c.ticks + np.arange(len(tn))
        c.ticks += len(tn)
        rows.add(
            "decode_batch",
            dnode,
            tau + b.offsets[dnode],
            seq,
            prog_tab[dnode],
            [running, used, centi(used, pool), centi(pre_tok, pool), prealloc, transfer, queue, gen, it],
        )
    keep = np.maximum(iv["end"], iv["xend"]) >= t_hi
    c.dec = {k: v[keep] for k, v in iv.items()}


# ------------------------------------------------------------------------------------------------
# Output
