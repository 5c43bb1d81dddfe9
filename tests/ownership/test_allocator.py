"""The allocator model (forensics.ownership.kernels.allocator): each real rule hands out the pages the
port of SGLang's allocators (forensics.engines.sglang_allocator, itself checked against SGLang's own
classes) hands out, in the same order, for every registry rule; the policy selection picks the pool's
real policy; and the walk finds who held a placeholder's pages."""

from __future__ import annotations

import random

import numpy as np
import pytest

from forensics.engines import sglang_allocator as sa
from forensics.findings.allocator_policy import POLICIES, REAL
from forensics.ownership.kernels import allocator as alloc

KERNEL = {"fifo": alloc.FIFO, "lifo": alloc.LIFO, "deferred": alloc.DEFERRED}


def _history(release: str, ps: int, pd_mode: str, seed: int, n_pages: int = 256, steps: int = 600):
    """Random requests on the port's allocator: each takes its pages as SGLang's decode pre-allocation
    does (alloc on page size 1, alloc_extend of its tokens above) and frees its KV row whole.
    Returns (ops, CSR of pages in the order handed out or freed, per allocation the free pages a
    DEFERRED allocation wants before it merges)."""
    rng = random.Random(seed)
    a = sa.Allocator.for_rule(release, n_pages * ps, ps, pd_mode)
    held: list[list[int]] = []
    ops, pages, want = [], [], []
    for _ in range(steps):
        if held and (rng.random() < 0.45 or a.available_size() < 40 * ps):
            got = held.pop(rng.randrange(len(held)))
            a.free_pages_of(got)
            ops.append(1)
            pages.append(got)
            want.append(0)
        else:
            tokens = rng.randint(1, 30 * ps)
            n = -(-tokens // ps)
            if ps == 1:
                slots = a.alloc(tokens)
                got = slots
                w = n
            else:
                slots = a.alloc_extend([0], [tokens], [-1], tokens)
                got = None if slots is None else [s // ps for s in slots[::ps]]
                w = tokens // ps + 2
            if got is None:
                continue
            held.append(got)
            ops.append(0)
            pages.append(got)
            want.append(w)
    ptr = np.zeros(len(pages) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(p) for p in pages])
    flat = np.array([p for b in pages for p in b], dtype=np.int32)
    return np.array(ops, dtype=np.int8), ptr, flat, np.array(want, dtype=np.int64)


RULES = sorted({(r, ps, m) for (r, ps, m) in sa.registry()} | {(r, 64, m) for r in sa.RELEASES for m in sa.PD_MODES})


@pytest.mark.parametrize(("release", "ps", "pd_mode"), RULES)
def test_the_kernel_hands_out_the_ports_pages_in_its_order(release: str, ps: int, pd_mode: str) -> None:
    rule = sa.rule(release, ps, pd_mode)
    n_pages = 256
    for seed in (1, 2):
        op, ptr, pages, want = _history(release, ps, pd_mode, seed, n_pages)
        assert (op == 1).sum() > 50, "the history must reuse pages for the check to mean something"
        got = alloc.hand_out(n_pages, KERNEL[rule.policy], 0, op, ptr, pages, want)
        assert np.array_equal(got, pages), (rule, seed)


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_policy_that_states_the_pool_predicts_every_page(name: str, seed: int) -> None:
    """policy_accuracy on a history of the port's allocator: the candidate named by its rule names every
    page right (DEFERRED with its page size's merge slack), and the others do worse."""
    release, ps, pd_mode = {"fifo": ("0.5.4", 1, "null"), "lifo": ("0.5.4", 16, "null")}.get(
        name, ("0.5.4", 16, "decode")
    )
    assert sa.rule(release, ps, pd_mode).name == name
    n_pages = 256
    op, ptr, pages, _ = _history(release, ps, pd_mode, seed, n_pages)
    scores = {}
    for cand, (pol, window) in POLICIES.items():
        if pol == alloc.DEFERRED:
            window = sa.merge_slack(ps)
        hit, total = alloc.policy_accuracy(n_pages, pol, window, op, ptr, pages, *alloc.new_state(n_pages))
        scores[cand] = hit / total
    assert scores[name] == max(scores.values()), scores
    # the selection (forensics.findings.likelihood) takes the first best score, real rules first
    assert max(POLICIES, key=lambda k: scores[k]) == name, scores
    assert min(scores.values()) < 0.9, "the candidates must differ on these histories"


def _walk(events: list[tuple[int, int]], rooms: dict[str, list], ps: int, n_pages: int, pol: int) -> set:
    kind = np.array([k for k, _ in events], dtype=np.int8)
    room = np.array([r for _, r in events], dtype=np.int32)
    n = len(rooms["n_read"])
    a_ptr = np.zeros(n + 1, dtype=np.int64)
    a_ptr[1:] = np.cumsum([len(a) for a in rooms["anchor"]])
    a_pages = np.array([p for a in rooms["anchor"] for p in a], dtype=np.int32)
    none = np.zeros(n + 1, dtype=np.int64)
    n_read = np.array(rooms["n_read"], dtype=np.int64)
    pairs = alloc.walk(
        n_pages, ps, pol, 0, kind, room, -(-n_read // ps), n_read,
        np.array(rooms["n_xfer"], dtype=np.int64), np.array(rooms["n_out"], dtype=np.int64),
        np.array(rooms["watch"], dtype=np.bool_), a_ptr, a_pages, none, np.zeros(0, np.int64), np.zeros(0, np.int64),
    )  # fmt: skip
    return {tuple(p) for p in pairs.tolist()}


@pytest.mark.parametrize("pol", [alloc.FIFO, alloc.LIFO, alloc.SORTED, alloc.DEFERRED])
def test_a_placeholder_attends_what_the_last_holders_of_its_pages_wrote(pol: int) -> None:
    """Rooms 0 and 1 fill pages and leave; room 2, a placeholder (its transfer writes one token), takes
    pages that held both; room 3 arrives after room 2 ended and is not its source."""
    A, L, R, E = alloc.LC_ALLOC_IN, alloc.LC_LAND, alloc.LC_READ, alloc.LC_END
    rooms = {
        "n_read": [64, 64, 128, 64],
        "n_xfer": [64, 64, 1, 64],
        "n_out": [0, 0, 0, 0],
        "watch": [False, False, True, False],
        "anchor": [[], [], [], []],
    }
    events = [(A, 0), (L, 0), (R, 0), (A, 1), (L, 1), (R, 1), (E, 0), (E, 1), (A, 2), (L, 2), (R, 2), (E, 2)]
    events += [(A, 3), (L, 3), (R, 3), (E, 3)]
    # a pool of exactly the pages rooms 0 and 1 used: whatever the reuse order, room 2 gets theirs
    assert _walk(events, rooms, ps=16, n_pages=8, pol=pol) == {(2, 0), (2, 1)}


def test_a_late_transfer_into_pages_a_placeholder_attends_is_found() -> None:
    """Room 0 aborts (its pages go back before its transfer lands); room 1, a placeholder, takes those
    pages and reads; room 0's transfer then lands in them."""
    A, L, R, E, F = alloc.LC_ALLOC_IN, alloc.LC_LAND, alloc.LC_READ, alloc.LC_END, alloc.LC_FREE
    rooms = {
        "n_read": [32, 32],
        "n_xfer": [32, 1],
        "n_out": [0, 0],
        "watch": [False, True],
        "anchor": [[], []],
    }
    events = [(A, 0), (F, 0), (A, 1), (L, 1), (R, 1), (L, 0), (E, 1)]
    assert _walk(events, rooms, ps=16, n_pages=2, pol=alloc.LIFO) == {(1, 0)}


def test_anchored_pages_override_the_policy() -> None:
    """The evidence names room 1's page (the prefill's transfer event): the walk puts it there even where
    the policy would have handed out another page, so room 1 attends room 0's page 3, not page 1."""
    A, L, R, E = alloc.LC_ALLOC_IN, alloc.LC_LAND, alloc.LC_READ, alloc.LC_END
    rooms = {
        "n_read": [16, 32, 16],
        "n_xfer": [16, 1, 16],
        "n_out": [0, 0, 0],
        "watch": [False, True, False],
        "anchor": [[3], [2], [1]],
    }
    # room 0 wrote page 3 and left; room 2 writes page 1 and stays; room 1 holds pages 2 and (policy) 3
    events = [(A, 0), (L, 0), (R, 0), (E, 0), (A, 2), (L, 2), (R, 2), (A, 1), (L, 1), (R, 1), (E, 1), (E, 2)]
    assert _walk(events, rooms, ps=16, n_pages=3, pol=alloc.SORTED) == {(1, 0)}
