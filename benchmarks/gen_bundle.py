"""Fast generator of large synthetic bundles for benchmarks (numpy, vectorized; not a ground-truth simulator).

One prefill and one decode node, requests served one after another: decode allocates the prompt,
prefill writes and transfers it, decode reads, writes output, frees. About 1% of prompts take the
placeholder path (1-slot transfer, whole-prompt read), so the analysis has real exposures to find.
Page events go to Parquet per node, sorted by seq as instrumentation writes them.

    python benchmarks/gen_bundle.py OUT --requests 200000 [--seed 1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PAGE = 64
DECODE_POOL = 4_194_304
PREFILL_POOL = 681_280
T0 = np.datetime64("2026-08-27T00:00:00", "us")


def _interleave(cols: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-request event columns (k events per request) -> one stream ordered request by request."""
    n = len(cols[0]["room"])
    out = {}
    for key in cols[0]:
        out[key] = np.stack([c[key] for c in cols], axis=1).reshape(n * len(cols))
    return out


def generate(out: Path, requests: int, seed: int = 1) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    n = requests
    room = rng.integers(1, 2**62, n, dtype=np.int64)
    t = (np.arange(n, dtype=np.int64) * 50_000) + rng.integers(0, 10_000, n)  # one request per 50 ms
    prompt = rng.integers(256, 8192, n)
    placeholder = rng.random(n) < 0.01
    prompt = np.where(placeholder, rng.integers(PREFILL_POOL, 1_000_000, n), prompt)
    dec_pages = -(-prompt // PAGE)
    dec_start = (rng.integers(1, (DECODE_POOL - 1_100_000) // PAGE, n)) * PAGE
    dec_end = dec_start + dec_pages * PAGE
    out_start = dec_end
    out_end = out_start + PAGE
    sent = np.where(placeholder, 1, prompt)
    pre_pages = -(-sent // PAGE)
    pre_start = rng.integers(1, (PREFILL_POOL - 10_000) // PAGE, n) * PAGE
    pre_end = pre_start + pre_pages * PAGE

    def ev(op: str, start, end, dt, src=None, peer=None):
        return {"room": room, "op": np.full(n, op), "start": start, "end": end, "t": t + dt,
                "src": np.full(n, src or ""), "peer": np.full(n, peer or "")}

    decode = _interleave([
        ev("alloc", dec_start, dec_end, 0),
        ev("read", dec_start, dec_start + prompt, 20_000),
        ev("alloc", out_start, out_end, 20_100),
        ev("write", out_start, out_start + 8, 30_000, src="decode"),
        ev("free", dec_start, dec_end, 30_100),
        ev("free", out_start, out_end, 30_100),
    ])
    prefill = _interleave([
        ev("alloc", pre_start, pre_end, 1_000),
        ev("write", pre_start, pre_start + sent, 2_000, src="prefill"),
        ev("read", pre_start, pre_start + sent, 2_000),
        ev("transfer", dec_start, dec_start + sent, 10_000, peer="decode-0"),
        ev("free", pre_start, pre_end, 10_100),
    ])
    pages = out / "bundle" / "pages"
    pages.mkdir(parents=True, exist_ok=True)
    counts = {}
    for node, cols in (("decode-0", decode), ("prefill-0", prefill)):
        m = len(cols["room"])
        table = pa.table({
            "node": pa.array(np.full(m, node)), "seq": pa.array(np.arange(1, m + 1, dtype=np.int64)),
            "ts": pa.array((T0 + cols["t"].astype("timedelta64[us]")), pa.timestamp("us", tz="UTC")),
            "op": pa.array(cols["op"]), "room": pa.array(cols["room"]),
            "start": pa.array(cols["start"].astype(np.int64)), "end": pa.array(cols["end"].astype(np.int64)),
            "peer": pa.array(np.where(cols["peer"] == "", None, cols["peer"]).tolist(), pa.string()),
            "src": pa.array(np.where(cols["src"] == "", None, cols["src"]).tolist(), pa.string()),
        })
        pq.write_table(table, pages / f"{node}.parquet", row_group_size=1_000_000)
        counts[node] = m
    gw = pa.table({
        "ts": pa.array(T0 + t.astype("timedelta64[us]"), pa.timestamp("us", tz="UTC")),
        "request_id": pa.array([f"req-{i:09d}" for i in range(n)]),
        "account_id": pa.array([f"acct-{k:05d}" for k in rng.zipf(1.3, n) % 5000]),
        "api_token_id": pa.array(np.full(n, "tok")), "client_ip": pa.array(np.full(n, "203.0.113.9")),
        "user_agent": pa.array(np.full(n, "bench")), "model": pa.array(np.full(n, "glm-5.3")),
        "status": pa.array(np.full(n, 200, dtype=np.int32)), "prompt_tokens": pa.array(prompt.astype(np.int64)),
        "completion_tokens": pa.array(np.full(n, 8, dtype=np.int64)), "duration_ms": pa.array(np.full(n, 30.0)),
        "bootstrap_room": pa.array(room), "prefill_node": pa.array(np.full(n, "prefill-0")),
        "decode_node": pa.array(np.full(n, "decode-0")),
    })
    (out / "bundle" / "gateway").mkdir(parents=True, exist_ok=True)
    pq.write_table(gw, out / "bundle" / "gateway" / "gateway.parquet")
    for node, role, pool in (("decode-0", "decode", DECODE_POOL), ("prefill-0", "prefill", PREFILL_POOL)):
        d = out / "bundle" / "engine" / node
        d.mkdir(parents=True, exist_ok=True)
        (d / "server.log").write_text(
            f"[2026-08-26 23:00:00.000 TP0] server_args=ServerArgs(model_path='zai-org/GLM-5.3', "
            f"context_length=1048576, page_size={PAGE}, tp_size=8, disaggregation_mode='{role}')\n"
            f"[2026-08-26 23:00:00.000 TP0] KV Cache is allocated. #tokens: {pool}, KV size: 40.00 GB\n")
    (out / "counts.json").write_text(json.dumps(counts))
    return counts


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(generate(a.out, a.requests, a.seed))
