"""The guard's hooks before a forward pass, and how a refused request ends (forensics.sglang.protocol
checks at the transfer's commit, this module at every batch): the check of each request's attended slots
against the ledger (Runtime.on_batch), enforce's refusal through SGLang's own abort paths, and the
fail-closed path when the ledger is missing or its check raises. Nothing here raises into the scheduler
loop. The process's runtime and settings are forensics.sglang.hooks' (read at each call: the runtime is
made at the first allocator call).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from forensics.sglang import alerts, hooks
from forensics.sglang.hooks import _EMPTY, _np, _req_ids, say_once
from forensics.sglang.runtime import Violation


def refusal(v: Any) -> str:
    """The error a refused request ends with: the plugin, and why."""
    return f"kv-forensics KV integrity guard refused this request: {alerts.why(v)}"


def refuse(req: Any, msg: str, at_commit: bool = False) -> None:
    """Enforce: at the commit, SGLang's own abort of a transfer (disaggregation/utils.py prepare_abort:
    finished_reason FINISH_ABORT, status 500); in a batch, finish_with_error."""
    if not at_commit:
        finish_with_error(req, msg)
        return
    try:
        from sglang.srt.disaggregation.utils import prepare_abort

        prepare_abort(req, msg, status_code=500)
    except ImportError:  # a stand-in Req where schedule_batch does not import (the tests' CPU venvs)
        req.finished_reason = SimpleNamespace(message=msg, status_code=500, err_type="KVIntegrityError")


def fail_closed(reqs: list[Any], why: str, exc: BaseException | None = None, at_commit: bool = False) -> None:
    """The ledger is missing or its check raised: enforce refuses each request, observe alarms;
    the reason is logged once. Never raises."""
    try:
        say_once(why.split(" (")[0].split(":")[0], f"guard fails closed: {why}", exc)  # once per reason
        rt, cfg = hooks.runtime(), hooks._cfg
        mode = rt.guard if rt is not None else (cfg.guard if cfg is not None else "observe")
        if mode == "off":
            return
        for req in reqs:
            room, rid = _req_ids(req)
            if rt is not None:
                try:
                    rt._alert(Violation(room, rid, 0, [], "guard_error"))
                except Exception as err:  # noqa: BLE001 (the alert file cannot be written)
                    say_once("alert", "cannot write the guard's alert", err)
            if mode == "enforce":
                refuse(req, refusal(Violation(room, rid, 0, [], "guard_error")) + f" ({why})", at_commit)
    except Exception as err:  # noqa: BLE001
        say_once("fail_closed", "the fail-closed path raised", err)


def finish_with_error(req: Any, msg: str) -> None:
    """Enforce: the request ends with an error; SGLang's check_finished() turns to_finish into the
    finish reason before the batch's output is streamed (managers/schedule_batch.py Req.check_finished)."""
    try:
        from sglang.srt.managers.schedule_batch import FINISH_ABORT

        req.to_finish = FINISH_ABORT(msg, 500, "KVIntegrityError")
    except Exception:  # noqa: BLE001 (a stand-in Req in the tests, or a release whose FINISH_ABORT differs)
        req.to_finish = ("abort", msg)


def h_run_batch(original: Callable[..., Any], self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
    """Before the forward pass: each request's attended slots (its req_to_token row up to seq_lens,
    less the slots this batch writes) and the slots it writes. Only the row positions the runtime has
    not yet checked are read (Runtime.unchecked): in steady decode that is none, and the step costs
    the ledger's update of out_cache_loc alone, for the whole batch at once. A missing ledger or an
    error in the check fails closed (fail_closed); nothing the guard raises reaches the scheduler loop."""
    try:
        _guard_batch(self, batch)
    except Exception as err:  # noqa: BLE001
        reqs = getattr(batch, "reqs", None) or []
        fail_closed(list(reqs), f"the guard's check raised {type(err).__name__}: {err}", err)
    return original(self, batch, *args, **kwargs)


def _guard_batch(self: Any, batch: Any) -> None:
    rt = hooks.runtime()
    reqs = getattr(batch, "reqs", None) if batch is not None else None
    mode = getattr(batch, "forward_mode", None) if reqs else None
    decode = bool(mode.is_decode()) if mode is not None and hasattr(mode, "is_decode") else False
    if rt is None and reqs and decode and hooks._cfg is not None:
        fail_closed(list(reqs), f"no ledger ({hooks._broken[0] if hooks._broken else 'never made'})")
    if rt is not None and reqs:
        # the host copy where the release keeps one (no device sync for the lengths)
        lens = getattr(batch, "seq_lens_cpu", None)
        seq = _np(batch.seq_lens if lens is None else lens)
        out = _np(getattr(batch, "out_cache_loc", None))
        one = decode and out.size == len(reqs)  # a decode step: one new slot per request
        rt2t = self.req_to_token_pool.req_to_token
        rooms: list[int] = [getattr(r, "bootstrap_room", None) for r in reqs]  # type: ignore[misc]
        if None in rooms:  # a request without a transfer room (a prefill node's own, or no disaggregation)
            rooms = [-1 if x is None else x for x in rooms]
        kv = not hasattr(reqs[0], "req_pool_idx")  # 0.5.23 keeps the row on Req.kv (hooks.row_of)
        rows = np.fromiter((r.kv.req_pool_idx for r in reqs) if kv else (r.req_pool_idx for r in reqs), np.int64,
                           len(reqs))  # fmt: skip
        pre = getattr(
            batch, "prefix_lens", None
        )  # an extend batch's (ScheduleBatch.prefix_lens; Req.prefix_len: 0.5.23)
        if one:
            end = seq - 1
        elif pre is not None and len(pre) == len(reqs):
            end = _np(pre)
        else:
            end = np.array([int(getattr(r, "prefix_len", 0) or 0) for r in reqs], np.int64)
        lo = rt.unchecked(rows, np.asarray(rooms, np.int64), end)
        # positions not yet checked: a request's first batch, or its slots written by another since
        atts = {k: (str(getattr(reqs[k], "rid", "")), _np(rt2t[int(rows[k]), int(lo[k]) : int(end[k])]))
                for k in np.flatnonzero(lo < end).tolist()}  # fmt: skip
        out_n = None
        if not one:
            outs = [_np(rt2t[int(w), int(e) : int(n)]) if e < n else _EMPTY
                    for w, e, n in zip(rows, end.tolist(), seq.tolist(), strict=True)]  # fmt: skip
            out_n = np.array([o.size for o in outs], np.int64)
            out = np.concatenate(outs)
        rid_of = lambda k: str(getattr(reqs[k], "rid", ""))  # noqa: E731
        for k, v in rt.on_batch(decode, rooms, seq, atts, out, out_n, rid_of, rows):
            if rt.guard == "enforce":
                finish_with_error(reqs[k], refusal(v))
