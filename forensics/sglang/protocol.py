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
from forensics.sglang.hooks import _EMPTY, _np, _req_ids, row_of, say_once
from forensics.sglang.landing import COL_LEN, COL_MARK, COL_ROOM, MARK, room32
from forensics.sglang.sending import FAILED, SUCCESS


def h_send_metadata(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    """Decode's receiver sends prefill the destination pages (CommonKVReceiver.send_metadata; 0.5.11's
    Mooncake receiver has its own): from now on the room's transfer may write the pages _pre_alloc
    staged. Opened before the call: prefill may write as soon as the message arrives."""
    rt = hooks.runtime()
    room = getattr(self, "bootstrap_room", None)
    if rt is not None and room is not None:
        try:
            # the prefill ranks the manager awaits (the receiver's _setup_bootstrap_infos filled the table)
            need = getattr(getattr(self, "kv_mgr", None), "required_prefill_response_num_table", {}).get(room)
            rt.on_publish(int(room), None if need is None else int(need))
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
    Counted per rank (Landings.rank_done): the room is over when every rank it awaited has said so."""
    named = dict(zip(("bootstrap_room", "status", "prefill_rank"), args, strict=False)) | kwargs
    out = original(self, *args, **kwargs)
    prefill_status(int(named.get("bootstrap_room", -1)), named.get("status"), named.get("prefill_rank"))
    return out


def prefill_status(room: int, status: Any, rank: Any) -> None:
    """A prefill rank's status message for `room` reached this decode process. Never raises."""
    rt = hooks.runtime()
    if rt is not None and status in (SUCCESS, FAILED):
        try:
            rt.on_prefill_status(room, rank)
        except Exception as err:  # noqa: BLE001 (the room stays open: its pages' next holders are refused)
            say_once("status", "cannot take a prefill status", err)


class StatusTap:
    """Decode's server socket as 0.5.11's decode thread reads it (mooncake/conn.py
    MooncakeKVManager.start_decode_thread: its closure parses prefill's status message, (room, status,
    rank) as sync_status_to_decode_endpoint sends it, inline, and drops it for a room decode already
    cleared: an aborted room, cleared by pop_transferred's failure_exception). The tap hands every
    such message to prefill_status as it is received; every other call goes to the socket itself."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def recv_multipart(self, *args: Any, **kwargs: Any) -> Any:
        msg = self._sock.recv_multipart(*args, **kwargs)
        try:
            if len(msg) == 3 and all(bytes(x).isdigit() for x in msg):  # a status, not aux data or staging
                room, status, rank = (int(bytes(x).decode("ascii")) for x in msg)
                prefill_status(room, status, rank)
        except Exception as err:  # noqa: BLE001 (the room stays open: its pages' next holders are refused)
            say_once("tap", "cannot read a status message", err)
        return msg


def h_decode_thread(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    """The decode thread starts (MooncakeKVManager.start_decode_thread, called by the manager's
    __init__ on a decode node): where the release has no apply_prefill_status (0.5.11), the thread's
    socket is tapped (StatusTap) before it starts, so an aborted room's final status reaches the guard."""
    try:
        sock = getattr(self, "server_socket", None)
        if sock is not None and not hasattr(type(self), "apply_prefill_status") and not isinstance(sock, StatusTap):
            self.server_socket = StatusTap(sock)
    except Exception as err:  # noqa: BLE001 (then an aborted room stays open: its pages' next holders are refused)
        say_once("tap", "cannot tap the decode thread's socket", err)
    return original(self, *args, **kwargs)


def h_release_safe(original: Callable[..., Any], self: Any, bootstrap_room: int, *args: Any, **kwargs: Any) -> Any:
    """0.5.23's deferred release asks whether every prefill rank acknowledged the abort of a room
    (CommonKVManager.is_abort_release_safe(room, required_acks), from DecodeTransferQueue.
    resolve_deferred_releases): True with at least one ack required means no chunk of it is still in
    flight. With none required (a receiver that never notified prefill: _defer_release) it is True
    without any ack, which proves nothing of a destination already published."""
    out = original(self, bootstrap_room, *args, **kwargs)
    need = (list(args) + [kwargs.get("required_acks")])[0]
    rt = hooks.runtime()
    if out is True and rt is not None and (need is None or int(need) >= 1):
        rt.on_over(int(bootstrap_room))
    return out
