"""Accounts, sessions and the client requests the gateway receives (all from one seeded RNG)."""

from __future__ import annotations

import math
import random

from forensics.simulate.cohorts import cohort_of
from forensics.simulate.config import MS, S, SimConfig
from forensics.simulate.request import (
    BENCH_UA,
    CUSTOMER_UAS,
    HOSTILE_UAS,
    INTERNAL_LOAD,
    INTERNAL_PERF,
    QA_ACCOUNT,
    RESEARCHER,
    RESEARCHER_ALT,
    RESEARCHER_IP,
    Request,
    _ts,
    cohorts_for,
    researcher_window,
)

__all__ = [
    "INTERNAL_LOAD",
    "INTERNAL_PERF",
    "QA_ACCOUNT",
    "RESEARCHER",
    "RESEARCHER_ALT",
    "Traffic",
    "cohorts_for",
]


class Traffic:
    def __init__(self, cfg: SimConfig, rng: random.Random) -> None:
        self.cfg, self.rng = cfg, rng
        ctx = cfg.context_len
        self.pmax = min(n.max_req_input_len(ctx) for n in cfg.prefill_nodes)
        self.dmax = min(n.max_req_input_len(ctx) for n in cfg.decode_nodes)
        self.sp_lens = [
            rng.randint(cfg.system_prompt_max // 10, cfg.system_prompt_max) for _ in range(cfg.n_system_prompts)
        ]
        self.accounts = self._accounts()
        self.weights = [1.0 / (k + 1) ** 1.1 for k in range(len(self.accounts))]
        self._used: set[int] = set()
        self._n_int = -1

    def _accounts(self) -> list[dict[str, object]]:
        rng, out = self.rng, []
        for k in range(self.cfg.n_accounts):
            name = RESEARCHER if k == 7 else f"acct-{rng.getrandbits(24):06x}"
            if rng.random() < 0.2:
                ip = f"2001:db8:{rng.randint(1, 0xFFFF):x}::{rng.randint(1, 0xFFFF):x}"
            else:
                ip = f"203.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
            ua = HOSTILE_UAS[k % len(HOSTILE_UAS)] if k % 9 == 4 else rng.choice(CUSTOMER_UAS)
            toks = [f"tok-{rng.getrandbits(32):08x}" for _ in range(rng.randint(1, 2))]
            out.append(
                {
                    "name": name,
                    "ip": RESEARCHER_IP if name == RESEARCHER else ip,
                    "ua": ua,
                    "tokens": toks,
                    "sp": rng.randrange(self.cfg.n_system_prompts),
                }
            )
        return out

    def _uniq(self, bits: int) -> int:
        while True:
            v = self.rng.getrandbits(bits)
            if v and v not in self._used:
                self._used.add(v)
                return v

    def _lognormal(self, median: float, sigma: float) -> int:
        return max(1, int(math.exp(math.log(median) + sigma * self.rng.gauss(0, 1))))

    def _length(self, kind: str, sp_len: int) -> int:
        cfg, rng = self.cfg, self.rng
        if kind == "long":
            return rng.randrange(self.pmax, self.dmax)
        if kind == "repro":
            return rng.randrange(self.pmax, min(self.dmax, self.pmax + max(64, self.pmax // 4)))
        if kind == "oversize":
            return rng.randrange(cfg.context_len, cfg.context_len * 3 // 2)
        return min(self.pmax - 1, sp_len + self._lognormal(cfg.prompt_median, cfg.prompt_sigma))

    def generate(self) -> list[Request]:
        cfg, rng, n = self.cfg, self.rng, self.cfg.requests
        n_int = int(n * cfg.internal_rate)
        n_rep = int(n * cfg.researcher_rate) if cfg.researcher else 0
        plan: list[tuple[str, int]] = []  # (session kind, size)
        for kind, total, mean in (
            ("internal", n_int, 12),
            ("repro", n_rep, 5),
            ("customer", n - n_int - n_rep, 4),
        ):
            while total > 0:
                k = min(total, 3 * mean, max(1, int(rng.expovariate(1 / mean)) + 1))
                plan.append((kind, k))
                total -= k
        after, before = researcher_window(cfg)
        w0, w1 = (_ts(after) - cfg.start_us, _ts(before) - cfg.start_us)
        specs: list[tuple[int, int, str, int]] = []  # (t0, session no, kind, position)
        for s_no, (kind, k) in enumerate(plan):
            lo, hi = (w0, w1 - 60 * S) if kind == "repro" else (0, cfg.duration_us - 60 * S)
            t = rng.randrange(lo, max(lo + 1, hi))
            gap = 50 * MS if kind == "internal" else 700 * MS
            for pos in range(k):
                specs.append((t, s_no, kind, pos))
                t += int(rng.expovariate(1 / gap)) + 1
        specs.sort()
        sessions: dict[int, dict[str, object]] = {}
        reqs: list[Request] = []
        for i, (t, s_no, kind, _pos) in enumerate(specs):
            if s_no not in sessions:
                sessions[s_no] = self._session(kind)
            reqs.append(self._request(i, cfg.start_us + t, kind, sessions[s_no]))
        cohorts = cohorts_for(cfg)
        for r in reqs:
            r.cohort = cohort_of(cohorts, r.match_view(cfg.model))
        return reqs

    def _session(self, kind: str) -> dict[str, object]:
        rng = self.rng
        if kind == "internal":
            self._n_int += 1
            roll = (0.1, 0.7, 0.3, 0.9, 0.5)[self._n_int % 5]
            if roll < 0.6:
                return {
                    "account": INTERNAL_LOAD,
                    "ip": f"10.0.4.{rng.randint(2, 250)}",
                    "ua": BENCH_UA,
                    "token": "tok-int-load",
                    "headers": None,
                    "sp": 0,
                }
            if roll < 0.8:
                return {
                    "account": INTERNAL_PERF,
                    "ip": "10.0.9.14",
                    "ua": BENCH_UA,
                    "token": "tok-int-perf",
                    "headers": None,
                    "sp": 1,
                }
            return {
                "account": QA_ACCOUNT,
                "ip": "10.1.2.3",
                "ua": "canary/1.0",
                "token": "tok-qa",
                "headers": {"x-internal-test": "1"},
                "sp": 0,
            }
        if kind == "repro":
            acct = RESEARCHER if rng.random() < 0.6 else RESEARCHER_ALT
            return {
                "account": acct,
                "ip": RESEARCHER_IP,
                "ua": "python-requests/2.32.3",
                "token": "tok-r-" + acct[-6:],
                "headers": None,
                "sp": -1,
            }
        a = rng.choices(self.accounts, weights=self.weights)[0]
        return {
            "account": a["name"],
            "ip": a["ip"],
            "ua": a["ua"],
            "token": rng.choice(list(a["tokens"])),  # type: ignore[call-overload]
            "headers": None,
            "sp": a["sp"] if rng.random() < 0.8 else 0,
        }

    def _request(self, i: int, t0: int, kind: str, sess: dict[str, object]) -> Request:
        cfg, rng = self.cfg, self.rng
        sp = int(sess["sp"])  # type: ignore[call-overload]
        if sp >= 0 and rng.random() < 0.15:
            sp = -1
        sp_len = self.sp_lens[sp] if sp >= 0 else 0
        roll = rng.random()
        if kind == "repro":
            lk = "repro" if roll < 0.85 else "normal"
        elif roll < cfg.oversize_rate:
            lk = "oversize"
        elif roll < cfg.oversize_rate + cfg.long_rate:
            lk = "long"
        else:
            lk = "normal"
        L = self._length(lk, sp_len)
        if lk != "normal":
            sp, sp_len = -1, 0
        out = min(4 * cfg.out_median, self._lognormal(cfg.out_median, 0.9))
        abort = lk != "oversize" and rng.random() < cfg.abort_rate
        prefill = rng.choice(cfg.prefill_nodes).name
        decodes = cfg.decode_nodes if not abort or cfg.dark_aborts else [d for d in cfg.decode_nodes if d.telemetry]
        decode = rng.choice(decodes).name
        headers = sess["headers"]
        return Request(
            idx=i,
            request_id=f"req-{self._uniq(48):012x}",
            t0=t0,
            account=str(sess["account"]),
            token=str(sess["token"]),
            ip=str(sess["ip"]),
            ua=str(sess["ua"]),
            headers=dict(headers) if isinstance(headers, dict) else None,
            L=L,
            out=out,
            sp_id=sp,
            sp_len=sp_len,
            abort=abort,
            prefill=prefill,
            decode=decode,
            room=self._uniq(63),
            rid_p=f"{self._uniq(128):032x}",
            rid_d=f"{self._uniq(128):032x}",
            gw=rng.randrange(4),
        )
