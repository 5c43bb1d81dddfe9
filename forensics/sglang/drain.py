"""The sender's end of a room's transfer (forensics.sglang.targets applies it): once the transfer
worker concludes a room, the prefill can write nothing more of it into any decode node's pages.

SGLang 0.5.23 (python/sglang/srt/disaggregation/common/conn.py CommonKVManager.conclude_transfer) is
called by the Mooncake transfer worker (mooncake/conn.py MooncakeKVManager.transfer_worker, and
send_kvcache's own failure path) only after the room's last chunk was written, or once a chunk failed;
a room's chunks all go to one worker queue (add_transfer_request shards by the destination sessions)
and run in order, and a chunk of a room already Failed is skipped before any write (the worker's
status check after its dequeue), so nothing of the room is in flight after the call. With staging a
chunk may be deferred past the last one and the room concluded again after it: while the worker counts
more than the chunk at hand (_staging_outstanding, counted at dequeue), the hook waits for the next.
The hook records, after the call returns, a transfer row with src "concluded" for every chunk of the
room sent and not recorded as landed (those the update_status hook recorded "failed", or left "sent" when the manager
had cleared the room): the bound on the sender's clock of when such a send may have written
(docs/evidence-bundle.md section 4). The sender writes it because it is the node whose writes end
there; the receiver learns it only by a later message, if at all (0.5.23's drain ack exists only with
the deferred release). Investigate orders it against the receiver's reads by the clock bounds of the
pair. 0.5.11 has no conclude_transfer (its worker's final update_status is the one abort paths also
call): its sends stay unbounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forensics.sglang import hooks, sending


def h_conclude(original: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
    out = original(self, *args, **kwargs)
    try:
        room = int(kwargs["bootstrap_room"] if "bootstrap_room" in kwargs else args[0])
        if getattr(self, "_staging_outstanding", {}).get(room, 0) > 1:
            # another chunk of the room is dequeued or deferred (staging: conclude_transfer then runs
            # again after it): the chunks stay unbounded until the room's last conclusion
            return out
        chunks = sending._unconcluded.pop(room, []) + sending._pending.pop(
            room, []
        )  # sent, its room cleared unconcluded
        rt = hooks._current()
        if rt is not None:
            for peer, slots in chunks:
                rt.on_send(room, peer, slots, "concluded")
    except Exception as err:  # noqa: BLE001 (the sends then stay unbounded: their readers indeterminate)
        hooks._fault("conclude_transfer", err)
    return out
