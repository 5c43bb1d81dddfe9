"""A transfer is recorded when it is sent (a transfer row with src "sent"), and again with src "failed"
when its room ends Failed (decode's abort mid-send: the chunk's RDMA writes may still land); a landed
transfer keeps its plain row. A send with no landed row may have written its slots at any moment after
its room took them on the receiver: the later readers of those slots are indeterminate, with the
reason, never confirmed and never cleared; a send that landed is an ordinary transfer.

Hand-made cases on decode-0's clock (prefill-0's runs 0.200 s behind): two calibration requests bound
the pair; room S allocates [16,48) on decode-0, its chunk is sent, decode aborts S and frees the slots
at once; room R takes the same slots, its own transfer lands, R reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.analysis import Findings
from tests.support.bundlekit import Node, engine_log, gw, write_jsonl, write_pages

S, R, W = 3, 4, 5


def _case(tmp_path: Path, s_status: str | None, sends_logged: bool = True, placeholder: bool = False,
          concluded: float | None = None, s_sender: str = "prefill-0") -> Findings:  # fmt: skip
    """s_status: how S's send ends on prefill-0: "failed", None (never concluded) or "landed".
    placeholder: room W's transfer fills [16,46) and W reads and frees it before S; R's own transfer
    fills one slot only (a placeholder), so what R reads in [17,46) is W's, unless S's send landed there.
    concluded: when (sender's clock) the sender logs that S's transfer is concluded (src concluded), if
    at all. s_sender: the node that sends S (prefill-1 lands nothing on decode-0: no clock bounds)."""
    ev: dict[str, list[tuple]] = {"prefill-0": [], "prefill-1": [], "decode-0": []}

    def add(node: str, t: float, op: str, room: int, a: int, b: int, **kw: str) -> None:
        ev[node].append((t, len(ev[node]), op, room, a, b, kw))

    def prefill(room: int, t: float, dest: tuple[int, int], end: str | None = "landed", p: str = "prefill-0",
                tc: float | None = None) -> None:  # fmt: skip
        a = 512 + 64 * room
        add(p, t - 0.015, "alloc", room, a, a + 48)
        add(p, t - 0.010, "write", room, a, a + dest[1] - dest[0], src="prefill")
        if sends_logged:
            add(p, t - 0.008, "transfer", room, *dest, peer="decode-0", src="sent")
        if end == "landed":
            add(p, t, "transfer", room, *dest, peer="decode-0")
        elif end == "failed":
            add(p, t, "transfer", room, *dest, peer="decode-0", src="failed")
        if tc is not None:
            add(p, tc, "transfer", room, *dest, peer="decode-0", src="concluded")
        add(p, max(t, tc or t) + 0.002, "free", room, a, a + 48)

    for k, room in enumerate((91, 92)):  # calibration: landed transfers read by their rooms
        d = 800 + 32 * k
        add("decode-0", 0.500 + 0.2 * k, "alloc", room, d, d + 16)
        prefill(room, 0.310 + 0.2 * k, (d, d + 10))
        add("decode-0", 0.520 + 0.2 * k, "read", room, d, d + 10)
        add("decode-0", 0.600 + 0.2 * k, "free", room, d, d + 16)
    if placeholder:
        add("decode-0", 0.900, "alloc", W, 16, 48)
        prefill(W, 0.705, (16, 46))
        add("decode-0", 0.920, "read", W, 16, 46)
        add("decode-0", 0.950, "free", W, 16, 48)
    add("decode-0", 1.000, "alloc", S, 16, 48)
    prefill(S, 0.805, (16, 46), s_status, s_sender, concluded)  # sent at 0.797 (1.0 on decode's clock)
    add("decode-0", 1.010, "free", S, 16, 48)  # the abort: freed at once
    add("decode-0", 1.020, "alloc", R, 16, 48)
    prefill(R, 0.840, (16, 17) if placeholder else (16, 46))
    add("decode-0", 1.070, "read", R, 16, 46)
    add("decode-0", 1.200, "free", R, 16, 48)
    nodes = []
    for name, evs in ((k, v) for k, v in ev.items() if v):
        n = Node(name, 100 if name.startswith("prefill") else 1)
        for t, _, op, room, a, b, kw in sorted(evs):
            n.ev(op, room, a, b, t=t, **kw)
        nodes.append(n)
    b = tmp_path / "bundle"
    gateway = [gw("A91", 91, "acct-cal"), gw("A92", 92, "acct-cal"), gw("S", S, "acct-s", status=499),
               gw("R", R, "acct-r"), gw("W", W, "acct-w")]  # fmt: skip
    write_jsonl(b / "gateway" / "gw.jsonl", gateway)
    engine_log(b, "prefill-0", "prefill", 4096)
    if ev["prefill-1"]:
        engine_log(b, "prefill-1", "prefill", 4096)
    engine_log(b, "decode-0", "decode", 2048)
    write_pages(b, *nodes)
    return Findings(b)


@pytest.mark.parametrize(("status", "why"), [("failed", "ended Failed after it was sent"),
                                             (None, "was sent and never logged as landed")])  # fmt: skip
def test_a_send_that_never_landed_makes_the_later_reader_indeterminate(
    tmp_path: Path, status: str | None, why: str
) -> None:
    f = _case(tmp_path, status)
    got = f.affected()
    assert got["R"][0] == "indeterminate"
    reason = f.rows("SELECT reason FROM affected_responses WHERE request_id = 'R'")[0][0]
    assert f"a transfer from prefill-0 (room {S}) into [16,46) {why}" in reason
    assert f.rows("SELECT count(*) FROM exposures WHERE status = 'confirmed'") == [(0,)]
    # the sends are not landed transfers: only the landed rows are linked
    assert f.rows("SELECT count(*) FROM transfer_links WHERE room = 3") == [(0,)]
    assert {r for (r,) in f.rows("SELECT room FROM room_flags")} == {R}


def test_a_send_that_landed_is_an_ordinary_transfer(tmp_path: Path) -> None:
    """S's chunk landed before its abort was seen: an ordinary late transfer, ordered by the clock bounds
    as before the sends were recorded (the same findings as without the send rows)."""
    with_sends = _case(tmp_path / "a", "landed")
    without = _case(tmp_path / "b", "landed", sends_logged=False)
    q = "SELECT request_id, status, evidence, kinds, exposed_slots FROM affected_responses ORDER BY 1"
    assert with_sends.rows(q) == without.rows(q)
    assert with_sends.exposures() == without.exposures()
    assert with_sends.rows("SELECT count(*) FROM room_flags") == [(0,)]


def test_a_send_that_never_landed_leaves_the_last_proven_writer_unconfirmed(tmp_path: Path) -> None:
    """R reads [16,46) after its one-slot transfer: [17,46) last held W's KV by the evidence, but S's failed
    send into the same slots, sent after S took them and never proven landed, may have overwritten it
    (the multi-process harness's false pair: a confirmed source across a possibly landed send). The pair
    R <- W is indeterminate, none of its slots confirmed; S is R's possible source."""
    f = _case(tmp_path, "failed", placeholder=True)
    assert f.affected()["R"][0] == "indeterminate"
    pairs = f.rows("SELECT source_request_id, status, slots_confirmed FROM exposures WHERE recipient_request_id = 'R'")
    assert pairs and all(status == "indeterminate" and confirmed == 0 for _, status, confirmed in pairs), pairs
    assert "W" in {src for src, _, _ in pairs}
    possible = f.rows("SELECT source_request_id, basis FROM possible_sources WHERE recipient_request_id = 'R'")
    assert any(src == "S" and "ended Failed after it was sent" in basis for src, basis in possible), possible


def test_a_landed_send_leaves_the_placeholders_stale_pair_confirmed(tmp_path: Path) -> None:
    """The same with S's chunk landed (an ordinary late transfer, ordered by the clock bounds): nothing
    unlanded, so the rule above changes nothing and W's stale KV is proven."""
    f = _case(tmp_path, "landed", placeholder=True)
    assert f.rows("SELECT count(*) FROM unlanded_sends") == [(0,)]


# The pair's clock bounds (calibration, W's and R's transfers): receiver clock - sender clock lies in
# (0.195 s, 0.210 s), so a conclusion at c on prefill-0 is before c + 0.210 s on decode-0's clock.
HI = 0.210
R_ALLOC = 1.020  # R takes S's slots on decode-0; R's own transfer lands after, and R reads at 1.070


def _flags(f: Findings) -> set[int]:
    return {r for (r,) in f.rows("SELECT room FROM room_flags")}


@pytest.mark.parametrize("status", ["failed", None])
def test_a_reader_that_took_the_slots_after_the_send_concluded_is_clean(tmp_path: Path, status: str | None) -> None:
    """prefill-0 concluded S at 0.806 (before 1.016 on decode's clock): whatever S's send wrote, it wrote
    before R took the slots at 1.020, and R's own transfer then filled every slot R reads."""
    f = _case(tmp_path, status, concluded=R_ALLOC - HI - 0.004)
    assert f.rows("SELECT bound_ts IS NOT NULL FROM unlanded_sends WHERE room = 3") == [(True,)]
    assert f.rows("SELECT count(*) FROM transfer_links WHERE room = 3") == [(0,)]  # a conclusion lands nothing
    assert "R" not in f.affected()
    assert R not in _flags(f)


def test_a_reader_that_took_the_slots_inside_the_window_stays_indeterminate(tmp_path: Path) -> None:
    """prefill-0 concluded S at 0.830 (before 1.040 on decode's clock, not proven before R's alloc at
    1.020): S's send may have landed after R's own transfer, although R reads at 1.070, after the bound."""
    f = _case(tmp_path, "failed", concluded=R_ALLOC - HI + 0.020)
    (bound,) = f.rows("SELECT epoch_us(bound_ts) FROM unlanded_sends WHERE room = 3")[0]
    (read,) = f.rows("SELECT epoch_us(ts) FROM page_events WHERE room = 4 AND op = 'read' AND node = 'decode-0'")[0]
    assert read > bound  # the read itself is after the bound: the alloc before it decides
    assert f.affected()["R"][0] == "indeterminate"
    assert R in _flags(f)


def test_a_conclusion_on_a_clock_the_bounds_cannot_order_bounds_nothing(tmp_path: Path) -> None:
    """S sent by prefill-1, which landed nothing on decode-0: no clock bounds for the pair, so its
    conclusion, as early as the case above that clears R, orders nothing on decode-0's clock."""
    f = _case(tmp_path, "failed", concluded=R_ALLOC - HI - 0.004, s_sender="prefill-1")
    assert f.rows("SELECT concluded_ts IS NOT NULL, bound_ts IS NULL FROM unlanded_sends WHERE room = 3") == [
        (True, True)
    ]
    assert f.affected()["R"][0] == "indeterminate"
    reason = f.rows("SELECT reason FROM affected_responses WHERE request_id = 'R'")[0][0]
    assert f"a transfer from prefill-1 (room {S}) into [16,46) ended Failed after it was sent" in reason


def test_a_concluded_send_never_clears_stale_slots(tmp_path: Path) -> None:
    """R a placeholder: it took the slots after the bound, but [17,46) were never written by R. What it
    read there is W's, or S's if S's send landed before R took them: R stays affected and never
    confirmed from W, and S stays a possible source."""
    f = _case(tmp_path, "failed", placeholder=True, concluded=R_ALLOC - HI - 0.004)
    assert f.affected()["R"][0] == "indeterminate"
    possible = f.rows("SELECT source_request_id FROM possible_sources WHERE recipient_request_id = 'R'")
    assert ("S",) in possible, possible
