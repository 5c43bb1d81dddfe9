"""Logs-only benchmark bundles at real incident volume (issue #36): SGLang server logs with
`--log-requests`, SGLang's periodic batch lines and a gateway log, no page events.

The bundle is shaped like the 14-day incident this tool was built for (`--days`): `--requests N`
client requests (10M-100M is an incident's volume; the bytes are about 3.5 KB per request, so 100M
requests are about 350 GB of logs), `--decode-nodes` (16) and `--prefill-nodes` (8) nodes of the
simulator's incident cluster (forensics.simulate.config, preset incident: GLM-5.3, context 1,048,576,
page 64, prefill pools of 681,280 tokens, decode pools of 4,194,304; rank prefixes and clock offsets as
the simulator gives them: every other node logs `DP0 TP0`, odd prefill nodes without ms).

Traffic: arrivals follow a diurnal rate (peak in the afternoon UTC, 0.35x at night, weekends 0.7x)
times spikes (`--spikes-per-day`, each 2-60 minutes at 3-8x). Accounts (`--accounts`) send Zipf-like
shares of it; each has one or two API tokens, an address and a user agent (the simulator's customer
agents, one account in nine one of its hostile ones). Prompts are log-normal (median 1,500 tokens,
sigma 1.3) with a heavy tail: a share `--long-rate` is log-uniform in [64K, 1M] tokens, and those at or
over the prefill limit (681,274 tokens: SGLang's max_req_input_len) take the placeholder path (the
prefill node logs the over-length line and runs one token, the decode node the whole prompt: the
signature the findings look for); a share `--oversize-rate` is longer than the context (HTTP 400 at
the gateway, no engine line); `--abort-rate` of the rest are aborted by the client during the transfer
(499; decode logs the transfer failure, prefill's transfer lands 0.3-0.9 s late). A third of the
prompts hit a cached system prompt on prefill. Prefill nodes run their requests one at a time (the
queue builds in spikes), at `prefill_us_per_token` of the preset.

What each request writes (node clocks; times as the simulator's event loop takes them):
- prefill node server.log: `Prefill batch` at the prefill's start (`Input length (...) exceeds` before
  it for a placeholder), `Req Time Stats(... type=prefill)` when the transfer lands;
- decode node server.log: `Req Time Stats(... type=decode)` at the end, or `Decode transfer failed ...
  Aborted by AbortReq.` at an abort; `Decode batch` lines every decode_log_interval (40) steps of
  25 ms while the node has requests running (their figures counted from the requests' intervals);
- `--log-requests` of both nodes: JSON (requests.jsonl, `request.finished` records as the simulator's
  writer writes them) on most nodes; text (`Receive: obj=GenerateReqInput(...)` and `Finish: obj=...,
  out={...}` lines in server.log, 0.5.11's utils/request_logger at level 0: no record prefix) on the
  nodes of `--text-nodes` (default: the odd decode nodes). The x-request-id an Envoy gateway forwards
  is logged as `headers` (JSON) and `headers={...}` (text);
- gateway: a LiteLLM_SpendLogs CSV row (gateway/litellm/spend_logs.csv) or an Envoy JSON access-log
  line (gateway/envoy/), by the account's front door (`--gateway`, `--litellm-share`).

Every line shape is the simulator's: the JSON records, the record prefix and the start-up lines come
from forensics.simulate.writer.write_engine, the batch lines from forensics.simulate.batch_lines, the
gateway lines from forensics.gateway_formats (render_spendlogs, render_envoy), each rendered once
with sentinel values and split into a template (a second render with other sentinels must rebuild
exactly, so no field is left constant by mistake); Req Time Stats, the over-length and the transfer
failure lines are the f-strings of forensics/simulate/engine.py and decode.py; the text request lines
follow tests/ingest/test_sglang_lines.py's 0.5.11 line. The values differ from a simulation's (ids and
digests are drawn, not hashed), the shapes do not. The templates are filled by a compiled renderer
(numba) straight from integer columns, so no line goes through Python.

Rotation (`--rotation`): `dateext` (default) rotates daily as logrotate's dateext with `extension
.log` does: engine/<node>/server-YYYYMMDD.log ... server.log (the last day), requests-YYYYMMDD.jsonl
... requests.jsonl, gateway/envoy/access-YYYYMMDD.jsonl ... access.jsonl. `numbered` writes
server.log, server.log.1, ... and `numbered-gz` server.log.1.gz, ... (Python's RotatingFileHandler
and logrotate's defaults): forensics ingest reads neither today (engine logs must end in .log or
.jsonl), so those bundles measure nothing but show the gap. `none`: one file per node and stream.

Written in time slices of about `--chunk` requests (bounded memory); counts.json holds every file's
line count (what ingest must read), the line counts by kind, the expected gateway joins and the
generation time and rate.

    python benchmarks/gen_logs.py OUT --requests 1000000 --seed 1
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import hashlib
import json
import re
import shutil
import string
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from forensics.engines.sglang import max_req_input_len
from forensics.gateway_formats import _writing, envoy, litellm
from forensics.gateway_formats import litellm_spendlogs as spendlogs
from forensics.simulate import writer
from forensics.simulate.batch_lines import decode_line, prefill_line
from forensics.simulate.config import BATCH_RELEASES, MS, NodeSpec, S, SimConfig, build_config
from forensics.simulate.request import CUSTOMER_UAS, HOSTILE_UAS, Request

DAY = 86_400 * S
START = "2026-08-26T00:00:00Z"
TICK_US = 40 * 25 * MS  # decode_log_interval (40) steps of decode_step_ms (25)
NO_PREFIX_RELEASES = ("0.5.11", "0.5.23")  # --log-requests text lines through a "%(message)s" formatter
ROUTES = ("litellm", "envoy")

# ------------------------------------------------------------------------------------------------
# The renderer: a line is a program of ops over one row of an int64 matrix (see Lines)

LIT, TAB, INT, FIX, REPR, HEX, UUID, TS = range(8)
TS_LOG, TS_LOG_MS, TS_ISO_US, TS_ISO_MS_Z, TS_PG = range(5)
TS_LEN = (19, 23, 26, 24, 23)
HEXD = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


POW10 = np.array([10**i for i in range(20)], dtype=np.uint64)


@njit(cache=True, error_model="numpy")
def _put_int(buf, p, v, width):
    """v >= 0 in decimal, zero-padded to width."""
    u = np.uint64(v)
    n = 1
    while n < 20 and u >= POW10[n]:
        n += 1
    if width > n:
        n = width
    ten = np.uint64(10)
    for i in range(n - 1, -1, -1):
        q = u // ten
        buf[p + i] = np.uint8(48 + (u - q * ten))
        u = q
    return p + n


@njit(cache=True, error_model="numpy")
def _put_hex(buf, p, v, digits):
    for i in range(digits - 1, -1, -1):
        buf[p + i] = HEXD[np.int64(v & np.uint64(15))]
        v = v >> np.uint64(4)
    return p + digits


@njit(cache=True, error_model="numpy")
def _civil(days):
    """(year, month, day) of a day number since 1970-01-01 (H. Hinnant's days_from_civil, inverted)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


@njit(cache=True, error_model="numpy")
def _put_ts(buf, p, us, kind, dday, dcache):
    """writer.log_ts (ms truncated), iso_us, iso_ms_z and spendlogs.pg_ts (ms rounded, zeros dropped).
    dday[0], dcache: the last day printed and its bytes, so a date is computed once per day."""
    if kind == 4:
        ms_total = (us + 500) // 1000
        sec, frac = ms_total // 1000, ms_total % 1000
    else:
        sec, frac = us // 1_000_000, us % 1_000_000
    days, sod = sec // 86400, sec % 86400
    if dday[0] != days:
        y, m, d = _civil(days)
        dday[0] = days
        q = 0
        for v, w in ((y, 4), (m, 2), (d, 2)):
            for i in range(w - 1, -1, -1):
                dcache[q + i] = np.uint8(48 + v % 10)
                v //= 10
            q += w
    buf[p : p + 4] = dcache[0:4]
    buf[p + 4] = 45
    buf[p + 5 : p + 7] = dcache[4:6]
    buf[p + 7] = 45
    buf[p + 8 : p + 10] = dcache[6:8]
    p += 10
    buf[p] = 84 if kind == 2 or kind == 3 else 32
    p = _put_int(buf, p + 1, sod // 3600, 2)
    buf[p] = 58
    p = _put_int(buf, p + 1, (sod // 60) % 60, 2)
    buf[p] = 58
    p = _put_int(buf, p + 1, sod % 60, 2)
    if kind == 1 or kind == 3:
        buf[p] = 46
        p = _put_int(buf, p + 1, frac // 1000, 3)
        if kind == 3:
            buf[p] = 90
            p += 1
    elif kind == 2:
        buf[p] = 46
        p = _put_int(buf, p + 1, frac, 6)
    elif kind == 4 and frac:
        buf[p] = 46
        n = 3
        while frac % 10 == 0:
            frac //= 10
            n -= 1
        p = _put_int(buf, p + 1, frac, n)
    return p


@njit(cache=True, error_model="numpy")
def _render(M, ops, pstart, pend, pdata, poff, buf, off):
    """Render every row of M (column 3: its program) into buf; off[i]..off[i+1] is row i's line."""
    p = 0
    dday = np.full(1, -(1 << 40), dtype=np.int64)
    dcache = np.zeros(8, dtype=np.uint8)
    for i in range(M.shape[0]):
        off[i] = p
        prog = M[i, 3]
        for o in range(pstart[prog], pend[prog]):
            k, a, b = ops[o, 0], ops[o, 1], ops[o, 2]
            if k == 0 or k == 1:
                e = a if k == 0 else M[i, a]
                ln = poff[e + 1] - poff[e]
                buf[p : p + ln] = pdata[poff[e] : poff[e + 1]]
                p += ln
            elif k == 2:
                p = _put_int(buf, p, M[i, a], b)
            elif k == 3 or k == 4:
                v = M[i, a]
                q = 10**b
                p = _put_int(buf, p, v // q, 0)
                buf[p] = 46
                f = v % q
                n = b
                if k == 4:  # Python's repr of round(x, b): trailing zeros dropped, one digit kept
                    if f == 0:
                        n = 1
                    else:
                        while f % 10 == 0:
                            f //= 10
                            n -= 1
                p = _put_int(buf, p + 1, f, n)
            elif k == 5:
                p = _put_hex(buf, p, np.uint64(M[i, a]), b)
            elif k == 6:  # a UUID4 from two 64-bit draws (version and variant bits set)
                hi = (np.uint64(M[i, a]) & np.uint64(0xFFFFFFFFFFFF0FFF)) | np.uint64(0x4000)
                lo = (np.uint64(M[i, a + 1]) & np.uint64(0x3FFFFFFFFFFFFFFF)) | np.uint64(0x8000000000000000)
                p = _put_hex(buf, p, hi >> np.uint64(32), 8)
                buf[p] = 45
                p = _put_hex(buf, p + 1, (hi >> np.uint64(16)) & np.uint64(0xFFFF), 4)
                buf[p] = 45
                p = _put_hex(buf, p + 1, hi & np.uint64(0xFFFF), 4)
                buf[p] = 45
                p = _put_hex(buf, p + 1, lo >> np.uint64(48), 4)
                buf[p] = 45
                p = _put_hex(buf, p + 1, lo & np.uint64(0xFFFFFFFFFFFF), 12)
            else:
                p = _put_ts(buf, p, M[i, a], b, dday, dcache)
    off[M.shape[0]] = p


class Pool:
    """Every literal and table entry, as one byte buffer."""

    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.index: dict[bytes, int] = {}
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, text: str) -> int:
        b = text.encode()
        if b not in self.index:
            self.index[b] = len(self.items)
            self.items.append(b)
            self._arrays = None
        return self.index[b]

    def table(self, texts: list[str]) -> np.ndarray:
        return np.array([self.add(t) for t in texts], dtype=np.int64)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            off = np.zeros(len(self.items) + 1, dtype=np.int64)
            off[1:] = np.cumsum([len(b) for b in self.items])
            self._arrays = (np.frombuffer(b"".join(self.items), dtype=np.uint8).copy(), off)
        return self._arrays


# A slot's ops: (kind, column name, arg); a table slot also names its table (for the length bound)
Op = tuple[int, str, int]


class Programs:
    """Compiled templates: ops rows (kind, a, b) and each program's range and length bound."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.ops: list[tuple[int, int, int]] = []
        self.ranges: list[tuple[int, int]] = []
        self.bounds: list[int] = []
        self.table_max: dict[str, int] = {}

    def add(self, parts: list[tuple[str, Any]], slots: dict[str, list[Op]], cols: dict[str, int]) -> int:
        start, bound = len(self.ops), 0
        for kind, v in parts:
            if kind == "lit":
                self.ops.append((LIT, self.pool.add(v), 0))
                bound += len(v.encode())
                continue
            for op, col, arg in slots[v]:
                if op == LIT:
                    self.ops.append((LIT, self.pool.add(col), 0))
                    bound += len(col.encode())
                    continue
                self.ops.append((op, cols[col], arg))
                bound += {TAB: self.table_max.get(col, 0), INT: 20, FIX: 22, REPR: 22, HEX: arg, UUID: 36}.get(
                    op, TS_LEN[arg] if op == TS else 0
                )
        self.ranges.append((start, len(self.ops)))
        self.bounds.append(bound)
        return len(self.ranges) - 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        ops = np.array(self.ops, dtype=np.int64).reshape(-1, 3)
        r = np.array(self.ranges, dtype=np.int64).reshape(-1, 2)
        return ops, r[:, 0].copy(), r[:, 1].copy(), np.array(self.bounds, dtype=np.int64)


def split_template(render: Callable[[int], str], slots: dict[str, tuple[str, str]]) -> list[tuple[str, Any]]:
    """render(0) split at the sentinel texts slots[name][0] into literals and slot names; render(1)
    must be the same literals with slots[name][1] in the slots (else some field varies that no slot
    covers, or a sentinel's text also occurs as literal text: ValueError)."""
    a, b = render(0), render(1)
    present = {v[0]: n for n, v in slots.items() if v[0] in a}
    parts: list[tuple[str, Any]] = []
    i = 0
    if present:
        pat = re.compile("|".join(re.escape(t) for t in sorted(present, key=len, reverse=True)))
        for m in pat.finditer(a):
            if m.start() > i:
                parts.append(("lit", a[i : m.start()]))
            parts.append(("slot", present[m.group()]))
            i = m.end()
    if i < len(a):
        parts.append(("lit", a[i:]))
    rebuilt = "".join(v if k == "lit" else slots[v][1] for k, v in parts)
    if rebuilt != b:
        j = next((k for k, (x, y) in enumerate(zip(rebuilt, b, strict=False)) if x != y), min(len(b), len(rebuilt)))
        raise ValueError(
            f"template does not rebuild the second render at {j}: {rebuilt[j - 40 : j + 40]!r} vs "
            f"{b[j - 40 : j + 40]!r}"
        )
    return parts


def format_template(fmt: str) -> list[tuple[str, Any]]:
    """A str.format string's literals and fields (the simulator's f-strings, written as format strings)."""
    parts: list[tuple[str, Any]] = []
    for lit, name, _spec, _conv in string.Formatter().parse(fmt):
        if lit:
            parts.append(("lit", lit))
        if name:
            parts.append(("slot", name))
    return parts


def sub_slots(parts: list[tuple[str, Any]], name: str, inner: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """parts with slot `name` replaced by the parts `inner` (a message inside its record prefix)."""
    out: list[tuple[str, Any]] = []
    for k, v in parts:
        out.extend(inner if (k, v) == ("slot", name) else [(k, v)])
    return out


# ------------------------------------------------------------------------------------------------
# Vectorized number formats and id mixing (the printed values; the renderer prints them)


def tenths_ms(us: np.ndarray) -> np.ndarray:
    """Seconds to 4 decimals ({x:.4f}, round(x, 4)), as an integer count of 1e-4 s (half up)."""
    return (us + 50) // 100


def centi(num: np.ndarray, den: np.ndarray | int) -> np.ndarray:
    """num / den to 2 decimals ({x:.2f}), as an integer count of 0.01 (half up)."""
    den = np.maximum(np.asarray(den, dtype=np.int64), 1)
    return (200 * num.astype(np.int64) + den) // (2 * den)


M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(x: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64's finalizer (a bijection of uint64): distinct inputs give distinct ids."""
    z = x.astype(np.uint64) + np.uint64((salt * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return (z ^ (z >> np.uint64(31))).view(np.int64)


def mix63(x: np.ndarray, salt: int) -> np.ndarray:
    """A bijection of [0, 2^63): bootstrap rooms, unique per request."""
    m = np.uint64((1 << 63) - 1)
    z = (x.astype(np.uint64) + np.uint64(salt)) & m
    z = ((z ^ (z >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)) & m
    z = ((z ^ (z >> np.uint64(32))) * np.uint64(0x94D049BB133111EB)) & m
    return (z ^ (z >> np.uint64(29))).astype(np.int64)


@njit(cache=True, error_model="numpy")
def _serialize(node, ready, dur, last_end):
    """Each prefill node runs one request at a time: start = max(ready, the node's previous end).
    Rows in order of ready; last_end (per node) carries over from slice to slice."""
    start = np.empty_like(ready)
    for i in range(ready.shape[0]):
        n = node[i]
        s = ready[i] if ready[i] > last_end[n] else last_end[n]
        start[i] = s
        last_end[n] = s + dur[i]
    return start


def active(node_s, s, e, w, node_q, q, base: int) -> np.ndarray:
    """Per query (node_q, q): the sum of w over the intervals [s, e) of that node holding q (times from
    `base`, less than 2^42 us after it)."""
    big = np.int64(1) << np.int64(42)
    ks, ke = node_s * big + (s - base), node_s * big + (e - base)
    os_, oe = np.argsort(ks, kind="stable"), np.argsort(ke, kind="stable")
    cs = np.concatenate(([0], np.cumsum(w[os_])))
    ce = np.concatenate(([0], np.cumsum(w[oe])))
    kq = node_q * big + (q - base)
    return cs[np.searchsorted(ks[os_], kq, "right")] - ce[np.searchsorted(ke[oe], kq, "right")]


# ------------------------------------------------------------------------------------------------
# The bundle's line kinds


class Bundle:
    """Templates, tables and streams of one bundle."""

    W = 15  # data columns of a line row (after stream, ts, seq, prog)

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.cfg: SimConfig = build_config(
            "incident",
            requests=a.requests,
            seed=a.seed,
            prefill_count=a.prefill_nodes,
            decode_count=a.decode_nodes,
            batch_lines=a.release,
            release=a.release if a.release != "0.4.9" else "0.5.4",
            start_us=int(datetime.fromisoformat(START).timestamp()) * S,
            duration_us=a.days * DAY,
            gateway_format="envoy" if a.gateway == ["envoy"] else "litellm_spendlogs",
        )
        end = self.cfg.start_us + self.cfg.duration_us
        disc = datetime.fromisoformat(self.cfg.discovered_at.replace("Z", "+00:00"))
        if disc.timestamp() * S < end:
            self.cfg.discovered_at = datetime.fromtimestamp(end / S + 300, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.specs: list[NodeSpec] = self.cfg.prefill_nodes + self.cfg.decode_nodes
        self.P, self.D = len(self.cfg.prefill_nodes), len(self.cfg.decode_nodes)
        self.NN = self.P + self.D
        self.offsets = np.array([s.clock_offset_us for s in self.specs], dtype=np.int64)
        self.text_nodes = self._text_nodes(a.text_nodes)
        self.pool = Pool()
        self.progs = Programs(self.pool)
        self.limit_p = max_req_input_len(self.cfg.context_len, self.cfg.prefill_nodes[0].pool_tokens)
        self.prefixed = a.release not in NO_PREFIX_RELEASES
        self._tables()
        self._build()

    def _text_nodes(self, spec: str) -> set[int]:
        names = [s.name for s in self.specs]
        if spec == "none":
            return set()
        if spec == "all":
            return set(range(self.NN))
        if spec == "odd-decode":
            return {self.P + i for i in range(self.D) if i % 2 == 1}
        out = set()
        for n in spec.split(","):
            if n.strip() not in names:
                raise SystemExit(f"--text-nodes: no node {n.strip()!r} (nodes: {', '.join(names)})")
            out.add(names.index(n.strip()))
        return out

    # --- accounts and their tables -------------------------------------------------------------
    def _tables(self) -> None:
        a, rng = self.a, np.random.default_rng([self.a.seed, 0xACC])
        n = a.accounts
        names = [f"acct-{x:06x}" for x in rng.choice(1 << 24, size=n, replace=False)]
        self.acct_w = np.cumsum(1.0 / (np.arange(n) + 10.0) ** 1.1)
        self.acct_w /= self.acct_w[-1]
        uas = list(CUSTOMER_UAS) + list(HOSTILE_UAS)
        self.acct_ua = np.array(
            [
                len(CUSTOMER_UAS) + k % len(HOSTILE_UAS) if k % 9 == 4 else int(rng.integers(len(CUSTOMER_UAS)))
                for k in range(n)
            ],
            dtype=np.int64,
        )
        ips = [
            f"2001:db8:{rng.integers(1, 0xFFFF):x}::{rng.integers(1, 0xFFFF):x}"
            if rng.random() < 0.2
            else f"203.0.{rng.integers(0, 256)}.{rng.integers(1, 255)}"
            for _ in range(n)
        ]
        self.acct_ntok = rng.integers(1, 3, size=n)
        toks = [f"tok-{x:08x}" for x in rng.choice(1 << 32, size=2 * n, replace=False)]
        share = a.litellm_share if len(a.gateway) == 2 else (1.0 if a.gateway == ["litellm"] else 0.0)
        self.acct_route = (rng.random(n) >= share).astype(np.int64)  # 0 litellm, 1 envoy
        self.t_acct = self.pool.table(names)
        self.t_ip = self.pool.table(ips)
        self.t_tok = self.pool.table(toks).reshape(n, 2)
        self.t_keyh = self.pool.table([hashlib.sha256(t.encode()).hexdigest() for t in toks]).reshape(n, 2)
        self.t_ua_env = self.pool.table([json.dumps(u, ensure_ascii=False)[1:-1] for u in uas])
        self.t_tags = self.pool.table([spendlogs.pg_csv(spendlogs.jsonb(litellm.ua_tags(u))) for u in uas])
        self.t_host = self.pool.table([f"10.20.1.{10 + p}" for p in range(self.P)])
        m = self.progs.table_max
        for col, texts in (
            ("acct", names),
            ("ip", ips),
            ("tok", toks),
            ("keyh", ["x" * 64]),
            ("host", ["x" * 12]),
            ("ua_env", [json.dumps(u, ensure_ascii=False)[1:-1] for u in uas]),
            ("tags", [spendlogs.pg_csv(spendlogs.jsonb(litellm.ua_tags(u))) for u in uas]),
        ):
            m[col] = max(len(t.encode()) for t in texts)

    # --- templates -----------------------------------------------------------------------------
    def _cols(self, names: list[str]) -> dict[str, int]:
        assert len(names) <= self.W, names
        return {"ts": 1, **{n: 4 + i for i, n in enumerate(names)}}

    def _prefix(self, node: int) -> list[tuple[str, Any]]:
        """The record prefix of a node's server.log lines, as writer.write_engine writes it, with a slot
        `msg` (and `ts`, the line's own time)."""
        spec = self.specs[node]
        t = (1_787_801_234_567_891, 1_788_123_456_789_012)
        msgs = ("ZQMSGZQA", "ZQMSGZQB")

        def render(k: int) -> str:
            return _engine_files(self.cfg, spec, [(t[k], msgs[k])], [], None)[0].splitlines(keepends=True)[-1]

        return split_template(
            render, {"ts": (writer.log_ts(t[0], spec.log_ms), writer.log_ts(t[1], spec.log_ms)), "msg": msgs}
        )

    def _ts_slot(self, node: int) -> list[Op]:
        return [(TS, "ts", TS_LOG_MS if self.specs[node].log_ms else TS_LOG)]

    def _engine_prog(
        self, node: int, msg: list[tuple[str, Any]], slots: dict[str, list[Op]], cols: list[str], prefixed: bool = True
    ) -> int:
        if prefixed:
            parts = sub_slots(self._prefix_cache[node], "msg", msg)
        elif self.prefixed:  # the tokenizer process of 0.4.9-0.5.4: the prefix without a rank
            parts = [("lit", "["), ("slot", "ts"), ("lit", "] "), *msg, ("lit", "\n")]
        else:
            parts = [*msg, ("lit", "\n")]
        return self.progs.add(parts, {"ts": self._ts_slot(node), **slots}, self._cols(cols))

    def _build(self) -> None:
        rel = self.a.release
        self._prefix_cache = {n: self._prefix(n) for n in range(self.NN)}
        Int, F, R = (lambda c: [(INT, c, 0)]), (lambda c, d: [(FIX, c, d)]), (lambda c: [(REPR, c, 4)])
        rid = {"rid": [(HEX, "rid_hi", 16), (HEX, "rid_lo", 16)]}
        reqid = [(LIT, "req-", 0), (HEX, "rq", 16)]
        self.prog: dict[tuple[Any, ...], int] = {}

        # Req Time Stats, the over-length line and the transfer failure: the simulator's f-strings
        rts_p = format_template(
            "Req Time Stats(rid={rid}, bootstrap_room={room}, input len={L}, output len=1, type=prefill): "
            "bootstrap_duration={d1}, queue_duration=0.0001, forward_duration={d2}, start_time={st}"
        )
        rts_d = format_template(
            "Req Time Stats(rid={rid}, bootstrap_room={room}, input len={L}, output len={C}, type=decode): "
            "prealloc_duration={d1}, transfer_duration={d2}, queue_duration={d3}, forward_duration={d4}, "
            "start_time={st}"
        )
        over = format_template(
            "Input length ({L} tokens) exceeds the maximum allowed length ({M} tokens). Use a shorter input or "
            "enable --allow-auto-truncate., self.rid='{rid}'"
        )
        fail = format_template(
            "Decode transfer failed for request rank=0 decode_req.req.rid='{rid}' decode_req.req.bootstrap_room={room}"
            " with exception KVTransferError(bootstrap_room={room}): Aborted by AbortReq."
        )
        durs = {f"d{i}": F(f"d{i}", 4) for i in range(1, 5)} | {"st": F("st", 3)}
        base = {"room": Int("room"), "L": Int("L"), "C": Int("C"), "M": Int("M")} | rid | durs
        # --log-requests text lines (0.5.11 utils/request_logger, level 0: text and input_ids skipped)
        obj = (
            "GenerateReqInput(rid='{rid}', http_worker_ipc=None, bootstrap_host='{host}', bootstrap_port=8998, "
            "bootstrap_room={room}, data_parallel_rank=None)"
        )
        meta = (
            "out={{'meta_info': {{'id': '{rid}', 'finish_reason': {fr}, 'prompt_tokens': {P}, "
            "'weight_version': 'default', 'total_retractions': 0, 'completion_tokens': {C}, "
            "'cached_tokens': {K}, 'e2e_latency': {E}}}}}"
        )
        frs = {
            "p": "{{'type': 'length', 'length': 1}}",
            "ph": "{{'type': 'length', 'length': 0}}",
            "stop": "{{'type': 'stop', 'matched': 151329}}",
            "len": "{{'type': 'length', 'length': {C}}}",
            "abort": "{{'type': 'abort', 'message': 'Aborted by AbortReq.'}}",
        }
        text_slots = rid | {
            "room": Int("room"),
            "host": [(TAB, "host", 0)],
            "P": Int("P"),
            "C": Int("C"),
            "K": Int("K"),
            "E": R("E"),
            "rq": reqid,
        }
        cols_rts = ["rid_hi", "rid_lo", "room", "L", "C", "d1", "d2", "d3", "d4", "st", "M"]
        cols_text = ["rid_hi", "rid_lo", "room", "host", "P", "C", "K", "E", "rq"]
        for n in range(self.NN):
            role = self.specs[n].role
            if role == "prefill":
                self.prog["rts_p", n] = self._engine_prog(n, rts_p, base, cols_rts)
                self.prog["over", n] = self._engine_prog(n, over, base, cols_rts)
            else:
                self.prog["rts_d", n] = self._engine_prog(n, rts_d, base, cols_rts)
                self.prog["fail", n] = self._engine_prog(n, fail, base, cols_rts)
            if n in self.text_nodes:
                self.prog["recv", n] = self._engine_prog(
                    n, format_template("Receive: obj=" + obj), text_slots, cols_text, prefixed=False
                )
                for fr in ("p", "ph") if role == "prefill" else ("stop", "len", "abort"):
                    for hdr in (False, True):
                        h = ", headers={{'x-request-id': '{rq}'}}" if hdr else ""
                        fmt = "Finish: obj=" + obj + h + ", " + meta.replace("{fr}", frs[fr])
                        self.prog["fin", n, fr, hdr] = self._engine_prog(
                            n, format_template(fmt), text_slots, cols_text, prefixed=False
                        )
        self._build_batch(rel)
        self._build_json()
        self._build_gateway()

    def _build_batch(self, rel: str) -> None:
        """Decode batch / Prefill batch lines of batch_lines.decode_line and prefill_line (sentinel renders)."""
        dv = [
            (7100001, 7200002, 7300.03, 7400.04, 7500005, 7600006, 7700007, 7800.08, 7900009),
            (8100001, 8200002, 8300.03, 8400.04, 8500005, 8600006, 8700007, 8800.08, 8900009),
        ]
        dn = ["running", "used", "usage", "pusage", "prealloc", "transfer", "queue", "gen", "it"]

        def dline(k: int) -> str:
            v = dict(zip(dn, dv[k], strict=True))
            return decode_line(
                rel,
                v["it"],
                v["running"],
                v["used"],
                v["usage"],
                v["pusage"],
                v["prealloc"],
                v["transfer"],
                v["queue"],
                v["gen"],
            )

        def txt(v: float | int) -> str:
            return f"{v:.2f}" if isinstance(v, float) else str(v)

        d_parts = split_template(dline, {n: (txt(dv[0][i]), txt(dv[1][i])) for i, n in enumerate(dn)})
        pv = [
            (6100001, 6200002, 6300003, 6400.04, 6500005, 6600006, 6700007, 6800.08, 6900009),
            (5100001, 5200002, 5300003, 5400.04, 5500005, 5600006, 5700007, 5800.08, 5900009),
        ]
        pn = ["new", "cached", "used", "usage", "queue", "boot", "inflight", "thr", "it"]

        def pline(k: int) -> str:
            v = dict(zip(pn, pv[k], strict=True))
            return prefill_line(
                rel,
                v["it"],
                v["new"],
                v["cached"],
                v["used"],
                v["usage"],
                v["queue"],
                v["boot"],
                v["inflight"],
                v["thr"],
            )

        p_parts = split_template(pline, {n: (txt(pv[0][i]), txt(pv[1][i])) for i, n in enumerate(pn)})
        slots = {n: [(FIX, n, 2)] if n in ("usage", "pusage", "gen", "thr") else [(INT, n, 0)] for n in dn + pn}
        for n in range(self.NN):
            if self.specs[n].role == "decode":
                self.prog["dbatch", n] = self._engine_prog(n, d_parts, slots, dn)
            else:
                self.prog["pbatch", n] = self._engine_prog(n, p_parts, slots, pn)

    def _build_json(self) -> None:
        """request.finished records as writer.write_engine writes them (one sentinel record per shape)."""
        t = (1_787_801_234_567_891, 1_788_123_456_789_012)
        rid = ("f00dfeedf00dfeedf00dfeedf00dfeed", "beefcafebeefcafebeefcafebeefcafe")
        room, P, C, K, E = (
            (6660000000000000001, 5550000000000000002),
            (73100019, 84200027),
            (5300041, 6400053),
            (4100039, 3200023),
            (123.4567, 234.5671),
        )
        rq = ("zqreqzqa", "zqreqzqb")
        slots = {
            "ts": (writer.iso_us(t[0]), writer.iso_us(t[1])),
            "rid": rid,
            "room": (str(room[0]), str(room[1])),
            "P": (str(P[0]), str(P[1])),
            "C": (str(C[0]), str(C[1])),
            "K": (str(K[0]), str(K[1])),
            "E": (json.dumps(E[0]), json.dumps(E[1])),
            "rq": rq,
        }
        ops = {
            "ts": [(TS, "ts", TS_ISO_US)],
            "rid": [(HEX, "rid_hi", 16), (HEX, "rid_lo", 16)],
            "room": [(INT, "room", 0)],
            "P": [(INT, "P", 0)],
            "C": [(INT, "C", 0)],
            "K": [(INT, "K", 0)],
            "E": [(REPR, "E", 4)],
            "rq": [(LIT, "req-", 0), (HEX, "rq", 16)],
        }
        cols = self._cols(["rid_hi", "rid_lo", "room", "P", "C", "K", "E", "rq"])
        shapes = {
            "p": ({"type": "length", "length": 1}, True, 1),
            "ph": ({"type": "length", "length": 0}, False, 1),
            "stop": ({"type": "stop", "matched": 151329}, True, None),
            "len": (None, True, None),
            "abort": ({"type": "abort", "message": "Aborted by AbortReq."}, True, 0),
        }
        spec = self.specs[0]
        for fr, (reason, p_slot, c_fixed) in shapes.items():
            for hdr in (False, True):

                def render(k: int, fr=fr, reason=reason, p_slot=p_slot, c_fixed=c_fixed, hdr=hdr) -> str:
                    j = {
                        "rid": rid[k],
                        "room": room[k],
                        "prompt_tokens": P[k] if p_slot else 1,
                        "completion_tokens": C[k] if c_fixed is None else c_fixed,
                        "cached_tokens": K[k],
                        "finish_reason": reason or {"type": "length", "length": C[k]},
                        "e2e_latency": E[k],
                    }
                    headers = {room[k]: {"x-request-id": rq[k]}} if hdr else None
                    return _engine_files(self.cfg, spec, [], [(t[k], j)], headers)[1]

                parts = split_template(render, slots)
                self.prog["json", fr, hdr] = self.progs.add(parts, ops, cols)

    def _build_gateway(self) -> None:
        """LiteLLM_SpendLogs rows (spendlogs.render_spendlogs) and Envoy access-log lines (envoy.render_envoy)
        per status: 200, 499 (the client aborted), 400 (longer than the context)."""
        cfg = self.cfg
        for status in (200, 499, 400):
            for salt in range(50):  # a sentinel whose digest-made port also occurs as literal text: the next
                try:
                    self._gateway_status(cfg, status, salt)
                    break
                except ValueError:
                    if salt == 49:
                        raise

    def _gateway_status(self, cfg: SimConfig, status: int, salt: int) -> None:
        t0 = (1_787_801_234_567_891, 1_788_123_456_789_012)
        dur = (987_654_321, 876_543_219)
        rq = (f"req-zq{salt}reqa", f"req-zq{salt}reqb")
        ridd = ("f00dfeedf00dfeedf00dfeedf00dfeed", "beefcafebeefcafebeefcafebeefcafe")
        L, C = (73100019, 84200027), (5300041, 6400053)
        acct, tok, ip, ua = (
            ("acct-zqa", "acct-zqb"),
            ("tok-zqa", "tok-zqb"),
            ("198.51.100.70", "198.51.100.71"),
            ("zqagenta/9.1", "zqagentb/9.2"),
        )

        def req(k: int) -> Request:
            return Request(
                idx=0,
                request_id=rq[k],
                t0=t0[k],
                account=acct[k],
                token=tok[k],
                ip=ip[k],
                ua=ua[k],
                headers=None,
                L=L[k],
                out=C[k],
                sp_id=-1,
                sp_len=0,
                abort=status == 499,
                prefill="prefill-0",
                decode="decode-0",
                room=1,
                rid_p=ridd[k],
                rid_d=ridd[k],
                gw=0,
                status=status,
                completion=C[k] if status == 200 else 0,
                t_end=t0[k] + dur[k],
            )

        ok = status == 200

        def port(k: int) -> int:
            return 1024 + int.from_bytes(_writing.digest(cfg, "port", rq[k])[:2], "big") % 60000

        def pair(f: Callable[[int], object]) -> tuple[str, str]:
            return str(f(0)), str(f(1))

        d_ms = pair(lambda k: dur[k] // 1000)
        env = {
            "rq": (rq[0], rq[1]),
            "t0": pair(lambda k: _writing.iso_ms_z(t0[k])),
            "dur": d_ms,
            "svc": pair(lambda k: max(0, dur[k] // 1000 - 1)),
            "L": pair(lambda k: L[k]),
            "C": pair(lambda k: C[k]),
            "LC": pair(lambda k: L[k] + C[k]),
            "brx": pair(lambda k: 4 * L[k] + 180),
            "btx": pair(lambda k: 4 * C[k] + 420),
            "port": pair(port),
            "port2": pair(lambda k: (port(k) * 7) % 60000 + 1024),
            "ua_env": (ua[0], ua[1]),
            "ip": (ip[0], ip[1]),
            "acct": (acct[0], acct[1]),
        }
        env_ops: dict[str, list[Op]] = {n: [(INT, n, 0)] for n in env} | {
            "rq": [(LIT, "req-", 0), (HEX, "rq", 16)],
            "t0": [(TS, "t0", TS_ISO_MS_Z)],
            "ua_env": [(TAB, "ua_env", 0)],
            "ip": [(TAB, "ip", 0)],
            "acct": [(TAB, "acct", 0)],
        }
        parts = split_template(lambda k: envoy.render_envoy(cfg, [req(k)], {}).files[envoy.ENVOY_FILE].decode(), env)
        env_cols = ["rq", "t0", "dur", "svc", "L", "C", "LC", "brx", "btx", "port", "port2", "ua_env", "ip", "acct"]
        self.prog["envoy", status] = self.progs.add(parts, env_ops, self._cols(env_cols))

        def keyh(k: int) -> str:
            return hashlib.sha256(tok[k].encode()).hexdigest()

        lit = {
            "id": pair(lambda k: litellm.litellm_id(cfg, req(k))),
            "keyh": pair(keyh),
            "total": pair(lambda k: L[k] + C[k]),
            "L": pair(lambda k: L[k]),
            "C": pair(lambda k: C[k]),
            "start": pair(lambda k: spendlogs.pg_ts(t0[k])),
            "end": pair(lambda k: spendlogs.pg_ts(t0[k] + dur[k])),
            "dms": pair(lambda k: round(dur[k] / 1000)),
            "tok": (tok[0], tok[1]),
            "acct": (acct[0], acct[1]),
            "ip": (ip[0], ip[1]),
            "tags": pair(lambda k: spendlogs.pg_csv(spendlogs.jsonb(litellm.ua_tags(ua[k])))),
            "sess": pair(lambda k: _writing.uuid4_of(cfg, "litellm_trace_id", rq[k])),
        }
        if not ok:  # a failure's prompt_tokens (and total): LiteLLM's estimate, here the engine's length L
            lit["est"] = pair(lambda k: spendlogs._failure_prompt_tokens(cfg, req(k)))
        lit_ops: dict[str, list[Op]] = {
            "id": [(HEX, "id_hi", 16), (HEX, "id_lo", 16)] if ok else [(UUID, "id_hi", 0)],
            "keyh": [(TAB, "keyh", 0)],
            "total": [(INT, "total", 0)],
            "L": [(INT, "L", 0)],
            "C": [(INT, "C", 0)],
            "start": [(TS, "t0", TS_PG)],
            "end": [(TS, "tend", TS_PG)],
            "dms": [(INT, "dms", 0)],
            "tok": [(TAB, "tok", 0)],
            "acct": [(TAB, "acct", 0)],
            "ip": [(TAB, "ip", 0)],
            "tags": [(TAB, "tags", 0)],
            "sess": [(UUID, "sess_hi", 0)],
            "est": [(INT, "L", 0)],
        }

        def row(k: int) -> str:
            return spendlogs.render_spendlogs(cfg, [req(k)], {}).files["spend_logs.csv"].decode().split("\n", 1)[1]

        parts = split_template(row, lit)
        lit_cols = [
            "id_hi",
            "id_lo",
            "keyh",
            "total",
            "L",
            "C",
            "t0",
            "tend",
            "dms",
            "tok",
            "acct",
            "ip",
            "tags",
            "sess_hi",
            "sess_lo",
        ]
        self.prog["litellm", status] = self.progs.add(parts, lit_ops, self._cols(lit_cols))

    # --- streams -------------------------------------------------------------------------------
    # stream ids: n (server.log of node n), NN + n (requests.jsonl of node n), 2NN (LiteLLM), 2NN + 1 (Envoy)
    def stream_name(self, s: int) -> str:
        if s < 2 * self.NN:
            return f"{self.specs[s % self.NN].name}/{'server.log' if s < self.NN else 'requests.jsonl'}"
        return ROUTES[s - 2 * self.NN]

    def path(self, s: int, day: int) -> str:
        """The file (relative to the bundle) that holds stream s's lines of `day` (0: the first)."""
        last = self.a.days - 1
        rot = self.a.rotation
        date = (datetime.fromisoformat(START) + timedelta(days=day)).strftime("%Y%m%d")
        if s == 2 * self.NN:
            return "gateway/litellm/spend_logs.csv"
        if s == 2 * self.NN + 1:
            return (
                "gateway/envoy/access.jsonl" if day >= last or rot == "none" else f"gateway/envoy/access-{date}.jsonl"
            )
        node = self.specs[s % self.NN].name
        stem, ext = ("server", ".log") if s < self.NN else ("requests", ".jsonl")
        if day >= last or rot == "none":
            return f"engine/{node}/{stem}{ext}"
        if rot == "dateext":
            return f"engine/{node}/{stem}-{date}{ext}"
        return f"engine/{node}/{stem}{ext}.{last - day}" + (".gz" if rot == "numbered-gz" else "")


class FakeNode:
    """What writer.write_engine reads of a simulated node."""

    def __init__(self, spec: NodeSpec, lines: list[tuple[int, str]], jsonl: list[tuple[int, dict[str, object]]]):
        self.spec, self.name, self.lines, self.jsonl = spec, spec.name, lines, jsonl

    def clock(self, t: int) -> int:
        return t + self.spec.clock_offset_us


def _engine_files(
    cfg: SimConfig,
    spec: NodeSpec,
    lines: list[tuple[int, str]],
    jsonl: list[tuple[int, dict[str, object]]],
    headers: dict[int, dict[str, str]] | None,
) -> tuple[str, str]:
    """writer.write_engine's server.log and requests.jsonl for one node."""
    with tempfile.TemporaryDirectory() as tmp:
        writer.write_engine(Path(tmp), {spec.name: FakeNode(spec, lines, jsonl)}, cfg, headers)  # type: ignore[dict-item]
        d = Path(tmp) / "engine" / spec.name
        return (d / "server.log").read_text(), (d / "requests.jsonl").read_text()


# ------------------------------------------------------------------------------------------------
# Traffic


def rate_bins(a: argparse.Namespace, rng: np.random.Generator) -> np.ndarray:
    """The arrival rate per minute of the window (relative): diurnal x weekly x spikes."""
    n = a.days * 1440
    m = np.arange(n, dtype=np.float64)
    hour = (m / 60.0) % 24
    diurnal = 0.35 + 0.65 * (0.5 + 0.5 * np.cos(2 * np.pi * (hour - 15.0) / 24))
    dow = (m // 1440 + datetime.fromisoformat(START).weekday()) % 7
    rate = diurnal * np.where(dow >= 5, 0.7, 1.0)
    for _ in range(rng.poisson(a.spikes_per_day * a.days)):
        start = rng.integers(n)
        length = int(np.clip(rng.lognormal(np.log(8), 0.8), 2, 60))
        rate[start : start + length] *= rng.uniform(3, 8)
    return rate


def draw(b: Bundle, rng: np.random.Generator, idx0: int, n: int, lo_min: int, hi_min: int, rate: np.ndarray) -> dict:
    """n requests arriving in minutes [lo_min, hi_min) of the window, in arrival order."""
    a, cfg = b.a, b.cfg
    cum = np.cumsum(rate[lo_min:hi_min])
    u = np.sort(rng.random(n)) * cum[-1]
    k = np.searchsorted(cum, u, "right")
    frac = (u - np.where(k > 0, cum[np.maximum(k - 1, 0)], 0)) / rate[lo_min + k]
    t0 = cfg.start_us + ((lo_min + k + np.clip(frac, 0, 0.999999)) * 60 * S).astype(np.int64)
    r: dict[str, Any] = {"idx": np.arange(idx0, idx0 + n, dtype=np.int64), "t0": t0}
    acct = np.minimum(np.searchsorted(b.acct_w, rng.random(n)), a.accounts - 1)
    r["acct"] = acct
    r["route"] = b.acct_route[acct]
    tk = rng.integers(0, 2, size=n) % b.acct_ntok[acct]
    r["tok"], r["keyh"] = b.t_tok[acct, tk], b.t_keyh[acct, tk]
    r["ua"] = b.acct_ua[acct]
    r["pn"] = rng.integers(0, b.P, size=n)
    r["dn"] = rng.integers(0, b.D, size=n)
    L = np.clip(rng.lognormal(np.log(1500), 1.3, size=n), 16, 1_000_000).astype(np.int64)
    tail = rng.random(n) < a.long_rate
    L[tail] = np.exp(rng.uniform(np.log(65_536), np.log(1_000_000), size=int(tail.sum()))).astype(np.int64)
    ov = rng.random(n) < a.oversize_rate
    L[ov] = rng.integers(cfg.context_len, 2 * cfg.context_len, size=int(ov.sum()))
    r["L"], r["ov"] = L, ov
    r["ph"] = (L >= b.limit_p) & ~ov
    r["ab"] = (rng.random(n) < a.abort_rate) & ~ov
    r["out"] = np.clip(rng.lognormal(np.log(250), 0.9, size=n), 1, 8192).astype(np.int64)
    ps = cfg.page_size
    sp = rng.integers(256, 1500, size=n) // ps * ps
    hit = (rng.random(n) < 0.33) & (L > sp + ps) & ~r["ph"]
    r["K"] = np.where(hit, sp, 0)
    i = r["idx"]
    r["room"] = mix63(i, a.seed * 7919 + 1)
    for name, salt in (
        ("ridp_hi", 11),
        ("ridp_lo", 12),
        ("ridd_hi", 13),
        ("ridd_lo", 14),
        ("rq", 15),
        ("sess_hi", 16),
        ("sess_lo", 17),
        ("call_hi", 18),
        ("call_lo", 19),
    ):
        r[name] = mix64(i, salt + 1000 * a.seed)
    r["port"] = 1024 + (mix64(i, 20 + 1000 * a.seed).view(np.uint64) % np.uint64(60000)).astype(np.int64)

    def u_ms(lo: float, hi: float) -> np.ndarray:
        return (rng.uniform(lo, hi, size=n) * MS).astype(np.int64)

    # the event loop's times (forensics/simulate/engine.py, decode.py), vectorized
    r["d_alloc"] = t0 + u_ms(0.5, 4)
    r["p_ready"] = r["d_alloc"] + u_ms(0.05, 0.5)
    r["n_new"] = np.where(r["ph"], 1, L - r["K"])
    r["p_dur"] = ((300 + r["n_new"] * cfg.prefill_us_per_token) * rng.uniform(0.9, 1.1, size=n)).astype(np.int64)
    r["recv_p"], r["recv_d"] = t0 + u_ms(0.2, 0.5), t0 + u_ms(0.2, 0.5)
    r["late"] = u_ms(300, 900)
    r["land_u"], r["read_u"] = u_ms(0, 0.3), u_ms(0.2, 2)
    r["end_u"] = (r["out"] * rng.uniform(12, 35, size=n) * MS).astype(np.int64)
    r["gw_u"], r["fr_u"] = u_ms(0.5, 3), rng.random(n)
    r["ab_u"] = rng.random(n)
    return r


def timeline(b: Bundle, r: dict, last_end: np.ndarray) -> None:
    """Prefill start (one at a time per node), landing, abort, decode read and end, gateway end."""
    eng = ~r["ov"]
    order = np.argsort(np.where(eng, r["p_ready"], np.iinfo(np.int64).max), kind="stable")
    order = order[eng[order]]
    p_start = np.zeros_like(r["t0"])
    p_start[order] = _serialize(r["pn"][order], r["p_ready"][order], r["p_dur"][order], last_end)
    r["p_start"], r["p_end"] = p_start, p_start + r["p_dur"]
    n_x = np.where(r["ph"], 1, r["L"])
    land = np.maximum(r["p_end"], r["d_alloc"] + 100) + 200 + (n_x * 0.05).astype(np.int64) + r["land_u"]
    ab = r["ab"]
    land = np.where(ab, land + r["late"], land)
    lo = np.maximum(r["p_end"], r["d_alloc"] + MS)
    r["abort_t"] = lo + (r["ab_u"] * np.maximum(land - 200 * MS - lo, 0)).astype(np.int64)
    r["land"] = land
    r["read"] = land + r["read_u"]
    r["end"] = r["read"] + 20 + r["end_u"]
    r["t_end"] = np.where(r["ov"], r["t0"] + r["gw_u"], np.where(ab, r["abort_t"], r["end"] + r["gw_u"]))
    r["status"] = np.where(r["ov"], 400, np.where(ab, 499, 200))


# ------------------------------------------------------------------------------------------------
# Lines: rows (stream, ts, seq, prog, data...) of an int64 matrix


@njit(cache=True, error_model="numpy")
def _rows_from_columns(src, dst, at):
    for i in range(src.shape[1]):
        for j in range(src.shape[0]):
            dst[at + i, j] = src[j, i]


class Rows:
    """Line rows (stream, ts, seq, prog, data...) in one workspace reused from slice to slice (fresh memory
    is slow to touch on the benchmark VM); the rows still pending stay at its front."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.buf = np.empty((1 << 20, 4 + width), dtype=np.int64)
        self.n = 0
        self.kinds: dict[str, int] = {}

    def add(self, kind: str, stream, ts, seq, prog, cols: list) -> None:
        n = len(ts)
        if n == 0:
            return
        if self.n + n > len(self.buf):
            grown = np.empty((max(2 * len(self.buf), self.n + n), 4 + self.width), dtype=np.int64)
            grown[: self.n] = self.buf[: self.n]
            self.buf = grown
        src = np.empty((4 + len(cols), n), dtype=np.int64)  # column by column, then rows in one pass
        for j, c in enumerate([stream, ts, seq, prog, *cols]):
            src[j] = c
        _rows_from_columns(src, self.buf, self.n)
        self.n += n
        self.kinds[kind] = self.kinds.get(kind, 0) + n

    def keep(self, idx: np.ndarray) -> None:
        """Keep only rows idx (in that order) at the front."""
        self.buf[: len(idx)] = self.buf[idx]
        self.n = len(idx)


def engine_rows(b: Bundle, r: dict, rows: Rows) -> None:
    """Every engine line of the slice's requests (their ticks apart)."""
    NN, P = b.NN, b.P
    eng = ~r["ov"]
    off = b.offsets
    idx = r["idx"]
    pn, dn = r["pn"], r["dn"] + P
    prog = b.prog
    L, room, t0 = r["L"], r["room"], r["t0"]

    def progs(key: tuple, nodes: np.ndarray) -> np.ndarray:
        tab = np.array([prog.get((key[0], n, *key[1:]), -1) for n in range(NN)], dtype=np.int64)
        return tab[nodes]

    st = (t0 + 500) // 1000
    # prefill: over-length line, Prefill batch, Req Time Stats, --log-requests
    m = eng & r["ph"]
    ts = r["p_start"] + off[pn]
    rows.add(
        "overlength",
        pn[m],
        ts[m],
        idx[m] * 16 + 2,
        progs(("over",), pn[m]),
        [r["ridp_hi"][m], r["ridp_lo"][m], room[m], L[m], 0, 0, 0, 0, 0, 0, b.limit_p],
    )
    m = eng
    pb = r["pbatch"]
    rows.add(
        "prefill_batch",
        pn[m],
        ts[m],
        idx[m] * 16 + 3,
        progs(("pbatch",), pn[m]),
        [pb[k][m] for k in ("new", "cached", "used", "usage", "queue", "boot", "inflight", "thr", "it")],
    )
    ts = r["land"] + off[pn]
    rts_L = np.where(r["ph"], 1, L)
    rows.add(
        "time_stats",
        pn[m],
        ts[m],
        idx[m] * 16 + 4,
        progs(("rts_p",), pn[m]),
        [
            r["ridp_hi"][m],
            r["ridp_lo"][m],
            room[m],
            rts_L[m],
            1,
            tenths_ms(r["p_start"] - t0)[m],
            tenths_ms(r["land"] - r["p_start"])[m],
            0,
            0,
            st[m],
            0,
        ],
    )
    hdr = r["route"] == 1
    e2e_p = tenths_ms(r["land"] - r["p_start"])
    P_p = np.where(r["ph"], 1, L)
    fr_p = np.where(r["ph"], 1, 0)  # index into ("p", "ph")
    text_p = np.array([n in b.text_nodes for n in range(NN)])[pn]
    host = b.t_host[r["pn"]]
    for fr_i, fr in enumerate(("p", "ph")):
        for h in (False, True):
            mm = m & (fr_p == fr_i) & (hdr == h)
            cols_t = [r["ridp_hi"], r["ridp_lo"], room, host, P_p, 1, r["K"], e2e_p, r["rq"]]
            mt = mm & text_p
            rows.add(
                "text_finished",
                pn[mt],
                ts[mt],
                idx[mt] * 16 + 5,
                progs(("fin", fr, h), pn[mt]),
                [c[mt] if isinstance(c, np.ndarray) else c for c in cols_t],
            )
            mj = mm & ~text_p
            rows.add(
                "json_finished",
                NN + pn[mj],
                ts[mj],
                idx[mj] * 16 + 5,
                np.full(int(mj.sum()), prog["json", fr, h]),
                [r["ridp_hi"][mj], r["ridp_lo"][mj], room[mj], P_p[mj], 1, r["K"][mj], e2e_p[mj], r["rq"][mj]],
            )
    mt = m & text_p
    tsr = r["recv_p"] + off[pn]
    rows.add(
        "text_received",
        pn[mt],
        tsr[mt],
        idx[mt] * 16 + 1,
        progs(("recv",), pn[mt]),
        [r["ridp_hi"][mt], r["ridp_lo"][mt], room[mt], host[mt], 0, 0, 0, 0, r["rq"][mt]],
    )

    # decode: transfer failure or Req Time Stats, --log-requests
    ab = r["ab"]
    m = eng & ab
    ts = r["abort_t"] + off[dn]
    rows.add(
        "transfer_failed",
        dn[m],
        ts[m],
        idx[m] * 16 + 6,
        progs(("fail",), dn[m]),
        [r["ridd_hi"][m], r["ridd_lo"][m], room[m], 0, 0, 0, 0, 0, 0, 0, 0],
    )
    m = eng & ~ab
    ts_end = r["end"] + 10 + off[dn]
    rows.add(
        "time_stats",
        dn[m],
        ts_end[m],
        idx[m] * 16 + 7,
        progs(("rts_d",), dn[m]),
        [
            r["ridd_hi"][m],
            r["ridd_lo"][m],
            room[m],
            L[m],
            r["out"][m],
            tenths_ms(r["d_alloc"] - t0)[m],
            tenths_ms(r["land"] - r["d_alloc"])[m],
            tenths_ms(r["read"] - r["land"])[m],
            tenths_ms(r["end"] - r["read"])[m],
            st[m],
            0,
        ],
    )
    # finish reason: abort; length when... the simulator: length with probability 0.3, else stop
    fr_d = np.where(ab, 2, np.where(r["fr_u"] < 0.3, 1, 0))  # ("stop", "len", "abort")
    ts_fin = np.where(ab, r["abort_t"], r["end"] + 10) + off[dn]
    e2e_d = tenths_ms(np.where(ab, r["abort_t"], r["end"]) - t0)
    C_d = np.where(ab, 0, r["out"])
    text_d = np.array([n in b.text_nodes for n in range(NN)])[dn]
    host_d = b.t_host[r["pn"]]
    for fr_i, fr in enumerate(("stop", "len", "abort")):
        for h in (False, True):
            mm = eng & (fr_d == fr_i) & (hdr == h)
            mt = mm & text_d
            rows.add(
                "text_finished",
                dn[mt],
                ts_fin[mt],
                idx[mt] * 16 + 8,
                progs(("fin", fr, h), dn[mt]),
                [r["ridd_hi"][mt], r["ridd_lo"][mt], room[mt], host_d[mt], L[mt], C_d[mt], 0, e2e_d[mt], r["rq"][mt]],
            )
            mj = mm & ~text_d
            rows.add(
                "json_finished",
                NN + dn[mj],
                ts_fin[mj],
                idx[mj] * 16 + 8,
                np.full(int(mj.sum()), prog["json", fr, h]),
                [r["ridd_hi"][mj], r["ridd_lo"][mj], room[mj], L[mj], C_d[mj], 0, e2e_d[mj], r["rq"][mj]],
            )
    mt = eng & text_d
    tsr = r["recv_d"] + off[dn]
    rows.add(
        "text_received",
        dn[mt],
        tsr[mt],
        idx[mt] * 16 + 1,
        progs(("recv",), dn[mt]),
        [r["ridd_hi"][mt], r["ridd_lo"][mt], room[mt], host_d[mt], 0, 0, 0, 0, r["rq"][mt]],
    )


def gateway_rows(b: Bundle, r: dict, rows: Rows) -> None:
    NN = b.NN
    idx, t0, t_end, L = r["idx"], r["t0"], r["t_end"], r["L"]
    C = np.where(r["status"] == 200, r["out"], 0)
    dur_ms = (t_end - t0) // 1000
    for status in (200, 499, 400):
        for route in (0, 1):
            m = (r["status"] == status) & (r["route"] == route)
            if not m.any():
                continue
            acct = b.t_acct[r["acct"][m]]
            ip = b.t_ip[r["acct"][m]]
            if route == 1:
                rows.add(
                    "envoy",
                    2 * NN + 1,
                    t_end[m],
                    idx[m],
                    b.prog["envoy", status],
                    [
                        r["rq"][m],
                        t0[m],
                        dur_ms[m],
                        np.maximum(dur_ms[m] - 1, 0),
                        L[m],
                        C[m],
                        L[m] + C[m],
                        4 * L[m] + 180,
                        4 * C[m] + 420,
                        r["port"][m],
                        (r["port"][m] * 7) % 60000 + 1024,
                        b.t_ua_env[r["ua"][m]],
                        ip,
                        acct,
                    ],
                )
            else:
                d = t_end[m] - t0[m]
                q, rem = d // 1000, d % 1000
                dms = q + ((rem > 500) | ((rem == 500) & (q % 2 == 1)))  # round((t_end - t0) / 1000): half even
                ok = status == 200
                rows.add(
                    "litellm",
                    2 * NN,
                    t_end[m],
                    idx[m],
                    b.prog["litellm", status],
                    [
                        r["ridd_hi"][m] if ok else r["call_hi"][m],
                        r["ridd_lo"][m] if ok else r["call_lo"][m],
                        r["keyh"][m],
                        L[m] + C[m],
                        L[m],
                        C[m],
                        t0[m],
                        t_end[m],
                        dms,
                        r["tok"][m],
                        acct,
                        ip,
                        b.t_tags[r["ua"][m]],
                        r["sess_hi"][m],
                        r["sess_lo"][m],
                    ],
                )


# ------------------------------------------------------------------------------------------------
# Queue figures: the batch lines' values, counted over the requests' intervals


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


def prefill_figures(b: Bundle, r: dict, c: Carry, t_hi: int) -> None:
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


def decode_ticks(b: Bundle, r: dict, c: Carry, t_lo: int, t_hi: int, rows: Rows) -> None:
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


class Out:
    """Open files per stream (one day at a time), line and byte counts per file."""

    def __init__(self, b: Bundle, root: Path) -> None:
        self.b, self.root = b, root
        self.open: dict[int, tuple[str, Any]] = {}
        self.lines: dict[str, int] = {}
        self.bytes = 0
        self.out = np.empty(1 << 24, dtype=np.uint8)
        for n in range(b.NN):  # the start-up lines open each node's first file
            text = _engine_files(b.cfg, b.specs[n], [], [], None)[0].encode()
            if (f := self.fh(n, 0)) is not None:
                f.write(text)
            self.lines[b.path(n, 0)] += text.count(b"\n")
            self.bytes += len(text)

    def fh(self, s: int, day: int) -> Any:
        path = self.b.path(s, day)
        self.lines.setdefault(path, 0)
        if self.b.a.no_write:
            if s == 2 * self.b.NN and self.lines[path] == 0:
                self.lines[path] = 1
            return None
        cur = self.open.get(s)
        if cur is not None and cur[0] == path:
            return cur[1]
        if cur is not None:
            cur[1].close()
        p = self.root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        f = gzip.open(p, "wb", compresslevel=1) if path.endswith(".gz") else p.open("wb")
        self.open[s] = (path, f)
        self.lines.setdefault(path, 0)
        if s == 2 * self.b.NN and self.lines[path] == 0:
            f.write((",".join(spendlogs.SPENDLOGS_COLUMNS) + "\n").encode())
            self.lines[path] += 1
        return f

    def write(self, M: np.ndarray, order: np.ndarray, block: int = 250_000) -> None:
        """Rows M[order] (sorted by stream and time): rendered in blocks and written to each row's file."""
        b = self.b
        ops, ps, pe, bounds = b.progs.arrays()
        pdata, poff = b.pool.arrays()
        for a in range(0, len(order), block):
            sub = M[order[a : a + block]]
            day = np.clip((sub[:, 1] - b.cfg.start_us) // DAY, 0, b.a.days - 1)
            k = sub[:, 0] * 1000 + np.where(sub[:, 0] == 2 * b.NN, 0, day)
            cap = int(bounds[sub[:, 3]].sum())
            if len(self.out) < cap:
                self.out = np.empty(int(cap * 1.25), dtype=np.uint8)
            off = np.empty(len(sub) + 1, dtype=np.int64)
            _render(sub, ops, ps, pe, pdata, poff, self.out, off)
            cut = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1, len(k)]
            for i, j in zip(cut[:-1], cut[1:], strict=True):
                s, d = int(sub[i, 0]), int(k[i] % 1000)
                f = self.fh(s, d)
                if f is not None:
                    f.write(memoryview(self.out)[off[i] : off[j]])
                self.lines[b.path(s, d)] += int(j - i)
            self.bytes += int(off[-1])

    def close(self) -> None:
        for _, f in self.open.values():
            f.close()


def generate(a: argparse.Namespace) -> dict:
    t_start = time.perf_counter()
    out = Path(a.out)
    root = out / "bundle"
    shutil.rmtree(out, ignore_errors=True)
    root.mkdir(parents=True)
    b = Bundle(a)
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
    rows = Rows(Bundle.W)
    base = cfg.start_us - DAY  # sort keys: 43 bits of time from here
    kinds: dict[str, int] = {}
    stats = {
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
        print(
            f"  slice {ci + 1}/{len(counts)}: {idx0:,} requests, {o.bytes / 1e9:.2f} GB, "
            f"{time.perf_counter() - t_start:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    o.close()
    wall = time.perf_counter() - t_start
    meta = {
        "requests": a.requests,
        "args": {k: v for k, v in vars(a).items() if k != "out"},
        "nodes": {"prefill": b.P, "decode": b.D, "text_log": sorted(b.specs[n].name for n in b.text_nodes)},
        "files": dict(sorted(o.lines.items())),
        "lines": sum(o.lines.values()),
        "bytes": o.bytes,
        "kinds": dict(sorted(kinds.items())),
        **stats,
        "gen_s": round(wall, 2),
        "requests_per_s": round(a.requests / wall),
        "mb_per_s": round(o.bytes / 1e6 / wall, 1),
    }
    (out / "counts.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def _tally(b: Bundle, stats: dict, r: dict) -> None:
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output folder (OUT/bundle, OUT/counts.json); replaced")
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--decode-nodes", type=int, default=16)
    ap.add_argument("--prefill-nodes", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--release", default="0.5.11", choices=BATCH_RELEASES, help="SGLang release the lines are of")
    ap.add_argument("--gateway", default="litellm,envoy", help="litellm, envoy or both (comma-separated)")
    ap.add_argument("--litellm-share", type=float, default=0.7, help="with both: accounts behind LiteLLM")
    ap.add_argument(
        "--text-nodes", default="odd-decode", help="--log-requests text form: odd-decode, all, none, or names"
    )
    ap.add_argument("--rotation", default="dateext", choices=("dateext", "numbered", "numbered-gz", "none"))
    ap.add_argument("--accounts", type=int, default=3000)
    ap.add_argument("--long-rate", type=float, default=0.001, help="prompts log-uniform in [64K, 1M] tokens")
    ap.add_argument("--oversize-rate", type=float, default=0.0005, help="prompts over the context (HTTP 400)")
    ap.add_argument("--abort-rate", type=float, default=0.01)
    ap.add_argument("--spikes-per-day", type=float, default=3.0)
    ap.add_argument("--no-write", action="store_true", help="render every line, write none (the CPU's rate)")
    ap.add_argument("--chunk", type=int, default=250_000, help="requests per time slice (memory)")
    a = ap.parse_args(argv)
    a.gateway = sorted(g.strip() for g in a.gateway.split(",") if g.strip())
    if not a.gateway or any(g not in ROUTES for g in a.gateway):
        ap.error("--gateway: litellm, envoy or litellm,envoy")
    return a


def keep_memory() -> None:
    """glibc: arrays up to 32 MB from the heap, which is never trimmed, so freed memory is reused (fresh
    pages cost about 3.5 s per GB on the benchmark VM: benchmarks/README.md). 1M requests: 29.5 -> 20.5 s."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, (1 << 31) - 1)  # M_TRIM_THRESHOLD
    libc.mallopt(-2, 256 << 20)  # M_TOP_PAD


def main(argv: list[str] | None = None) -> int:
    keep_memory()
    meta = generate(parse_args(argv))
    print(json.dumps({k: meta[k] for k in ("requests", "lines", "bytes", "gen_s", "requests_per_s", "mb_per_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
