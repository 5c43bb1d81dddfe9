"""`forensics simulate --scale --page-events uniform`: large page-event bundles of a uniform shape,
vectorized in numpy (no ground-truth replay; the benchmarks' bundles: benchmarks/run.py, the peers).

`nodes` decode nodes and as many prefill nodes (decode-0, prefill-0, ...). Request k goes to decode
node k % N and prefill node (k + k // N) % N, so every node serves one request per 25 ms tick. Each
node's clock is off by a fixed skew of up to 1.5 s (the analysis must bound it from ordinary transfers).
Per request: decode allocates the prompt, prefill allocates, writes, reads and transfers it (landing
between decode's alloc and read), decode reads the prompt, allocates and writes the output, frees
both. Consecutive requests on a node overlap in time (mild concurrency) but use opposite halves of
the pool, so no slot is ever held by two requests at once. Prompt and output lengths are log-normal.

A share of prompts (`placeholder_rate`, default 1%; production-like rates are nearer 0.2%) take
the placeholder path: the prompt exceeds the prefill limit, prefill computes and transfers 1 slot,
decode still reads the whole prompt, i.e. stale KV of earlier requests (the exposures to find).

Page events go to Parquet per node, sorted by seq as instrumentation writes them, written chunk by
chunk (ParquetWriter, about 1M-row row groups) so memory stays bounded at 1B events."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from forensics.contract import GATEWAY_SCHEMA, PAGE_SCHEMA
from forensics.simulate.pages.common import (
    ALLOC,
    FREE,
    OPS,
    READ,
    T0,
    TRANSFER,
    WRITE,
    Gateway,
    strings,
    write_startup_logs,
)

DECODE_POOL = 4_194_304
PREFILL_POOL = 681_280
CONTEXT = 1_048_576
TICK = 25_000  # us between consecutive requests on one node
MAX_PROMPT = 32_768  # ordinary prompts (log-normal, clipped)
MAX_OUTPUT = 4_096
PLACEHOLDER_MAX = 1_000_000  # placeholder prompts: PREFILL_POOL .. PLACEHOLDER_MAX tokens
DECODE_EVENTS = 6
PREFILL_EVENTS = 5
EVENTS_PER_REQUEST = DECODE_EVENTS + PREFILL_EVENTS
SRC = ["prefill", "decode"]
CHUNK_REQUESTS = 400_000

Cols = dict[str, np.ndarray]


def requests_for_events(events: int) -> int:
    return max(1, math.ceil(events / EVENTS_PER_REQUEST))


def _place(rng: np.random.Generator, n: int, length_pages: np.ndarray, half: np.ndarray, pool: int, page: int) -> Any:
    """Page-aligned start in the request's half of the pool so that the whole range fits in that half."""
    half_pages = pool // 2 // page
    room_pages = half_pages - 1 - length_pages  # keep page 0 of the pool unused
    off = (rng.random(n) * room_pages).astype(np.int64)
    return (half * half_pages + 1 + off) * page


class _NodeWriter:
    """Per-role writer: merges a chunk's events with the carry-over, sorts by time, writes per node."""

    def __init__(self, pages: Path, names: list[str], skews: np.ndarray, row_group: int) -> None:
        self.names = names
        self.skews = skews
        self.row_group = row_group
        self.writers = [pq.ParquetWriter(pages / f"{n}.parquet", PAGE_SCHEMA) for n in names]
        self.seq = np.zeros(len(names), dtype=np.int64)
        self.carry: Cols | None = None

    def add(self, cols: Cols, cutoff: int | None, peer_names: list[str]) -> None:
        if self.carry is not None:
            carry = self.carry
            cols = {k: np.concatenate([carry[k], cols[k]]) for k in cols}
        order = np.lexsort((cols["ev"], cols["r"], cols["t"], cols["node"]))
        cols = {k: v[order] for k, v in cols.items()}
        keep = np.ones(len(order), bool) if cutoff is None else cols["t"] < cutoff
        self.carry = None if cutoff is None else {k: v[~keep] for k, v in cols.items()}
        cols = {k: v[keep] for k, v in cols.items()}
        bounds = np.searchsorted(cols["node"], np.arange(len(self.names) + 1))
        for j, name in enumerate(self.names):
            a, b = bounds[j], bounds[j + 1]
            if a == b:
                continue
            m = b - a
            seq = self.seq[j] + 1 + np.arange(m, dtype=np.int64)
            self.seq[j] += m
            ts = T0 + (cols["t"][a:b] + self.skews[j]).astype("timedelta64[us]")
            table = pa.Table.from_arrays(
                [
                    strings(np.zeros(m, np.int32), [name]),
                    pa.array(seq),
                    pa.array(ts, pa.timestamp("us", tz="UTC")),
                    strings(cols["op"][a:b], OPS),
                    pa.array(cols["room"][a:b]),
                    pa.array(cols["start"][a:b]),
                    pa.array(cols["end"][a:b]),
                    strings(cols["peer"][a:b], peer_names),
                    strings(cols["src"][a:b], SRC),
                ],
                schema=PAGE_SCHEMA,
            )
            self.writers[j].write_table(table, row_group_size=self.row_group)

    def close(self) -> dict[str, int]:
        for w in self.writers:
            w.close()
        return {n: int(s) for n, s in zip(self.names, self.seq, strict=True)}


def _events(parts: list[Cols]) -> Cols:
    """Per-request event columns (one dict per event kind) -> flat columns, `ev` = index within request."""
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out["ev"] = np.repeat(np.arange(len(parts), dtype=np.int8), len(parts[0]["t"]))
    return out


def generate(
    out: Path,
    requests: int,
    seed: int = 1,
    nodes: int = 1,
    placeholder_rate: float = 0.01,
    chunk: int = CHUNK_REQUESTS,
    row_group: int = 1_000_000,
    page: int = 64,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Write OUT/bundle (page events, gateway, start-up lines); returns the summary (events per node)."""
    t_start = time.perf_counter()
    rng = np.random.default_rng(seed)
    N = nodes
    dec_names = [f"decode-{j}" for j in range(N)]
    pre_names = [f"prefill-{i}" for i in range(N)]
    phase = rng.integers(0, 5_000, N)  # per decode node, us
    dec_skew = rng.integers(-1_500_000, 1_500_000, N)
    pre_skew = rng.integers(-1_500_000, 1_500_000, N)
    bundle = out / "bundle"
    pages = bundle / "pages"
    pages.mkdir(parents=True, exist_ok=True)
    for old in pages.glob("*.parquet"):
        old.unlink()
    dec_w = _NodeWriter(pages, dec_names, dec_skew, row_group)
    pre_w = _NodeWriter(pages, pre_names, pre_skew, row_group)
    (bundle / "gateway").mkdir(parents=True, exist_ok=True)
    gw_w = pq.ParquetWriter(bundle / "gateway" / "gateway.parquet", GATEWAY_SCHEMA)
    gateway = Gateway(pre_names, dec_names)
    placeholders = 0
    for k0 in range(0, requests, chunk):
        k1 = min(requests, k0 + chunk)
        n = k1 - k0
        k = np.arange(k0, k1, dtype=np.int64)
        dnode = k % N
        r = k // N
        pnode = (k + r) % N
        half = r % 2
        room = rng.integers(1, 2**62, n, dtype=np.int64)
        t = r * TICK + phase[dnode] + rng.integers(0, 5_000, n)
        prompt = np.clip(np.exp(rng.normal(7.0, 1.2, n)), 16, MAX_PROMPT).astype(np.int64)
        placeholder = rng.random(n) < placeholder_rate
        placeholders += int(placeholder.sum())
        prompt = np.where(placeholder, rng.integers(PREFILL_POOL, PLACEHOLDER_MAX, n), prompt)
        output = np.clip(np.exp(rng.normal(5.3, 1.0, n)), 1, MAX_OUTPUT).astype(np.int64)
        dec_pages = -(-prompt // page)
        out_pages = -(-output // page)
        dec_start = _place(rng, n, dec_pages + out_pages, half, DECODE_POOL, page)
        dec_end = dec_start + dec_pages * page
        out_end = dec_end + out_pages * page
        sent = np.where(placeholder, 1, prompt)
        pre_start = _place(rng, n, -(-sent // page), half, PREFILL_POOL, page)
        pre_end = pre_start + (-(-sent // page)) * page
        xfer = rng.integers(3_000, 18_000, n)  # lands between decode's alloc (t) and read (t + 20 ms)
        none = np.full(n, -1, np.int8)

        def ev(
            op: int,
            start: np.ndarray,
            end: np.ndarray,
            dt: Any,
            node: np.ndarray,
            src: np.ndarray = none,
            peer: np.ndarray = none,
            r: np.ndarray = r,
            t: np.ndarray = t,
            n: int = n,
            room: np.ndarray = room,
        ) -> Cols:
            return {
                "node": node,
                "r": r,
                "t": t + dt,
                "op": np.full(n, op, np.int8),
                "room": room,
                "start": start,
                "end": end,
                "src": src,
                "peer": peer,
            }

        decode = _events(
            [
                ev(ALLOC, dec_start, dec_end, 0, dnode),
                ev(READ, dec_start, dec_start + prompt, 20_000, dnode),
                ev(ALLOC, dec_end, out_end, 20_100, dnode),
                ev(WRITE, dec_end, dec_end + output, 30_000, dnode, src=np.full(n, 1, np.int8)),
                ev(FREE, dec_start, dec_end, 30_100, dnode),
                ev(FREE, dec_end, out_end, 30_100, dnode),
            ]
        )
        prefill = _events(
            [
                ev(ALLOC, pre_start, pre_end, 1_000, pnode),
                ev(WRITE, pre_start, pre_start + sent, 2_000, pnode, src=np.zeros(n, np.int8)),
                ev(READ, pre_start, pre_start + sent, 2_000, pnode),
                ev(TRANSFER, dec_start, dec_start + sent, xfer, pnode, peer=dnode.astype(np.int8)),
                ev(FREE, pre_start, pre_end, xfer + 100, pnode),
            ]
        )
        # Events of the next chunk all happen at or after this time; later events wait for it.
        cutoff = None if k1 >= requests else (k1 // N) * TICK
        dec_w.add(decode, cutoff, dec_names)
        pre_w.add(prefill, cutoff, dec_names)
        acct = rng.zipf(1.3, n) % 5000
        status = np.full(n, 200, np.int32)
        gw_w.write_table(
            gateway.table(t - 2_000, k, acct, status, prompt, output, np.full(n, 32.0), room, pnode, dnode)
        )
        if progress is not None:
            progress(f"{k1:,}/{requests:,} requests, {time.perf_counter() - t_start:.1f} s")
    counts = dec_w.close() | pre_w.close()
    gw_w.close()
    write_startup_logs(
        bundle,
        [(n, "decode", DECODE_POOL) for n in dec_names] + [(n, "prefill", PREFILL_POOL) for n in pre_names],
        page,
        CONTEXT,
        64,
    )
    return {
        "generator": "uniform",
        "requests": requests,
        "seed": seed,
        "nodes": nodes,
        "placeholder_rate": placeholder_rate,
        "placeholders": placeholders,
        "events": sum(counts.values()),
        "counts": counts,
        "page_size": page,
        "seconds": round(time.perf_counter() - t_start, 2),
    }
