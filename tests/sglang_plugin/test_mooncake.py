"""The transfer hooks on SGLang's own Mooncake manager (disaggregation/mooncake/conn.py; it imports on
CPU in 0.5.23: the transfer engine is fetched in MooncakeKVManager.__init__ only). The manager is made
without its __init__ (which starts the Mooncake engine, its zmq sockets and threads) and given the
tables its methods read; the status message to the decode node (zmq) is a stub. SGLang's real
add_transfer_request, CommonKVManager.update_status, conclude_transfer and the decode's abort handler
run, hooked as a server hooks them: each chunk handed to the manager is a transfer row with src "sent"
(the destination pages' slots, the peer by its endpoint); a completed room writes its landed rows and
lands in the receiver's ledger; an abort mid-transfer writes its chunks again with src "failed"
(possibly landed), and again with src "concluded" when the transfer worker concludes the room (0.5.23's
conclude_transfer: nothing of it is in flight after); a chunk the manager drops after the abort, a
Success it refuses after a failure and a dummy rank write none. Not run here: the transfer worker's
RDMA writes (the engine needs RDMA devices)."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.sglang_plugin.conftest import REQUIRED, need_sglang

need_sglang()

PS, ENDPOINT, PORT = 16, "10.0.0.2", 7001


def _import() -> Any:
    from forensics.sglang.cpu import import_sglang

    sg = import_sglang()
    try:
        from sglang.srt.disaggregation.mooncake import conn
    except ImportError as err:
        # scripts/sglang_test_venv.sh installs what 0.5.23's module imports: under make test-sglang it must
        assert not (REQUIRED and sg.sglang.__version__ == "0.5.23"), err
        pytest.skip(f"SGLang {sg.sglang.__version__}'s mooncake/conn.py does not import here ({err})",
                    allow_module_level=True)  # fmt: skip
    return conn


conn = _import()


def manager(sent: list[dict[str, Any]]) -> Any:
    from sglang.srt.disaggregation.utils import DisaggregationMode

    m = object.__new__(conn.MooncakeKVManager)
    m.disaggregation_mode = DisaggregationMode.PREFILL
    m.request_status, m.transfer_infos, m.transfer_queues = {}, {}, [queue.Queue()]
    m.deferred_bootstrap, m.enable_deferred_decode_kv_release = None, False
    m._deferred_ack_targets, m._deferred_ack_poisoned_rooms, m._staging_outstanding = {}, set(), {}
    m.failure_lock, m.failure_records = threading.Lock(), {}
    m.send_kv_status_message = lambda **kw: sent.append(kw)  # the status message to decode (zmq)
    return m


def info(room: int, pages: list[int]) -> Any:
    return conn.TransferInfo(room=room, endpoint=ENDPOINT, dst_port=PORT, mooncake_session_id=f"{ENDPOINT}:17001",
                             dst_kv_indices=np.array(pages, np.int32), dst_aux_index=0, dst_state_indices=[],
                             required_dst_info_num=1, is_dummy=not pages)  # fmt: skip


# the decode node named by its exact endpoint, by its host alone (the port is picked at start), or as the
# one decode node of the pair ("*"): each must name the transfer rows' peer decode-0
@pytest.fixture(params=[f"{ENDPOINT}:{PORT}", ENDPOINT, "*"])
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    from forensics.sglang import config, hooks
    from forensics.sglang.recorder import Recorder
    from forensics.sglang.runtime import Runtime
    from tests.support.sglang_drive import apply_hooks

    apply_hooks()
    pre = Runtime("prefill-0", PS, Recorder(tmp_path, "prefill-0", "jsonl", start=False), "off", role="prefill")
    dec = Runtime("decode-0", PS, None, "observe")
    pre.peers = {"decode-0": dec}
    hooks.configure(config.Config(dir=str(tmp_path), peers={request.param: "decode-0", "10.9.9.9": "decode-1"}))
    hooks.install(pre)
    yield pre, dec
    hooks.install(None)
    hooks.configure(None)  # type: ignore[arg-type]


def open_room(m: Any, room: int, pages: list[int]) -> None:
    KVPoll = conn.KVPoll
    m.update_status(room, KVPoll.Bootstrapping)
    m.transfer_infos[room] = {f"{ENDPOINT}:{PORT}": info(room, pages)}
    m.update_status(room, KVPoll.WaitingForInput)
    m.update_status(room, KVPoll.Transferring)


def test_sends_aborts_and_refused_successes_through_the_real_manager(cluster: Any) -> None:
    from forensics.sglang import sending

    pre, dec = cluster
    KVPoll = conn.KVPoll
    sent: list[dict[str, Any]] = []
    m = manager(sent)
    # room 101: two chunks, then the worker concludes it (conn.py: conclude_transfer after the last chunk)
    open_room(m, 101, [5, 6, 7, 9])
    m.add_transfer_request(101, np.array([1, 2], np.int32), slice(0, 2), False)
    m.add_transfer_request(101, np.array([3, 4], np.int32), slice(2, 4), True, aux_index=0)
    assert m.transfer_queues[0].qsize() == 2  # SGLang queued both chunks for its transfer worker
    m.conclude_transfer(bootstrap_room=101, status=KVPoll.Success, targets=[(ENDPOINT, PORT)])
    # room 102: the decode side aborts after the first chunk (its ABORT message: the room turns Failed)
    open_room(m, 102, [20, 21])
    m.add_transfer_request(102, np.array([8], np.int32), slice(0, 1), False)
    assert m._handle_abort_notification([b"ABORT", b"102"]) and m.request_status[102] == KVPoll.Failed
    m.add_transfer_request(102, np.array([9], np.int32), slice(1, 2), True, aux_index=0)  # dropped by SGLang
    m.conclude_transfer(bootstrap_room=102, status=KVPoll.Success, targets=[(ENDPOINT, PORT)])  # turned Failed
    assert [s["status"] for s in sent] == [KVPoll.Success, KVPoll.Failed]
    # room 103: a dummy rank (no destination pages) concludes at once
    open_room(m, 103, [])
    m.add_transfer_request(103, np.array([1], np.int32), slice(0, 1), True, aux_index=0)
    m.update_status(103, KVPoll.Success)
    assert sending._pending == {} and sending._unconcluded == {}
    pre.rec.close()
    rows = [json.loads(x) for f in pre.rec.files for x in f.read_text().splitlines()]
    assert [(r["op"], r["room"], r["start"], r["end"], r["peer"], r.get("src")) for r in rows] == [
        ("transfer", 101, 5 * PS, 7 * PS, "decode-0", "sent"),  # chunk 1 sent: destination pages 5, 6
        ("transfer", 101, 7 * PS, 8 * PS, "decode-0", "sent"),  # chunk 2 sent: pages 7 and 9
        ("transfer", 101, 9 * PS, 10 * PS, "decode-0", "sent"),
        ("transfer", 101, 5 * PS, 7 * PS, "decode-0", None),  # room 101 concluded: its chunks landed
        ("transfer", 101, 7 * PS, 8 * PS, "decode-0", None),
        ("transfer", 101, 9 * PS, 10 * PS, "decode-0", None),
        ("transfer", 102, 20 * PS, 21 * PS, "decode-0", "sent"),  # room 102's first chunk sent
        ("transfer", 102, 20 * PS, 21 * PS, "decode-0", "failed"),  # the abort: it may still land
        ("transfer", 102, 20 * PS, 21 * PS, "decode-0", "concluded"),  # the worker concluded it: no more writes
    ]
    written = np.flatnonzero(dec.writer[: 12 * PS] == 101)
    assert written.tolist() == [*range(5 * PS, 8 * PS), *range(9 * PS, 10 * PS)]
    assert (dec.writer[20 * PS : 22 * PS] == -1).all()  # room 102's pages: nothing landed that is known


def test_a_room_is_bounded_only_when_no_other_chunk_of_it_is_counted(cluster: Any) -> None:
    """With staging, a chunk may be deferred past the last one and conclude_transfer runs again after it
    (common/conn.py): while the worker counts another chunk of the room (_staging_outstanding, counted at
    dequeue), the failed send is not bounded; the room's next conclusion bounds it."""
    from forensics.sglang import sending

    pre, _ = cluster
    KVPoll = conn.KVPoll
    m = manager([])
    open_room(m, 201, [30])
    m.add_transfer_request(201, np.array([1], np.int32), slice(0, 1), True, aux_index=0)
    m.update_status(201, KVPoll.Failed)  # decode's abort mid-send
    m._staging_outstanding[201] = 2  # the chunk at hand and a deferred one
    m.conclude_transfer(bootstrap_room=201, status=KVPoll.Failed, targets=[(ENDPOINT, PORT)])
    assert 201 in sending._unconcluded
    m._staging_outstanding[201] = 1
    m.conclude_transfer(bootstrap_room=201, status=KVPoll.Failed, targets=[(ENDPOINT, PORT)])
    assert sending._unconcluded == {}
    pre.rec.close()
    rows = [json.loads(x) for f in pre.rec.files for x in f.read_text().splitlines()]
    assert [r.get("src") for r in rows] == ["sent", "failed", "concluded"]


def test_rooms_never_concluded_are_not_kept_forever(cluster: Any, monkeypatch: Any) -> None:
    """A room whose chunks the worker skips after an abort is never concluded: the plugin keeps at most
    UNCONCLUDED_ROOMS of them, dropping the oldest (their sends then stay unbounded)."""
    from forensics.sglang import sending

    monkeypatch.setattr(sending, "UNCONCLUDED_ROOMS", 2)
    m = manager([])
    for room in (301, 302, 303):
        open_room(m, room, [40 + room - 301])
        m.add_transfer_request(room, np.array([1], np.int32), slice(0, 1), False)
        m.update_status(room, conn.KVPoll.Failed)
    assert list(sending._unconcluded) == [302, 303]
    sending._unconcluded.clear()
