"""The scale generator's truth: truth/responses.csv, one row per client request in the columns of the
simulator's (forensics.simulate.run.RESPONSE_COLUMNS), rendered by the bundle's own programs so its
request ids are the gateway's.

A scale bundle has no page events and the generator keeps no pages, so the truth says what the
requests decide and no more:
- placeholder, aborted, status, nodes: as drawn;
- exposed (kind stale): a placeholder response that completed (2xx). Its decode node reads the whole
  prompt from pages its prefill never wrote, the signature; the truth takes them as other requests' KV,
  as the simulator finds on a used pool (the scale generator models no pool, so a placeholder in a
  node's first minutes, before its pages were ever written, is an over-statement; tests use windows
  where every pool has been cycled);
- allowed_indeterminate: every placeholder, and every completed response on a decode node within
  run.LATE_MARGIN of an aborted request's late landing there (the rule of the simulator's truth);
- exposure pairs: none are known (truth/exposures.csv has its header only; summary.json says
  exposure_pairs: null, not 0).
A request is written when no later landing can touch it: at the end of the slice its window closes in,
so the rows are in that order, not sorted by request id."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from forensics.simulate.run import LATE_MARGIN, RESPONSE_COLUMNS
from forensics.simulate.scale.options import DAY
from forensics.simulate.scale.render import HEX, INT, LIT, TAB, UUID, Op

if TYPE_CHECKING:
    from forensics.simulate.scale.out import Out
    from forensics.simulate.scale.templates import Bundle

COLS = ["id_hi", "id_lo", "room", "acct", "status", "dnode", "pnode", "ph", "ab", "exp", "kinds", "allowed"]
BIG = np.int64(1) << np.int64(42)


def _programs(b: Bundle) -> dict[tuple[int, int], int]:
    """(route, status) -> the program of a truth row; its request id printed as that gateway's record."""
    longest = max(len(s.name) for s in b.specs)
    b.progs.table_max.update(dnode=longest, pnode=longest, kinds=len("stale"))
    ids: dict[tuple[int, int], list[Op]] = {
        (0, 200): [(HEX, "id_hi", 16), (HEX, "id_lo", 16)],  # LiteLLM: the decode rid of a success
        (0, 499): [(UUID, "id_hi", 0)],  # ... its own call id of a failure
        (0, 400): [(UUID, "id_hi", 0)],
        **{(1, s): [(LIT, "req-", 0), (HEX, "id_hi", 16)] for s in (200, 499, 400)},  # Envoy: x-request-id
    }
    parts: list[tuple[str, Any]] = [("slot", "id")]
    slots: dict[str, list[Op]] = {}
    for c in COLS[2:]:
        parts += [("lit", ",customer," if c == "status" else ","), ("slot", c)]
        slots[c] = [(TAB, c, 0)] if c in ("acct", "dnode", "pnode", "kinds") else [(INT, c, 0)]
    parts = parts[:-2] + [("lit", ",signature,"), ("slot", "allowed"), ("lit", "\n")]
    cols = b.cols(COLS)
    return {key: b.progs.add(parts, {**slots, "id": id_ops}, cols) for key, id_ops in ids.items()}


class Truth:
    def __init__(self, b: Bundle, out: Out, folder: Path) -> None:
        self.b, self.out = b, out
        self.prog = _programs(b)
        self.t_node = b.pool.table([s.name for s in b.specs])
        self.t_kinds = b.pool.table(["", "stale"])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "exposures.csv").write_text("recipient_request_id,source_request_id,node,kind,slots\n")
        self.fh = (folder / "responses.csv").open("wb")
        self.fh.write((",".join(RESPONSE_COLUMNS) + "\n").encode())
        self.rows = np.empty((0, 5 + len(COLS)), dtype=np.int64)  # pending: idx, lo, hi, prog, decode, data
        self.land = np.empty(0, dtype=np.int64)  # late landings: decode node * BIG + time from base
        self.base = b.cfg.start_us - DAY
        self.written = 0

    def add(self, r: dict[str, Any], t_hi: int) -> None:
        """The slice's requests; the rows whose window ends before t_hi written (no later landing reaches them)."""
        b = self.b
        dn, st, ph, ab = r["dn"], r["status"], r["ph"].astype(np.int64), r["ab"]
        late = ab & ~r["ov"]
        self.land = np.sort(np.concatenate((self.land, dn[late] * BIG + (r["land"][late] - self.base))))
        ok = st == 200
        lo = np.where(ok, r["d_alloc"] - LATE_MARGIN, 0)
        hi = np.where(ok, r["end"] + LATE_MARGIN, 0)
        prog = np.select([(r["route"] == k[0]) & (st == k[1]) for k in self.prog], list(self.prog.values()), -1)
        litellm_ok = (r["route"] == 0) & ok
        id_hi = np.where(r["route"] == 1, r["rq"], np.where(litellm_ok, r["ridd_hi"], r["call_hi"]))
        id_lo = np.where(litellm_ok, r["ridd_lo"], r["call_lo"])
        exp = ph * ok
        data = [id_hi, id_lo, r["room"], b.t_acct[r["acct"]], st, self.t_node[dn + b.P], self.t_node[r["pn"]]]
        data += [ph, ab.astype(np.int64), exp, self.t_kinds[exp], ph]
        new = np.column_stack([r["idx"], lo, hi, prog, dn, *data]).astype(np.int64)
        self.rows = np.concatenate((self.rows, new))
        self._flush(t_hi)

    def _flush(self, t_hi: int) -> None:
        R = self.rows
        ok = R[:, 5 + COLS.index("status")] == 200
        lo, hi = R[:, 4] * BIG + (R[:, 1] - self.base), R[:, 4] * BIG + (R[:, 2] - self.base)
        hit = ok & (np.searchsorted(self.land, hi, "right") > np.searchsorted(self.land, lo, "left"))
        R[:, 5 + COLS.index("allowed")] |= hit.astype(np.int64)
        done = ~ok | (R[:, 2] < t_hi)
        fin = R[done]
        fin = fin[np.argsort(fin[:, 0], kind="stable")]
        if len(fin):
            M = np.zeros((len(fin), 4 + self.b.W), dtype=np.int64)
            M[:, 3] = fin[:, 3]
            M[:, 4 : 4 + len(COLS)] = fin[:, 5:]
            self.fh.write(self.out.render(M))
            self.written += len(fin)
        self.rows = R[~done]
        # landings no request still pending or to come can reach
        first = min(int(self.rows[:, 1].min()) if len(self.rows) else t_hi, t_hi - LATE_MARGIN)
        self.land = self.land[(self.land % BIG) >= first - self.base]

    def close(self) -> None:
        self._flush(np.iinfo(np.int64).max // 4)
        self.fh.close()
