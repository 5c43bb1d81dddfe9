"""forensics.ownership.kernels.envelope against a slot-by-slot painter on random items, ranges and candidates."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.ownership.kernels.envelope import envelope, range_chmax


def paint(open_rows, cands):
    """Brute force: per item and slot, the highest k of the candidates covering it (or -1)."""
    best = {}
    for item, s, e in open_rows:
        for x in range(s, e):
            best[(item, x)] = -1
    for item, s, e, k in cands:
        for x in range(s, e):
            if (item, x) in best:
                best[(item, x)] = max(best[(item, x)], k)
    return best


@pytest.mark.parametrize("seed", range(25))
def test_envelope_matches_painter(seed):
    rng = np.random.default_rng(seed)
    open_rows, cands = [], []
    for item in rng.choice(50, size=int(rng.integers(1, 6)), replace=False):
        edges = np.sort(rng.choice(200, size=2 * int(rng.integers(1, 4)), replace=False))
        pieces = [(int(item), int(a), int(b)) for a, b in edges.reshape(-1, 2)]
        open_rows += pieces
        lo, hi = pieces[0][1], pieces[-1][2]
        for _ in range(int(rng.integers(0, 12))):
            a, b = sorted(rng.choice(np.arange(lo, hi + 1), size=2, replace=False))
            cands.append((int(item), int(a), int(b), int(rng.integers(0, 10**6))))
    rng.shuffle(open_rows)
    o = np.array(open_rows, dtype=np.int64).reshape(-1, 3)
    c = np.array(cands, dtype=np.int64).reshape(-1, 4)
    env = envelope(o[:, 0], o[:, 1], o[:, 2], c[:, 0], c[:, 1], c[:, 2], c[:, 3])
    got = {}
    for item, s, e, k in zip(env.item, env.s, env.e, env.k, strict=True):
        assert s < e
        for x in range(s, e):
            assert (item, x) not in got, "runs overlap"
            got[(int(item), x)] = int(k)
    assert got == paint(open_rows, cands)
    # runs are maximal: neighbours within an item differ in writer or are not adjacent
    for i in range(1, len(env.item)):
        if env.item[i] == env.item[i - 1] and env.s[i] == env.e[i - 1]:
            assert env.k[i] != env.k[i - 1]


def test_range_chmax_small():
    best = range_chmax(6, np.array([0, 2, 1]), np.array([3, 6, 2]), np.array([5, 7, 9]))
    assert best.tolist() == [5, 9, 7, 7, 7, 7]
    assert range_chmax(3, np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([])).tolist() == [-1] * 3


def test_a_slot_beyond_the_key_is_the_users_error_with_advice() -> None:
    from forensics.errors import CapacityError
    from forensics.ownership.kernels.envelope import MAX_SLOT, envelope

    one = np.array([0], dtype=np.int64)
    with pytest.raises(CapacityError, match="--since/--until") as err:
        envelope(one, one, one + MAX_SLOT, one, one, one + 1, one)
    assert err.value.exit_code == 2
