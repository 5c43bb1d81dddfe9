"""The guard in a decode process that has no prefill runtime beside it (#48): it learns what landed
only from what the transfer protocol delivers to decode (its own published destination, the room's
Success commit with the transferred length prefill's plugin puts in the metadata row, prefill's final
status for an aborted room), in a prefill and a decode OS process (tests/support/guard_mp.py). The
truth is the driver's own record of which room's KV each slot holds."""

from __future__ import annotations

import logging

import pytest

from tests.sglang_plugin.conftest import need_sglang

need_sglang()


def _sg() -> object:
    from forensics.sglang.cpu import import_sglang

    return import_sglang()


def _paged_ok() -> bool:
    sg = _sg()
    return sg.sglang.__version__.startswith("0.5.2")  # type: ignore[attr-defined]


# guard_mp drives 0.5.23's status path (CommonKVManager); 0.5.11 handles prefill's status in the decode
# thread's closure, which protocol.StatusTap taps: test_multiproc runs that release end to end, and
# test_a_status_message_read_by_the_decode_thread_ends_the_room_once_every_rank_said_so the tap itself
_STATUS_SKIP = "0.5.11: guard_mp drives 0.5.23's CommonKVManager status path; 0.5.11's tap runs in test_multiproc"


def _status_hook() -> bool:
    try:
        from sglang.srt.disaggregation.common.conn import CommonKVManager  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("forensics.sglang").setLevel(logging.CRITICAL)


@pytest.mark.parametrize("ps", [1, 16])
def test_no_clean_request_refused_and_every_leak_refused(ps: int) -> None:
    """Many requests with placeholders and aborts, the aborted rooms' pages released when prefill's
    final status arrives (0.5.23's deferred release): every leaking request is refused, none other."""
    from tests.support import guard_mp

    if ps > 1 and not _paged_ok():
        pytest.skip("0.5.11's paged allocator runs its Triton kernel only (tests/support/sglang_drive.py)")
    if not _status_hook():
        pytest.skip(_STATUS_SKIP)
    r = guard_mp.run(seed=401 + ps, ps=ps, guard="enforce", requests=160, deferred=True)
    assert len(r["checked"]) > 100 and r["placeholders"] and r["aborted"]
    assert r["leaked"], "the mix must hold leaking placeholders"
    assert r["refused"] == r["leaked"]


def test_placeholders_refused_on_every_release() -> None:
    """No aborts: a placeholder whose unwritten positions hold another room's KV is refused at its
    commit (before any forward pass), every other request passes."""
    from tests.support import guard_mp

    r = guard_mp.run(seed=7, ps=1, guard="enforce", requests=150, deferred=True, abort_rate=0.0, long_rate=0.2)
    assert r["leaked"] and r["leaked"] <= r["placeholders"]
    assert r["refused"] == r["leaked"]


def test_late_chunks_after_an_immediate_release_are_refused() -> None:
    """Aborted rooms freed at once: a page given out while the aborted room's transfer is unfinished
    may take its late chunk after the new holder's own KV: its holder is refused (in_flight), and no
    leaking request passes."""
    from tests.support import guard_mp

    if not _status_hook():
        pytest.skip(_STATUS_SKIP)
    r = guard_mp.run(seed=11, ps=1, guard="enforce", requests=160, deferred=False, abort_rate=0.3, late_rate=1.0)
    assert r["leaked"] and r["leaked"] <= r["refused"]
    assert r["stats"].by_kind.get("in_flight", 0) > 0


def test_the_drain_ack_and_a_stale_metadata_row() -> None:
    """0.5.23's deferred release asks its manager whether prefill acknowledged the abort
    (CommonKVManager.is_abort_release_safe, hooked): True with an ack required ends the room's open
    transfer, True with none required (nothing awaited) does not. A metadata row
    left by an earlier room (another room's record, or none) gives no length: the request is unproven."""
    import numpy as np

    from forensics.sglang import hooks, protocol
    from forensics.sglang.landing import COL_LEN, COL_MARK, COL_ROOM, MARK, room32
    from forensics.sglang.runtime import Runtime
    from tests.support.guard_mp import _manager, _metadata_buffers
    from tests.support.sglang_drive import apply_hooks

    apply_hooks()
    hooks.configure(None)  # type: ignore[arg-type]
    rt = Runtime("decode-0", 1, None, "enforce")
    hooks.install(rt)
    try:
        rt.on_stage(5, 0, np.arange(10, 20))
        assert not rt.land.open_in(np.array([12]), 1)  # staged only: a resume's _pre_alloc sends nothing
        rt.on_publish(5)
        assert rt.land.open_in(np.array([12]), 1)
        m = _manager()
        if m is not None:
            from sglang.srt.disaggregation.common.conn import DeferredAbortAckState

            m._deferred_abort_ack_tracker = {}
            assert m.is_abort_release_safe(5, 1) is False and rt.land.open_in(np.array([12]), 1)
            # no ack required (a receiver that never notified prefill): True, but nothing drained
            assert m.is_abort_release_safe(5, 0) is True and rt.land.open_in(np.array([12]), 1)
            m._deferred_abort_ack_tracker[5] = DeferredAbortAckState(generation=1, prefill_ranks={0})
            assert m.is_abort_release_safe(5, 1) is True and not rt.land.open_in(np.array([12]), 1)
        bufs = _metadata_buffers(4)
        row = bufs.cached_tokens[2]
        row[COL_ROOM], row[COL_LEN], row[COL_MARK] = room32(99), 7, MARK  # room 99's record
        assert protocol.carried_length(bufs, 2, 99) == 7
        assert protocol.carried_length(bufs, 2, 5) is None and protocol.carried_length(bufs, 1, 5) is None
    finally:
        hooks.install(None)


def test_decode_output_into_a_page_a_late_chunk_may_write_is_refused() -> None:
    """A page an aborted room's chunk is still flying to, freed at once, handed out by alloc_decode for a
    running request's next token: the step that writes it is refused (in_flight), since later steps
    attend that slot and no check reads it again (tests/support/sglang_cluster found such leaks
    delivered at page size 16). A page no open transfer reaches passes."""
    import numpy as np

    from forensics.sglang.runtime import Runtime

    rt = Runtime("decode-0", 16, None, "enforce")
    rt.on_stage(5, 0, np.arange(32, 64))  # room 5's destination: pages 2 and 3
    rt.on_publish(5)
    lens = np.array([20, 20])
    flagged = rt.on_batch(True, [7, 8], lens, {}, np.array([80, 40]), None, lambda k: f"r{k}")
    assert [(k, v.kind, v.sources, v.rid) for k, v in flagged] == [(1, "in_flight", [5], "r1")]
    rt.on_over(5)  # prefill's final status: the page can be written no more
    assert rt.on_batch(True, [9], np.array([20]), {}, np.array([41]), None) == []


def test_a_status_message_read_by_the_decode_thread_ends_the_room_once_every_rank_said_so() -> None:
    """0.5.11 handles prefill's status message inside MooncakeKVManager.start_decode_thread's closure
    and drops it for a room decode already cleared (an aborted room): the plugin's tap on that thread's
    socket (protocol.StatusTap) hands each (room, status, rank) message to the guard. A room awaiting two
    prefill ranks (the manager's required_prefill_response_num_table when its destination went out) is
    over at the second rank's status only; other messages (aux data, a status still in progress) end
    nothing and reach the thread unchanged."""
    import numpy as np

    from forensics.sglang import hooks, protocol
    from forensics.sglang.runtime import Runtime

    class Sock:
        def __init__(self, msgs: list[list[bytes]]) -> None:
            self.msgs, self.closed = msgs, False

        def recv_multipart(self) -> list[bytes]:
            return self.msgs.pop(0)

    hooks.configure(None)  # type: ignore[arg-type]
    rt = Runtime("decode-0", 1, None, "enforce")
    hooks.install(rt)
    try:
        rt.on_stage(5, 0, np.arange(10, 20))
        rt.on_publish(5, 2)  # two prefill ranks write room 5
        msgs = [[b"AUX_DATA", b"5", b"\x00\x01"], [b"5", b"3", b"0"], [b"5", b"4", b"0"], [b"5", b"4", b"1"]]
        tap = protocol.StatusTap(Sock([list(m) for m in msgs]))
        assert tap.closed is False  # every other attribute is the socket's
        got = [tap.recv_multipart() for _ in range(3)]
        assert got == msgs[:3] and rt.land.open_in(np.array([12]), 1)  # Transferring, then one rank's Success
        assert tap.recv_multipart() == msgs[3] and not rt.land.open_in(np.array([12]), 1)
    finally:
        hooks.install(None)
