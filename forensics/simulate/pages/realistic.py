"""`forensics simulate --scale --page-events realistic`: page-event bundles shaped like real incidents
(a compiled event loop, forensics.simulate.pages.loop; no ground-truth replay: the benchmarks' bundles,
benchmarks/shapes.py).

Cluster: `prefill_nodes` prefill nodes (180,000-slot pools) and `decode_nodes` decode nodes
(1,048,576-slot pools), context length 262,144, `page_size` 1..64. `dark_node` (default: the last
decode node; '' for none) writes no page events, but the transfers prefill sends it are logged. Each
node's clock is off by a fixed skew of up to +-1.5 s. The traffic, and the sizing that fits the rooms in
flight asked for (`concurrency`, 300, whatever the size) into the pools: traffic.py; the pools: kernel.py.

Per request (true clock; each node logs on its own): decode allocates the prompt's pages at arrival
and reserves the output's; 0.5-3 ms later prefill allocates, writes and reads the prompt (its pages
reserved at arrival too); its transfer (logged by prefill, peer = the decode node, the receiver's
slots) lands 2.5-8 ms (plus about 1 us per token) after decode's allocation; prefill frees its pages
as it sends; decode reads the prompt 2-20 ms after the landing (so ordinary transfers bound each
clock offset to about 5 ms), allocates the output pages, and at the end of its hold writes the
output and frees everything. A request that either pool cannot hold (free pages less those
reserved) gets HTTP 503 and no page events.

Aborts (`abort_rate`): the client aborts between prefill's allocation and the landing; decode frees
the prompt pages at once (no read); the transfer lands 200-900 ms after the abort, into pages LIFO
reuse has likely handed on: a late foreign write. A late landing is moved on (by 55-90 ms, up to 40
times) while an event on its receiver pages is, or is scheduled, within 50 ms of it, or one of its
pages is free near the top of the free stack (likely to be handed out within 50 ms); the summary says
how many still landed near an event (late_unclear) and how many allocations took a page within 50 ms
after a late landing into it while it was free (late_ambiguous_allocs): those few may be ambiguous.

Page events go to pages/<node>.parquet per node (PAGE_SCHEMA), in seq order (seq from 1, ts
monotone), written as 1M-row row groups while the loop runs (bounded memory at any size; parquet.py).
Gateway records (status 200, 499 for aborts, 503) go to gateway/gateway.parquet; engine/<node>/server.log
has the start-up lines (server_args, KV Cache, max_total_num_tokens) of every node, the dark one too."""

# ruff: noqa: F405 (the layout's column names)
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from forensics.contract import GATEWAY_SCHEMA
from forensics.simulate.pages.common import Gateway, write_startup_logs
from forensics.simulate.pages.layout import *  # noqa: F403
from forensics.simulate.pages.loop import run
from forensics.simulate.pages.parquet import PageFiles
from forensics.simulate.pages.traffic import OUT_MAX, draw, sizing

DECODE_POOL = 1_048_576
PREFILL_POOL = 180_000
CONTEXT = 262_144


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
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write OUT/bundle; returns the summary (events per node, what the sizing chose). Size by `events`
    (page events written, about) or `requests` (default 100,000 requests)."""
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
        raise ValueError(f"--no-telemetry {dark_name!r} is not a node ({', '.join(names)})")
    dark = names.index(dark_name) if dark_name else -1
    limit = min(context_len - 1, prefill_pool - 1) - 5
    if context_len - OUT_MAX <= limit and placeholder_rate > 0:
        raise ValueError("the context must exceed the prefill limit by more than the longest output")
    p = {
        "context": context_len, "limit": limit, "placeholder_rate": placeholder_rate, "abort_rate": abort_rate,
        "D": D, "P": P, "ps": ps, "decode_pool": decode_pool,
    }  # fmt: skip
    sz = sizing(seed, p, concurrency, hold_exponent, bursts, burst_mult)
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
    pos = np.full(total, -1, np.int32)
    for j in range(D + P):
        usable = int(npg[j]) - 1
        stack[base[j] : base[j] + usable] = base[j] + np.arange(usable, 0, -1)  # page 1 on top
        pos[base[j] + np.arange(usable, 0, -1)] = np.arange(usable)
    holder = np.full(total, -1, np.int32)
    rlen = np.zeros(total, np.int32)
    rnext = np.full(total, -1, np.int32)
    free_t = np.full(total, NEVER, np.int64)
    late_t = np.full(total, NEVER, np.int64)
    NS = np.zeros((D + P, NN), np.int64)
    NS[:, NB_BASE] = base
    NS[:, NB_NPG] = npg
    NS[:, NB_TOP] = NS[:, NB_AVAIL] = npg - 1
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
    n_est = (events / EPR0) if events else requests
    t_est = n_est / lam_mean
    CF = np.zeros(NC, np.int64)
    CF[C_PS], CF[C_D], CF[C_P], CF[C_DARK], CF[C_CLEAR] = ps, D, P, dark, CLEAR_US
    # a free page this near the top of its stack may be handed out within CLEAR_US
    CF[C_DEPTH] = int(4 * lam_mean / D * sz["peak_factor"] * CLEAR_US * max(mean_pages, 1)) + 64
    CF[C_MAXREQ] = requests or 0
    CF[C_TARGET] = events or 0
    CF[C_ROWG], CF[C_EPR0] = row_group, EPR0
    CF[C_T_WARM] = int(min(2 * sz["mean_hold_s"] * 1e6, 0.1 * t_est))

    bundle = out / "bundle"
    pages_dir = bundle / "pages"
    pages_dir.mkdir(parents=True, exist_ok=True)
    for old in pages_dir.glob("*.parquet"):
        old.unlink()
    writer = PageFiles(pages_dir, names, roles, skews, dark)
    (bundle / "gateway").mkdir(parents=True, exist_ok=True)
    gw_w = pq.ParquetWriter(bundle / "gateway" / "gateway.parquet", GATEWAY_SCHEMA)
    gateway = Gateway(pre_names, dec_names)
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
        table = gateway.table(
            gw_t, k, ch["acct"][:n], st, ch["prompt"][:n], np.where(st == 200, ch["out"][:n], 0), np.round(dur, 3),
            ch["room"][:n], ch["pn"][:n], ch["dn"][:n],
        )  # fmt: skip
        gw_w.write_table(table)

    bx0, bx1, bm = sz["_bx0"], sz["_bx1"], sz["_bm"]
    FS = np.array([lam0, 0.0])  # arrival rate (per us, outside bursts); events still expected of live requests
    EPRC = np.zeros(128)  # events written per finished request, by size class, dark decode node, abort
    EPRN = np.zeros(128, np.int64)
    flushes = 0
    while True:
        if ch is None:
            code = R_CHUNK
        else:
            code = run(
                G, CF, FS, EPRC, EPRN, bx0, bx1, bm, NS, ST, H, SLOTS, B, B8, stack, pos, holder, rlen, rnext, free_t,
                late_t, AR, ch["gap"], ch["dn"], ch["pn"], ch["prompt"], ch["out"], ch["flags"], ch["room"], ch["off"],
                o_t, o_status, RS,
            )  # fmt: skip
        if code == R_CHUNK:
            write_gateway(int(G[G_CI]))
            ch = draw(rng, chunk, p)
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
            if progress is not None:
                progress(
                    f"{int(G[G_EVENTS]):,} events, {int(G[G_K]):,} requests, {time.perf_counter() - t_start:.1f} s"
                )
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
    write_startup_logs(bundle, list(zip(names, roles, pools, strict=True)), ps, context_len, 4096)

    t_stop = int(G[G_T_STOP])
    win = max(1, t_stop - int(CF[C_T_WARM]))
    usable_slots = (npg - 1) * ps
    inflight = {
        dec_names[j]: {
            "mean": round(NS[j, NB_AREA] / win, 2) if t_stop > CF[C_T_WARM] else None,
            "mean_from_start": round(NS[j, NB_AREA_ALL] / max(1, t_stop), 2),
            "max": int(NS[j, NB_MAXINFL]),
            "pool_fill_mean": round(NS[j, NB_UAREA] * ps / win / usable_slots[j], 4) if t_stop > CF[C_T_WARM] else None,
            "pool_fill_max": round(float(NS[j, NB_MAXUSED] * ps / usable_slots[j]), 4),
        }
        for j in range(D)
    }
    means = [v["mean"] for v in inflight.values() if v["mean"] is not None]
    n_req = int(G[G_K])
    counts = {n: int(NS[j, NB_CNT]) for j, n in enumerate(names) if j != dark}
    meta = {
        "generator": "realistic",
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
    return meta
