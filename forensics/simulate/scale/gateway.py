"""The scale generator's gateway lines: a LiteLLM_SpendLogs row (litellm_spendlogs.render_spendlogs) and an
Envoy access-log line (envoy.render_envoy) per status, 200, 499 (the client aborted) and 400 (longer than
the context), each split out of the format's own writer with sentinel requests."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from forensics.gateway_formats import _writing, envoy, litellm
from forensics.gateway_formats import litellm_spendlogs as spendlogs
from forensics.simulate.config import SimConfig
from forensics.simulate.request import Request
from forensics.simulate.scale.render import HEX, INT, LIT, TAB, TS, TS_ISO_MS_Z, TS_PG, UUID, Op, split_template

if TYPE_CHECKING:
    from forensics.simulate.scale.templates import Bundle


def build(b: Bundle) -> None:
    """LiteLLM_SpendLogs rows (spendlogs.render_spendlogs) and Envoy access-log lines (envoy.render_envoy)
    per status: 200, 499 (the client aborted), 400 (longer than the context)."""
    cfg = b.cfg
    for status in (200, 499, 400):
        for salt in range(50):  # a sentinel whose digest-made port also occurs as literal text: the next
            try:
                _status(b, cfg, status, salt)
                break
            except ValueError:
                if salt == 49:
                    raise


def _status(b: Bundle, cfg: SimConfig, status: int, salt: int) -> None:
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
    b.prog["envoy", status] = b.progs.add(parts, env_ops, b.cols(env_cols))

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
    b.prog["litellm", status] = b.progs.add(parts, lit_ops, b.cols(lit_cols))
