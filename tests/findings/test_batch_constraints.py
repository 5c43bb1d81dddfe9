"""The allocator model against the pool occupancy SGLang's Decode batch lines print
(forensics.findings.batch_constraints): the replay's range at each line, the share of lines in it, the
tokens no logged room explains, and the aborted rooms' pre-allocation times a printed count settles; on
a simulated incident the replay agrees with every printed line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from forensics.findings.allocator_walk import Lifecycle
from forensics.findings.batch_constraints import Printed, consistency, pin_aborted_allocs
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings

NAN = np.nan
RES = 0.001


def _lc(rows: list[tuple]) -> Lifecycle:
    """rows: (n_read, n_out, aborted, t_alloc, t_land, t_read, t_end, t_free, unc_alloc)."""
    a = list(zip(*rows, strict=True))
    f = lambda k: np.array(a[k], dtype=float)  # noqa: E731
    n = len(rows)
    return Lifecycle(
        room=np.arange(n, dtype=np.int64),
        n_read=np.array(a[0], dtype=np.int64),
        n_xfer=np.array(a[0], dtype=np.int64),
        n_out=np.array(a[1], dtype=np.int64),
        aborted=np.array(a[2], dtype=bool),
        times={"t_alloc": f(3), "t_land": f(4), "t_read": f(5), "t_end": f(6), "t_free": f(7)},
        unc_alloc=f(8),
        unc_land=np.zeros(n),
        res=np.full(n, RES),
    )


def _printed(t: list[float], tokens: list[int], running: list[int], transfer: list[int]) -> Printed:
    return Printed(np.array(t), np.full(len(t), RES), np.array(tokens), np.array(running), np.array(transfer))


# two finished rooms on page size 16: 40 input tokens (3 pages), 20 output tokens (2 pages)
FINISHED = [
    (40, 20, False, 1.0, 1.5, 1.6, 3.0, NAN, RES / 2),
    (40, 20, False, 2.0, 2.5, 2.6, 4.0, NAN, RES / 2),
]


def test_printed_counts_within_the_replays_range_agree_and_an_excess_is_named() -> None:
    lc = _lc(FINISHED)
    # t=1.2: room 0 pre-allocated, waiting for its transfer; t=2.8: both decoding (room 1 may still be
    # growing its output: 48 to 80 tokens for it); t=3.5: room 1 alone; t=5: nothing
    p = _printed([1.2, 2.8, 3.5, 5.0], [48, 160, 80, 0], [0, 2, 1, 0], [1, 0, 0, 0])
    c = consistency(p, lc, 16)
    assert (c.lines, c.agree, c.above, c.below, c.exact) == (4, 4, 0, 0, 4)
    # SGLang grows the page table while decoding: fewer tokens than the model's count still agree
    c = consistency(_printed([2.8], [112], [2], [0]), lc, 16)
    assert (c.agree, c.exact) == (1, 0)
    # 64 tokens in use no logged room explains: an allocation the logs miss
    c = consistency(_printed([1.2, 5.0], [112, 64], [0, 0], [1, 0]), lc, 16)
    assert (c.agree, c.above, c.excess) == (0, 2, 64)
    assert "allocations the logs miss" in c.text("decode-1")
    # a wrong running count disagrees too; a count the release does not print (-1) is not checked
    assert consistency(_printed([2.8], [160], [1], [-1]), lc, 16).agree == 0
    assert consistency(_printed([2.8], [160], [2], [-1]), lc, 16).agree == 1


def test_a_printed_transfer_count_narrows_an_aborted_rooms_pre_allocation() -> None:
    # an aborted room pre-allocated at 10.0 +- 1.0 s (its prefill's start_time, lines of 1 s) and freed at 12.0
    lc = _lc([*FINISHED, (40, 0, True, 10.0, NAN, NAN, NAN, 12.0, 1.0)])
    got, pinned = pin_aborted_allocs(_printed([9.5, 10.5], [0, 48], [0, 0], [0, 1]), lc, 16)
    assert pinned == 1
    lo = got.times["t_alloc"][2] - got.unc_alloc[2] - RES
    hi = got.times["t_alloc"][2] + got.unc_alloc[2] + RES
    assert 9.5 - 1e-9 <= lo and hi <= 10.5 + 2 * RES + 1e-9
    assert np.array_equal(got.times["t_alloc"][:2], lc.times["t_alloc"][:2])  # the others as they were
    # 0.4.9 prints no #transfer-req: #token decides where no room decodes
    _, pinned = pin_aborted_allocs(_printed([9.5, 10.5], [0, 48], [0, 0], [-1, -1]), lc, 16)
    assert pinned == 1


def test_where_the_estimate_and_the_lines_disagree_the_lines_place_the_pre_allocation() -> None:
    # estimated just before its free (no prefill line to fit the clocks with), but the printed
    # transfer queue holds it from between 8.5 and 9.5 s on
    lc = _lc([(40, 0, True, 11.9, NAN, NAN, NAN, 12.0, 0.05)])
    got, pinned = pin_aborted_allocs(_printed([7.5, 8.5, 9.5, 10.5, 11.5], [0] * 5, [0] * 5, [0, 0, 1, 1, 1]), lc, 16)
    assert pinned == 1
    lo = got.times["t_alloc"][0] - got.unc_alloc[0] - RES
    hi = got.times["t_alloc"][0] + got.unc_alloc[0] + RES
    assert abs(lo - 8.5) < 1e-9 and abs(hi - 9.5 - RES) < 1e-9


def test_a_count_another_uncertain_room_shares_decides_nothing() -> None:
    lc = _lc([(40, 0, True, 10.0, NAN, NAN, NAN, 12.0, 1.0), (40, 0, True, 10.2, NAN, NAN, NAN, 12.5, 1.0)])
    got, pinned = pin_aborted_allocs(_printed([10.5], [48], [0], [1]), lc, 16)
    assert pinned == 0 and got is lc


def test_a_line_showing_a_room_the_logs_miss_settles_nothing() -> None:
    # the count says one room pre-allocated, but 64 more tokens are in use than the replay can hold:
    # the one may be a room without lines
    lc = _lc([*FINISHED, (40, 0, True, 10.0, NAN, NAN, NAN, 12.0, 1.0)])
    _, pinned = pin_aborted_allocs(_printed([10.5], [112], [0], [1]), lc, 16)
    assert pinned == 0


@pytest.mark.slow
def test_on_a_simulated_incident_the_replay_agrees_with_every_printed_line(tmp_path: Path) -> None:
    cfg = build_config(
        "default", seed=72, requests=500, page_size=16, no_telemetry="decode-1", abort_rate=0.15, dark_aborts=True,
        batch_lines="0.5.4",
    )  # fmt: skip
    simulate(tmp_path / "sim", cfg)
    f = Findings(tmp_path / "sim" / "bundle")
    (basis,) = f.rows("SELECT basis FROM allocator_model WHERE node = 'decode-1'")[0]
    assert "Decode batch lines against the replay: 100.0% within its range" in basis, basis
