"""`forensics simulate --scale`: logs-only bundles at an incident's volume (issue #36), streamed: SGLang
server logs with `--log-requests`, SGLang's periodic batch lines and a gateway log, no page events,
written in time slices of about `chunk` requests (bounded memory) by a compiled renderer, so 100M
requests take minutes (benchmarks/README.md).

The bundle is shaped like the 14-day incident this tool was built for (`days`): `requests` client
requests over `decode_nodes` (16) and `prefill_nodes` (8) nodes of the simulator's incident cluster
(forensics.simulate.config, preset incident: GLM-5.3, context 1,048,576, page 64, prefill pools of
681,280 tokens, decode pools of 4,194,304; rank prefixes and clock offsets as the simulator gives them).

Traffic (traffic.py): arrivals follow a diurnal rate (peak in the afternoon UTC, 0.35x at night,
weekends 0.7x) times spikes (`spikes_per_day`, each 2-60 minutes at 3-8x). Accounts (`accounts`) send
Zipf-like shares of it; each has one or two API tokens, an address and a user agent (the simulator's
customer agents, one account in nine one of its hostile ones). Prompts are log-normal (median 1,500
tokens, sigma 1.3) with a heavy tail: a share `long_rate` is log-uniform in [64K, 1M] tokens, and those
at or over the prefill limit (SGLang's max_req_input_len) take the placeholder path (the prefill node
logs the over-length line and runs one token, the decode node the whole prompt: the signature the
findings look for); a share `oversize_rate` is longer than the context (HTTP 400 at the gateway, no
engine line); `abort_rate` of the rest are aborted by the client during the transfer (499; decode logs
the transfer failure, prefill's transfer lands 0.3-0.9 s late). A third of the prompts hit a cached
system prompt on prefill. Prefill nodes run their requests one at a time, at the preset's
prefill_us_per_token.

What each request writes (node clocks): the prefill node's server.log `Prefill batch` at the prefill's
start (the over-length line before it for a placeholder), `Req Time Stats(... type=prefill)` when the
transfer lands; the decode node's `Req Time Stats(... type=decode)` at the end, or the transfer failure
at an abort; `Decode batch` lines every 40 decode steps of 25 ms while a decode node has requests
running (figures.py); `--log-requests` as JSON records (requests.jsonl) on most nodes and as text lines
in server.log on `text_nodes` (default: the odd decode nodes); the gateway's LiteLLM_SpendLogs CSV row
or Envoy access-log line, by the account's front door (`gateway`, `litellm_share`).

Every line is rendered from the one place its format is written (templates.py, gateway.py): the
values differ from a simulation's (ids are drawn, not hashed), the shapes do not.

Rotation: `dateext` (default) rotates daily as logrotate's dateext with `extension .log` does
(engine/<node>/server-YYYYMMDD.log ... server.log, requests-YYYYMMDD.jsonl ... requests.jsonl,
gateway/envoy/access-YYYYMMDD.jsonl ... access.jsonl); `numbered` writes server.log, server.log.1, ...
and `numbered-gz` server.log.1.gz, ... (Python's RotatingFileHandler and logrotate's defaults); `none`:
one file per node and stream.

OUT/truth (truth.py): responses.csv (what the requests decide; no exposure pairs: there are no pages)
and summary.json: every file's line count, the line counts by kind, the statuses and the gateway
records no engine line names. The same options and seed give the same bytes."""

from __future__ import annotations

import ctypes
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from forensics.simulate import writer
from forensics.simulate.config import S
from forensics.simulate.scale import gateway, messages
from forensics.simulate.scale.figures import Carry, decode_ticks, prefill_figures
from forensics.simulate.scale.options import DAY, ROUTES, Scale
from forensics.simulate.scale.out import Out
from forensics.simulate.scale.rows import Rows, engine_rows, gateway_rows
from forensics.simulate.scale.templates import Bundle
from forensics.simulate.scale.traffic import draw, rate_bins, timeline
from forensics.simulate.scale.truth import Truth

__all__ = ["Scale", "bundle", "generate"]


def generate(out: Path, a: Scale, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write OUT/bundle and OUT/truth; returns the summary (truth/summary.json) and the run's rates."""
    t_start = time.perf_counter()
    b = bundle(a)  # first: an option it refuses (ValueError) leaves OUT as it was
    _keep_memory()
    root = out / "bundle"
    for old in (root, out / "truth"):  # what an earlier run wrote there; nothing else of OUT
        shutil.rmtree(old, ignore_errors=True)
    root.mkdir(parents=True)
    cfg = b.cfg
    (root / "bundle.toml").write_text(writer.bundle_toml(cfg))
    rng = np.random.default_rng([a.seed, 1])
    rate = rate_bins(a, rng)
    n_min = len(rate)
    # slices of about a.chunk requests (by the expected count), their counts drawn at once
    cum = np.cumsum(rate) / rate.sum() * a.requests
    edges = np.unique(np.r_[0, np.searchsorted(cum, np.arange(a.chunk, a.requests, a.chunk)) + 1, n_min])
    p = np.diff(np.r_[0, cum[edges[1:] - 1]]) / a.requests
    counts = rng.multinomial(a.requests, p / p.sum())
    carry = Carry(b)
    o = Out(b, root)
    truth = None if a.no_truth else Truth(b, o, out / "truth")
    rows = Rows(Bundle.W)
    base = cfg.start_us - DAY  # sort keys: 43 bits of time from here
    kinds: dict[str, int] = {}
    stats: dict[str, Any] = {
        "requests": 0,
        "placeholders": 0,
        "aborted": 0,
        "oversize": 0,
        "status": {},
        "by_route": {},
        "unjoined_expected": 0,
    }
    idx0 = 0
    for ci, n in enumerate(counts):
        lo, hi = int(edges[ci]), int(edges[ci + 1])
        t_lo, t_hi = cfg.start_us + lo * 60 * S, cfg.start_us + hi * 60 * S
        last = ci == len(counts) - 1
        if last:
            t_hi = np.iinfo(np.int64).max // 4
        r = draw(b, np.random.default_rng([a.seed, 2, ci]), idx0, int(n), lo, hi, rate)
        rows.kinds = {}
        idx0 += int(n)
        timeline(b, r, carry.last_end)
        prefill_figures(b, r, carry, t_hi)
        engine_rows(b, r, rows)
        gateway_rows(b, r, rows)
        decode_ticks(b, r, carry, t_lo, t_hi, rows)
        if truth is not None:
            truth.add(r, t_hi)
        _tally(b, stats, r)
        for k, v in rows.kinds.items():
            kinds[k] = kinds.get(k, 0) + v
        M = rows.buf[: rows.n]
        # one stable sort by (stream, time): ties keep the order the rows were added in
        order = np.argsort((M[:, 0] << np.int64(43)) | (M[:, 1] - base), kind="stable")
        if last:
            o.write(M, order)
        else:  # lines that later slices' lines may still precede stay pending
            cutoff = np.where(M[:, 0] < 2 * b.NN, t_hi + b.offsets[M[:, 0] % b.NN], t_hi)
            fin = (M[:, 1] < cutoff)[order]
            o.write(M, order[fin])
            rows.keep(order[~fin])
        if progress is not None:
            s = time.perf_counter() - t_start
            progress(f"slice {ci + 1}/{len(counts)}: {idx0:,} requests, {o.bytes / 1e9:.2f} GB, {s:.1f} s")
    o.close()
    summary: dict[str, Any] = {
        "requests": a.requests,
        "options": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(a).items()},
        "nodes": {"prefill": b.P, "decode": b.D, "text_log": sorted(b.specs[n].name for n in b.text_nodes)},
        "files": dict(sorted(o.lines.items())),
        "lines": sum(o.lines.values()),
        "bytes": o.bytes,
        "kinds": dict(sorted(kinds.items())),
        **stats,
        "page_telemetry": False,
        "exposure_pairs": None,  # unknown: no pages are modelled (truth.py)
    }
    if truth is not None:
        truth.close()
    (out / "truth").mkdir(exist_ok=True)
    (out / "truth" / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    wall = time.perf_counter() - t_start
    rates = {
        "gen_s": round(wall, 2),
        "requests_per_s": round(a.requests / wall),
        "mb_per_s": round(o.bytes / 1e6 / wall, 1),
    }
    return summary | rates


def bundle(a: Scale) -> Bundle:
    """The bundle's templates and tables: every line kind's program (templates, messages, gateway)."""
    b = Bundle(a)
    messages.build(b)
    gateway.build(b)
    return b


def _tally(b: Bundle, stats: dict[str, Any], r: dict[str, Any]) -> None:
    stats["requests"] += len(r["t0"])
    stats["placeholders"] += int(r["ph"].sum())
    stats["aborted"] += int(r["ab"].sum())
    stats["oversize"] += int(r["ov"].sum())
    for s in (200, 400, 499):
        stats["status"][str(s)] = stats["status"].get(str(s), 0) + int((r["status"] == s).sum())
    for i, name in enumerate(ROUTES):
        stats["by_route"][name] = stats["by_route"].get(name, 0) + int((r["route"] == i).sum())
    # records no engine log names: a 400 reaches no engine; a LiteLLM failure logs its own call id (its
    # success the decode rid); Envoy's x-request-id is read from the JSON request logs only
    text = np.array([n in b.text_nodes for n in range(b.NN)])
    json_seen = ~text[r["pn"]] | ~text[r["dn"] + b.P]
    joined = np.where(r["route"] == 0, r["status"] == 200, (r["status"] != 400) & json_seen)
    stats["unjoined_expected"] += int((~joined).sum())


def _keep_memory() -> None:
    """glibc: arrays up to 32 MB from the heap, which is never trimmed, so freed memory is reused (fresh
    pages cost about 3.5 s per GB on the benchmark VM: benchmarks/README.md). 1M requests: 29.5 -> 20.5 s."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, (1 << 31) - 1)  # M_TRIM_THRESHOLD
    libc.mallopt(-2, 256 << 20)  # M_TOP_PAD
