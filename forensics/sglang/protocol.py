"""The decode side's hooks on the transfer protocol, and the prefill side's one addition to it
(forensics.sglang.landing says what each delivers; forensics.sglang.targets applies them): the
transferred length prefill writes into the metadata row, the Success commit where the guard first
checks a request, before any forward pass, and the end of an aborted room's transfer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forensics.sglang import hooks
from forensics.sglang.guard import fail_closed, refusal, refuse
from forensics.sglang.hooks import _EMPTY, FAILED, SUCCESS, _np, _req_ids, row_of, say_once
from forensics.sglang.landing import COL_LEN, COL_MARK, COL_ROOM, MARK, room32


def h_send_metadata(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    """Decode's receiver sends prefill the destination pages (CommonKVReceiver.send_metadata; 0.5.11's
    Mooncake receiver has its own): from now on the room's transfer may write the pages _pre_alloc
    staged. Opened before the call: prefill may write as soon as the message arrives."""
    rt = hooks.runtime()
    room = getattr(self, "bootstrap_room", None)
    if rt is not None and room is not None:
        try:
            rt.on_publish(int(room))
        except Exception as err:  # noqa: BLE001 (the room is then not open: its commit is refused)
            say_once("publish", "cannot open a published destination", err)
    return original(self, *args, **kwargs)


def carried_length(metadata_buffers: Any, idx: int, room: int) -> int | None:
    """The prompt tokens prefill computed for `room`, as its plugin wrote them into the metadata row
    (forensics.sglang.landing); None: the row carries no such record for this room."""
    row = getattr(metadata_buffers, "cached_tokens", None)
    if row is None or idx is None or idx < 0:
        return None
    vals = _np(row[idx])
    if vals.size <= COL_MARK or vals[COL_MARK] != MARK or vals[COL_ROOM] != room32(room):
        return None
    return int(vals[COL_LEN])


def h_set_buf(original: Callable[..., Any], self: Any, req: Any, *args: Any, **kwargs: Any) -> Any:
    """Prefill fills the metadata row decode receives with the first output token (disaggregation/
    utils.py MetadataBuffers.set_buf): the plugin adds the prompt tokens this prefill computed (a
    placeholder, whose prompt SGLang replaced by one token, says 1) in the row's spare columns."""
    out = original(self, req, *args, **kwargs)
    try:
        idx, room = req.metadata_buffer_index, getattr(req, "bootstrap_room", None)
        ids = getattr(req, "origin_input_ids", None)
        if room is not None and ids is not None:
            row = self.cached_tokens[idx]
            row[COL_ROOM], row[COL_LEN], row[COL_MARK] = room32(room), len(ids), MARK
    except Exception as err:  # noqa: BLE001 (decode then finds no length and fails closed)
        say_once("set_buf", "cannot write the transferred length into the metadata buffer", err)
    return out


def _fake(req: Any) -> bool:
    return getattr(req, "bootstrap_host", None) == "2.2.2.2"  # disaggregation/utils.py FAKE_BOOTSTRAP_HOST


def h_commit(original: Callable[..., Any], self: Any, decode_req: Any, *args: Any, **kwargs: Any) -> Any:
    """Decode commits a room the receiver polled Success (DecodeTransferQueue._commit_transfer_to_req,
    0.5.11 and 0.5.23): the transfer is over; its length is in the metadata row (read before the call,
    which may clear it). Then the guard's first check, before the request joins a batch: a refusal in
    enforce aborts it there, and SGLang's pop_transferred, finding the FINISH_ABORT after the commit,
    streams the error, releases the KV and counts it (increment_transfer_failed_reqs), as for a
    corrupted transfer; no forward pass runs over it."""
    req = getattr(decode_req, "req", None)
    room = _req_ids(req)[0]
    length: int | None = None
    try:
        length = (
            0
            if _fake(req)
            else carried_length(
                getattr(self, "metadata_buffers", None), getattr(decode_req, "metadata_buffer_index", -1), room
            )
        )
    except Exception as err:  # noqa: BLE001
        say_once("carried", "cannot read the transferred length from the metadata buffer", err)
    out = original(self, decode_req, *args, **kwargs)
    if out is False or req is None or getattr(req, "finished_reason", None) is not None:
        return out  # 0.5.11: the metadata has not arrived (polled again); or SGLang aborted it itself
    try:
        _admit(self, req, room, length)
    except Exception as err:  # noqa: BLE001 (fail closed: never into the scheduler loop)
        fail_closed([req], f"the guard's check raised {type(err).__name__}: {err}", err, at_commit=True)
    return out


def _admit(queue: Any, req: Any, room: int, length: int | None) -> None:
    rt = hooks.runtime()
    if rt is None:
        if hooks._cfg is not None:
            fail_closed([req], f"no ledger ({hooks._broken[0] if hooks._broken else 'never made'})", at_commit=True)
        return
    rt.on_commit(room, length)
    if rt.guard == "off":
        return
    if length is None:
        say_once("length", "a transfer committed without the prefill plugin's transferred length (is "
                 "kv-forensics loaded on the prefill nodes?): its request cannot be proven clean")  # fmt: skip
    row = row_of(req)
    n = len(getattr(req, "origin_input_ids", ()) or ()) + max(0, len(getattr(req, "output_ids", ()) or ()) - 1)
    pool = getattr(getattr(queue, "scheduler", None), "req_to_token_pool", None)
    att = _np(pool.req_to_token[int(row), :n]) if row is not None and pool is not None and n else _EMPTY
    v = rt.admit(room, str(getattr(req, "rid", "")), att)
    if v is not None and rt.guard == "enforce":
        refuse(req, refusal(v), at_commit=True)


def h_prefill_status(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    """Decode receives a prefill rank's status for a room (CommonKVManager.apply_prefill_status, 0.5.23;
    SGLang drops it for a room already cleared, the plugin does not): Success or Failed is sent by
    conclude_transfer once that rank's transfer worker is done with the room, so its chunks are over.
    Counted per rank: the room is over when as many ranks as the room awaits have said so."""
    named = dict(zip(("bootstrap_room", "status", "prefill_rank"), args, strict=False)) | kwargs
    room, status = int(named.get("bootstrap_room", -1)), named.get("status")
    need = getattr(self, "required_prefill_response_num_table", {}).get(room)
    out = original(self, *args, **kwargs)
    rt = hooks.runtime()
    if rt is not None and status in (SUCCESS, FAILED):
        try:
            ranks = _over_ranks.setdefault(room, [int(need or 1), set()])
            ranks[1].add(named.get("prefill_rank"))
            if len(ranks[1]) >= ranks[0]:
                _over_ranks.pop(room, None)
                rt.on_over(room)
        except Exception as err:  # noqa: BLE001 (the room stays open: its pages' next holders are refused)
            say_once("status", "cannot take a prefill status", err)
    return out


_over_ranks: dict[int, list[Any]] = {}  # room -> [prefill ranks awaited, ranks whose terminal status came]


def h_release_safe(original: Callable[..., Any], self: Any, bootstrap_room: int, *args: Any, **kwargs: Any) -> Any:
    """0.5.23's deferred release asks whether every prefill rank acknowledged the abort of a room
    (CommonKVManager.is_abort_release_safe): True means no chunk of it is still in flight."""
    out = original(self, bootstrap_room, *args, **kwargs)
    rt = hooks.runtime()
    if out is True and rt is not None:
        rt.on_over(int(bootstrap_room))
    return out
