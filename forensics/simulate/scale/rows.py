"""The scale generator's line rows: each line a row (stream, ts, seq, prog, data...) of an int64 matrix,
the engine lines and the gateway lines of a slice's requests (the batch lines: figures.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from forensics.simulate.scale.traffic import tenths_ms

if TYPE_CHECKING:
    from forensics.simulate.scale.templates import Bundle


@njit(cache=True, error_model="numpy")
def _rows_from_columns(src: np.ndarray, dst: np.ndarray, at: int) -> None:
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

    def add(self, kind: str, stream: Any, ts: np.ndarray, seq: Any, prog: Any, cols: list[Any]) -> None:
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


def engine_rows(b: Bundle, r: dict[str, Any], rows: Rows) -> None:
    """Every engine line of the slice's requests (their ticks apart)."""
    NN, P = b.NN, b.P
    eng = ~r["ov"]
    off = b.offsets
    idx = r["idx"]
    pn, dn = r["pn"], r["dn"] + P
    prog = b.prog
    L, room, t0 = r["L"], r["room"], r["t0"]

    def progs(key: tuple[Any, ...], nodes: np.ndarray) -> np.ndarray:
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


def gateway_rows(b: Bundle, r: dict[str, Any], rows: Rows) -> None:
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
