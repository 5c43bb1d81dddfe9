"""The allocator model's walk (forensics.ownership.kernels.allocator.walk, compiled, its helpers inlined and
a page's state in one row) against the walk written plainly: the same layer model in Python, a page's
layers, holder and attending room in arrays of their own, a step per page. On random lifecycles (small
pools, so that pages are reused and their layers overflow; late landings of aborted rooms, placeholders,
pages the evidence names, every policy) the two give the same pairs in the same order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.ownership.kernels import allocator as alloc
from forensics.ownership.kernels.freelist import allocate, give_back, merge_if_short, new_state, take

DEPTH = alloc.DEPTH


def plain_walk(
    n_pages: int, ps: int, pol: int, window: int, ev_kind: np.ndarray, ev_room: np.ndarray, n_in: np.ndarray,
    n_read: np.ndarray, n_xfer: np.ndarray, n_out: np.ndarray, watch: np.ndarray, a_ptr: np.ndarray,
    a_pages: np.ndarray, x_ptr: np.ndarray, x_start: np.ndarray, x_end: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """The walk's rule, one step at a time (its docstring: forensics.ownership.kernels.allocator.walk)."""
    link, bits, tier, released, state = new_state(n_pages)
    out_pages = (n_out + ps - 1) // ps
    held: list[list[int]] = [[] for _ in n_in]
    got_in = [0] * len(n_in)
    holder = [-1] * (n_pages + 1)
    attend = [-1] * (n_pages + 1)
    layers: list[list[tuple[int, int]]] = [[] for _ in range(n_pages + 1)]  # (writer, fill), bottom first
    scratch = np.zeros(2 * n_pages + 2 * window + 2, dtype=np.int32)
    pairs: list[tuple[int, int]] = []

    def emit(r: int, s: int) -> None:
        if not pairs or pairs[-1] != (r, s):
            pairs.append((r, s))

    def write(p: int, fill: int, i: int) -> None:
        if attend[p] >= 0 and attend[p] != i:
            emit(attend[p], i)
        kept = layers[p]
        while kept and kept[-1][1] <= fill:  # the layers it covers are hidden
            kept.pop()
        if len(kept) == DEPTH:
            kept.pop(0)
        kept.append((i, fill))

    def read(p: int, extent: int, i: int) -> None:
        seen = 0
        for w, fill in reversed(layers[p]):
            if seen >= extent:
                break
            if w != i:
                emit(i, w)
            seen = fill

    def grab(n: int) -> list[int]:
        got = np.zeros(max(n, 1), dtype=np.int32)
        k = allocate(pol, link, bits, tier, released, state, n, got, np.int64(0))
        return [int(p) for p in got[:k]]

    for kind, i in zip(ev_kind.tolist(), ev_room.tolist(), strict=True):
        if kind == alloc.LC_ALLOC_IN:
            merge_if_short(pol, link, bits, tier, released, state, int(n_in[i] if ps == 1 else n_read[i] // ps + 2))
            named = [int(p) for p in a_pages[a_ptr[i] : a_ptr[i + 1]]]
            for p in named:
                q = holder[p]
                if q >= 0 and q != i and attend[p] == q:
                    attend[p] = -1
                take(pol, link, bits, tier, state, p)
            got = named + grab(int(n_in[i]) - len(named))
            held[i] = sorted(got) if named else got
            for p in held[i]:
                holder[p] = i
            got_in[i] = len(held[i])
        elif kind == alloc.LC_LAND:
            if x_ptr[i + 1] > x_ptr[i]:
                for j in range(x_ptr[i], x_ptr[i + 1]):
                    for p in range(x_start[j] // ps, (x_end[j] - 1) // ps + 1):
                        write(p, int(min(x_end[j], p * ps + ps) - p * ps), i)
            else:
                for j in range(min(got_in[i], (n_xfer[i] + ps - 1) // ps)):
                    write(held[i][j], int(min(ps, n_xfer[i] - j * ps)), i)
        elif kind == alloc.LC_READ:
            if watch[i]:
                for j in range(min(got_in[i], (n_read[i] + ps - 1) // ps)):
                    p = held[i][j]
                    read(p, int(min(ps, n_read[i] - j * ps)), i)
                    attend[p] = i
            out = grab(int(out_pages[i]))
            held[i] = held[i][: got_in[i]] + out
            for p in out:
                holder[p] = i
        else:
            mine = held[i][: got_in[i]]
            if kind == alloc.LC_END:
                for j, p in enumerate(held[i][got_in[i] :]):
                    if holder[p] == i:
                        write(p, int(min(ps, n_out[i] - j * ps)), i)
                mine = held[i]
            freed = []
            for p in mine:
                if holder[p] == i:
                    holder[p] = -1
                    if attend[p] == i:
                        attend[p] = -1
                    freed.append(p)
            if freed:
                give_back(pol, window, link, bits, tier, released, state, np.array(freed, dtype=np.int32), scratch)
    return np.array(pairs, dtype=np.int32).reshape(-1, 2)


@st.composite
def lifecycles(draw: st.DrawFn) -> tuple[object, ...]:
    """A node's rooms and their events in an order the walk accepts (a room's own events in its order)."""
    ps = draw(st.sampled_from([1, 4, 16]))
    n_pages = draw(st.integers(4, 24))
    pol = draw(st.sampled_from([alloc.FIFO, alloc.LIFO, alloc.SORTED, alloc.DEFERRED]))
    window = draw(st.sampled_from([0, 2])) if pol in (alloc.LIFO, alloc.DEFERRED) else 0
    n = draw(st.integers(1, 14))
    n_read = np.array(draw(st.lists(st.integers(1, 6 * ps), min_size=n, max_size=n)), dtype=np.int64)
    placeholder = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    n_xfer = np.where(placeholder, 1, n_read).astype(np.int64)
    n_out = np.array(draw(st.lists(st.integers(0, 3 * ps), min_size=n, max_size=n)), dtype=np.int64)
    aborted = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    # a room's events, in its own order; the rooms' events interleaved at random (a late landing: an
    # aborted room's transfer after its free)
    own = [
        [alloc.LC_ALLOC_IN, *draw(st.permutations([alloc.LC_FREE, alloc.LC_LAND]))]
        if aborted[i]
        else [alloc.LC_ALLOC_IN, alloc.LC_LAND, alloc.LC_READ, alloc.LC_END]
        for i in range(n)
    ]
    slots = [i for i in range(n) for _ in own[i]]
    order = draw(st.permutations(slots))
    at = [0] * n
    kind, room = [], []
    for i in order:
        kind.append(own[i][at[i]])
        room.append(i)
        at[i] += 1
    # pages the evidence names (the prefill's transfer events) for some rooms, and the slots they wrote
    named = [
        sorted(draw(st.sets(st.integers(1, n_pages), max_size=min(2, -(-int(n_read[i]) // ps)))))
        if draw(st.booleans())
        else []
        for i in range(n)
    ]
    a_ptr = np.concatenate(([0], np.cumsum([len(a) for a in named]))).astype(np.int64)
    a_pages = np.array([p for a in named for p in a], dtype=np.int32)
    x_ptr = np.concatenate(([0], np.cumsum([len(a) for a in named]))).astype(np.int64)
    x_start = np.array([p * ps for a in named for p in a], dtype=np.int64)
    x_end = np.array([p * ps + draw(st.integers(1, ps)) for a in named for p in a], dtype=np.int64)
    return (
        n_pages, ps, pol, window, np.array(kind, dtype=np.int8), np.array(room, dtype=np.int32),
        -(-n_read // ps), n_read, n_xfer, n_out, ~aborted, a_ptr, a_pages, x_ptr, x_start, x_end,
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(lifecycles())
def test_the_walk_gives_the_plain_walks_pairs(args: tuple[object, ...]) -> None:
    want = plain_walk(*args)  # type: ignore[arg-type]
    got = alloc.walk(*args)
    assert got.tolist() == want.tolist()


def test_overflowing_layers_and_reused_pages() -> None:
    """Placeholders on a pool of 6 pages, every room after the one before: its pages held every room's
    KV in turn, more layers than DEPTH on some, and both walks name the same sources."""
    rng = np.random.default_rng(7)
    ps, n_pages, n = 4, 6, 40
    n_read = rng.integers(1, 24, n).astype(np.int64)
    n_xfer = np.where(rng.random(n) < 0.5, 1, rng.integers(1, 5, n)).astype(np.int64)
    kind = np.tile(np.array([alloc.LC_ALLOC_IN, alloc.LC_LAND, alloc.LC_READ, alloc.LC_END], dtype=np.int8), n)
    room = np.repeat(np.arange(n, dtype=np.int32), 4)
    none = np.zeros(n + 1, dtype=np.int64)
    args = (
        n_pages, ps, alloc.DEFERRED, 0, kind, room, -(-n_read // ps), n_read, n_xfer,
        rng.integers(0, 9, n).astype(np.int64), np.ones(n, dtype=np.bool_), none, np.zeros(0, np.int32), none,
        np.zeros(0, np.int64), np.zeros(0, np.int64),
    )  # fmt: skip
    want = plain_walk(*args)
    assert len({s for _, s in want.tolist()}) > DEPTH
    assert alloc.walk(*args).tolist() == want.tolist()
