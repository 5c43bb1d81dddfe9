"""The scale generator's traffic: arrivals over the window (a diurnal and weekly rate with spikes), the
requests' draws, and their times as the simulator's event loop takes them (forensics/simulate/engine.py,
decode.py), vectorized; ids as bijections of the request index (distinct by construction)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from forensics.simulate.config import MS, S
from forensics.simulate.scale.options import START, Scale

if TYPE_CHECKING:
    from forensics.simulate.scale.templates import Bundle


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
def _serialize(node: np.ndarray, ready: np.ndarray, dur: np.ndarray, last_end: np.ndarray) -> np.ndarray:
    """Each prefill node runs one request at a time: start = max(ready, the node's previous end).
    Rows in order of ready; last_end (per node) carries over from slice to slice."""
    start = np.empty_like(ready)
    for i in range(ready.shape[0]):
        n = node[i]
        s = ready[i] if ready[i] > last_end[n] else last_end[n]
        start[i] = s
        last_end[n] = s + dur[i]
    return start


def active(
    node_s: np.ndarray, s: np.ndarray, e: np.ndarray, w: np.ndarray, node_q: np.ndarray, q: np.ndarray, base: int
) -> np.ndarray:
    """Per query (node_q, q): the sum of w over the intervals [s, e) of that node holding q (times from
    `base`, less than 2^42 us after it)."""
    big = np.int64(1) << np.int64(42)
    ks, ke = node_s * big + (s - base), node_s * big + (e - base)
    os_, oe = np.argsort(ks, kind="stable"), np.argsort(ke, kind="stable")
    cs = np.concatenate(([0], np.cumsum(w[os_])))
    ce = np.concatenate(([0], np.cumsum(w[oe])))
    kq = node_q * big + (q - base)
    return cs[np.searchsorted(ks[os_], kq, "right")] - ce[np.searchsorted(ke[oe], kq, "right")]


def rate_bins(a: Scale, rng: np.random.Generator) -> np.ndarray:
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


def draw(
    b: Bundle, rng: np.random.Generator, idx0: int, n: int, lo_min: int, hi_min: int, rate: np.ndarray
) -> dict[str, Any]:
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


def timeline(b: Bundle, r: dict[str, Any], last_end: np.ndarray) -> None:
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
