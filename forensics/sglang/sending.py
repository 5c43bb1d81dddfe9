"""The prefill side's sends (hooks on the transfer manager, as forensics.sglang.hooks' are on the
allocators): a chunk's destination pages recorded as sent when it is handed to the transfer engine, then
as landed (Success) or failed by the room's status; the failed rooms' chunks wait for the worker's
conclusion (forensics.sglang.drain bounds them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from forensics.sglang import config as config_mod
from forensics.sglang import hooks
from forensics.sglang.hooks import _EMPTY, _np

# KVPoll (disaggregation/base/conn.py): plain ints, not an Enum, the same in 0.4.9 .. 0.5.23
FAILED, SUCCESS = 0, 4
_UNCONFIGURED = config_mod.Config(node="")  # a runtime installed without settings (tests): peers unnamed

_pending: dict[int, list[tuple[str, np.ndarray]]] = {}
_unconcluded: dict[int, list[tuple[str, np.ndarray]]] = {}  # room -> chunks recorded failed (drain.py bounds them)
UNCONCLUDED_ROOMS = 4096


def h_add_transfer(original: Callable[..., Any], self: Any, bootstrap_room: int, kv_indices: Any, index_slice: Any,
                   *args: Any, **kwargs: Any) -> Any:  # fmt: skip
    """Prefill send: the chunk's destination pages, per decode session, are recorded as SENT (a
    transfer row with src "sent": from now on the transfer engine may write them) and wait for the
    room's status (recorded before the call: the transfer worker may conclude the room before it
    returns). A room the manager drops unsent (unknown or already Failed: add_transfer_request's own
    check) and a dummy rank's empty destination record nothing."""
    try:
        rt = hooks._current()
        room = int(bootstrap_room)
        status = getattr(self, "request_status", {}).get(room)
        if rt is not None and status is not None and status != FAILED:
            cfg = hooks._cfg if hooks._cfg is not None else _UNCONFIGURED
            for session, info in getattr(self, "transfer_infos", {}).get(room, {}).items():
                dst = getattr(info, "dst_kv_indices", None)
                pages = _np(dst[index_slice]) if dst is not None else _EMPTY
                if pages.size:
                    slots = (pages[:, None] * rt.ps + np.arange(rt.ps)).ravel()
                    peer = cfg.peer(getattr(info, "endpoint", session), getattr(info, "dst_port", ""))
                    _pending.setdefault(room, []).append((peer, slots))
                    rt.on_send(room, peer, slots, "sent")
    except Exception as err:  # noqa: BLE001
        hooks._fault("add_transfer_request", err)
    return original(self, bootstrap_room, kv_indices, index_slice, *args, **kwargs)


def h_update_status(original: Callable[..., Any], self: Any, bootstrap_room: int, status: Any) -> Any:
    """Success on the prefill side: the chunks landed (a transfer row per destination run). Failed (a
    transfer error, or decode's abort: mooncake/conn.py _handle_abort_notification marks the room Failed
    while the transfer worker may be in the middle of a chunk's writes, which still land), or a Success
    the manager refuses because the room already failed (update_status keeps Failed): the chunks sent
    are recorded again with src "failed": possibly landed, at any moment from their send on."""
    out = original(self, bootstrap_room, status)
    try:
        rt = hooks._current()
        room = int(bootstrap_room)
        if rt is not None and status in (SUCCESS, FAILED) and room in _pending:
            chunks = _pending.pop(room)
            table: Any = getattr(self, "request_status", None)
            now = table.get(room, status) if hasattr(table, "get") else status  # absent: the room is cleared
            for peer, slots in chunks:
                if status == SUCCESS and now == SUCCESS:
                    rt.on_transfer(room, peer, slots)
                else:
                    rt.on_send(room, peer, slots, "failed")
            if not (status == SUCCESS and now == SUCCESS) and hasattr(self, "conclude_transfer"):
                # bounded when the worker concludes the room (drain.py); a room it never concludes (its
                # chunks skipped after an abort) is dropped oldest first: its sends then stay unbounded
                _unconcluded.setdefault(room, []).extend(chunks)
                if len(_unconcluded) > UNCONCLUDED_ROOMS:
                    _unconcluded.pop(next(iter(_unconcluded)))
    except Exception as err:  # noqa: BLE001
        hooks._fault("update_status", err)
    return out
