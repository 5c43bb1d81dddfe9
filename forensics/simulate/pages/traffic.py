"""The realistic generator's traffic: each request's lengths and timings drawn in chunks, and the sizing
(the hold exponent and the bursts) that fits the rooms in flight asked for into the decode pool.

Traffic: Poisson arrivals whose rate a few bursts (`bursts`, `burst_mult` 3-5x, each a few per cent of
the trace's time) modulate; request k goes to a decode and a prefill node drawn at random. Prompts are
log-normal (median 1,500 tokens, sigma 1.3) clipped to the context minus the output, outputs log-normal
(median 300, sigma 0.7, at most 4,096). A prompt at or over the prefill limit (the prefill pool less 6
tokens, SGLang's max_req_input_len) takes the placeholder path; besides the few the log-normal tail
gives, a share `placeholder_rate` of requests get such a prompt (uniform up to the context): prefill
computes and transfers one slot, decode reads the whole prompt (stale KV of earlier holders, and
never-written slots).

Concurrency (`concurrency`, default 300): the mean number of rooms holding pages on a decode node. The
arrival rate is set from it and the mean hold (Little's law), so `events` and the concurrency are
independent (the summary's inflight: the time average from two mean holds after the first arrival to
the last). Holds: decode time = 20 ms + output x 12-35 ms per token x w (at most 150 s),
w = min(4, (S0/size)^beta), size the request's slots, S0 the median size. With beta = 0 (holds
independent of size) a decode pool of 1,048,576 slots holds only about 200 rooms of this length
distribution on average (the output alone weighs about 600 slots in the time-weighted mean), so the
generator picks beta (`hold_exponent` None): the smallest that fits the rooms into 60% of the pool,
and then scales the bursts down (towards 1x) until the burst peak fits 90% of it. The summary's
`sizing` says what it chose; a large concurrency leaves no room for bursts."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forensics.simulate.pages.layout import AB, PH

PROMPT_MEDIAN, PROMPT_SIGMA = 1_500, 1.3
OUT_MEDIAN, OUT_SIGMA, OUT_MAX = 300, 0.7, 4_096
MIN_PROMPT = 16
W_HI = 4.0  # the longest hold factor (small requests)
MAX_DECODE_US = 150_000_000  # the longest decode time
BETA_MAX = 2.5
FIT_MEAN, FIT_PEAK = 0.6, 0.9  # shares of the decode pool the mean and the burst peak may fill


def lengths(
    rng: np.random.Generator, n: int, context: int, limit: int, placeholder_rate: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    out = np.clip(np.exp(rng.normal(math.log(OUT_MEDIAN), OUT_SIGMA, n)), 1, OUT_MAX).astype(np.int64)
    prompt = np.clip(np.exp(rng.normal(math.log(PROMPT_MEDIAN), PROMPT_SIGMA, n)), MIN_PROMPT, context - out)
    prompt = prompt.astype(np.int64)
    forced = rng.random(n) < placeholder_rate
    long = limit + (rng.random(n) * np.maximum(1, context - out - limit)).astype(np.int64)
    prompt = np.where(forced, np.minimum(long, context - out), prompt)
    return prompt, out, prompt >= limit


def timings(
    prompt: np.ndarray, out: np.ndarray, ph: np.ndarray, ab: np.ndarray, u: np.ndarray, ps: int, beta: float, s0: float
) -> np.ndarray:
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


def draw(rng: np.random.Generator, n: int, p: dict[str, Any]) -> dict[str, np.ndarray]:
    prompt, out, ph = lengths(rng, n, p["context"], p["limit"], p["placeholder_rate"])
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
        "off": timings(prompt, out, ph, ab, u, p["ps"], p["beta"], p["s0"]),
        "acct": rng.zipf(1.3, n) % 5000,
        "tail": rng.integers(500, 3_000, n),
    }


def sizing(
    seed: int, p: dict[str, Any], concurrency: float, beta: float | None, bursts: int, mult: tuple[float, float]
) -> dict[str, Any]:
    """The hold exponent and the bursts: the time-weighted room size (slots) against the pool."""
    rng = np.random.default_rng([seed, 7])
    n = 200_000
    prompt, out, ph = lengths(rng, n, p["context"], p["limit"], p["placeholder_rate"])
    ab = rng.random(n) < p["abort_rate"]
    u = rng.random((n, 8))
    ps = p["ps"]
    dpp, dop = -(-prompt // ps), -(-out // ps)
    s0 = float(np.median((dpp + dop) * ps))
    pool = (p["decode_pool"] // ps - 1) * ps

    off = timings(prompt, out, ph, ab, u, ps, 0.0, s0)
    dec = off[:, 3] - off[:, 2] - 20_000  # decode time at w = 1
    size = ((dpp + dop) * ps).astype(float)
    held_size = np.where(ab, dpp, dpp + dop) * ps

    def weigh(b: float) -> tuple[float, float, float]:
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

    def layout(scale: float) -> tuple[np.ndarray, float, float]:
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
