"""Two transfers into the same slots of one receiver: their order is only what the clock bounds prove.

Hand-made cases on decode-0's true clock; prefill-0's clock runs 0.200 s behind, prefill-1's 0.050 s
ahead. Two calibration requests bound prefill-0 -> decode-0 to (190, 210) ms and prefill-1 -> decode-0
to (-60, -40) ms. Room S=3 allocates [16,48) on decode-0 and aborts; room R=4 gets the same slots; S's
late transfer and R's own both land in [16,46) before R reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.analysis import Findings
from tests.support.bundlekit import Node, engine_log, gw, write_jsonl, write_pages

S, R = 3, 4


class Cluster:
    """Events per node in time order (each node's own clock), written with seq counting up."""

    def __init__(self) -> None:
        self.events: dict[str, list[tuple]] = {"prefill-0": [], "prefill-1": [], "decode-0": []}
        self.pslot = 512

    def ev(self, node: str, t: float, op: str, room: int, a: int, b: int, **kw) -> None:
        self.events[node].append((t, len(self.events[node]), op, room, a, b, kw))

    def prefill(self, node: str, room: int, t: float, dest: tuple[int, int]) -> None:
        """Prefill computes the room's KV and sends it at t (its own clock)."""
        a = self.pslot
        self.pslot += 64
        self.ev(node, t - 0.015, "alloc", room, a, a + 48)
        self.ev(node, t - 0.010, "write", room, a, a + dest[1] - dest[0], src="prefill")
        self.ev(node, t, "transfer", room, dest[0], dest[1], peer="decode-0")
        self.ev(node, t + 0.002, "free", room, a, a + 48)

    def nodes(self) -> list[Node]:
        out = []
        for name, evs in self.events.items():
            n = Node(name, 100 if name.startswith("prefill") else 1)
            for t, _, op, room, a, b, kw in sorted(evs):
                n.ev(op, room, a, b, t=t, **kw)
            out.append(n)
        return out


def _case(tmp_path: Path, r_sender: str, r_sent: float, s_sent: float, read_at: float, extra: bool = False) -> Findings:
    c = Cluster()
    # calibration: prefill-0 -> decode-0 in (0.190, 0.210), prefill-1 -> decode-0 in (-0.060, -0.040)
    c.ev("decode-0", 0.500, "alloc", 91, 800, 816)
    c.prefill("prefill-0", 91, 0.310, (800, 810))
    c.ev("decode-0", 0.520, "read", 91, 800, 810)
    c.ev("decode-0", 0.600, "free", 91, 800, 816)
    c.ev("decode-0", 0.700, "alloc", 92, 832, 848)
    c.prefill("prefill-1", 92, 0.760, (832, 842))
    c.ev("decode-0", 0.720, "read", 92, 832, 842)
    c.ev("decode-0", 0.800, "free", 92, 832, 848)
    # S aborts: decode frees its slots at once and hands them to R
    c.ev("decode-0", 1.000, "alloc", S, 16, 48)
    c.ev("decode-0", 1.010, "free", S, 16, 48)
    c.ev("decode-0", 1.020, "alloc", R, 16, 48)
    s_sender = "prefill-1" if r_sender == "prefill-0" else "prefill-0"
    c.prefill(s_sender, S, s_sent, (16, 46))
    c.prefill(r_sender, R, r_sent, (16, 46))
    if extra:  # an unrelated request whose alloc separates the two landing points
        c.ev("decode-0", 1.050, "alloc", 50, 1200, 1216)
        c.ev("decode-0", 1.150, "free", 50, 1200, 1216)
    c.ev("decode-0", read_at, "read", R, 16, 46)
    c.ev("decode-0", 1.200, "free", R, 16, 48)
    b = tmp_path / "bundle"
    gateway = [
        gw("A91", 91, "acct-cal"),
        gw("A92", 92, "acct-cal", prefill="prefill-1"),
        gw("S", S, "acct-s", status=499, prefill=s_sender),
        gw("R", R, "acct-r", prefill=r_sender),
    ]
    if extra:
        gateway.append(gw("U", 50, "acct-u", status=400))
    write_jsonl(b / "gateway" / "gw.jsonl", gateway)
    for node, role, pool in (
        ("prefill-0", "prefill", 4096),
        ("prefill-1", "prefill", 4096),
        ("decode-0", "decode", 2048),
    ):
        engine_log(b, node, role, pool)
    write_pages(b, *c.nodes())
    return Findings(b)


def _bounds(f: Findings) -> dict[str, tuple[int, int]]:
    rows = f.rows("SELECT sender, lo_us, hi_us FROM clock_bounds WHERE receiver = 'decode-0' AND consistent")
    return {s: (lo, hi) for s, lo, hi in rows}


def test_calibration_gives_the_stated_bounds(tmp_path: Path) -> None:
    f = _case(tmp_path, "prefill-0", 0.855, 1.080, 1.070)
    assert _bounds(f) == {"prefill-0": (190_000, 210_000), "prefill-1": (-60_000, -40_000)}


def test_a_proven_order_puts_the_own_transfer_last(tmp_path: Path) -> None:
    """S lands in 1.020-1.040, R in 1.045-1.065: S surely first, R read its own data. The senders' own
    stamps (S 1.080 on prefill-1, R 0.855 on prefill-0) say the opposite and must not decide."""
    f = _case(tmp_path, "prefill-0", 0.855, 1.080, 1.070)
    assert "R" not in f.affected()
    assert f.exposures() == set()
    assert f.rows("SELECT count(*) FROM transfer_conflicts") == [(0,)]


@pytest.mark.parametrize(
    ("name", "s_sent", "read_at", "extra"),
    [
        ("b", 0.852, 1.070, False),  # S 1.042-1.062 overlaps R 1.040-1.060; the timeline puts S last
        ("c", 0.862, 1.100, True),  # S 1.052-1.072 lands after another event: a later landing point, still unsettled
        ("d", 0.844, 1.070, False),  # S 1.034-1.054 starts first, yet may land last: the timeline puts R last
    ],
)
def test_an_unsettled_order_makes_the_reader_indeterminate(
    tmp_path: Path, name: str, s_sent: float, read_at: float, extra: bool
) -> None:
    f = _case(tmp_path, "prefill-1", 1.100, s_sent, read_at, extra)
    got = f.affected()
    assert got["R"][:3] == ("indeterminate", "pages", "foreign_write"), name
    assert got["R"][3] == 30
    assert f.exposures() == {("R", "S", "decode-0", "foreign_write", 30, "indeterminate")}
    reason = f.rows("SELECT reason FROM affected_responses WHERE request_id = 'R'")[0][0]
    assert (
        "prefill-0 (room 3) and prefill-1 (room 4)" in reason or "prefill-1 (room 4) and prefill-0 (room 3)" in reason
    )
    assert "cannot settle" in reason and "[16,46)" in reason
    assert "seq gap" not in reason  # no events were lost: the order alone is unknown
    assert f.rows("SELECT count(*) FROM transfer_conflicts") == [(1,)]


def test_the_stored_rank_follows_the_landing_windows(tmp_path: Path) -> None:
    """Case a: both transfers land at the same point of decode-0's order; S's window comes first."""
    f = _case(tmp_path, "prefill-0", 0.855, 1.080, 1.070)
    rows = f.rows(
        "SELECT room, pos, sub FROM timeline WHERE node = 'decode-0' AND room IN (3, 4) AND pos % 2 = 1 ORDER BY k"
    )
    assert [r[0] for r in rows] == [S, R]
    assert rows[0][1] == rows[1][1]
