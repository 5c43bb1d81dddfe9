"""The gateway join's assignment as a whole (forensics.ingest.gateway_assign.force), on hand-made graphs:
records (numbers) against the open rooms (numbers) they agree with. A room with a single possible record
is forced, and forcing it takes the record from every other room; a record is never forced from its own
side (it may have reached no engine); a component no matching covers, or a damaged gateway log, forces
nothing."""

from __future__ import annotations

import numpy as np

from forensics.ingest.gateway_assign import force


def _forced(edges: list[tuple[int, int]], complete: bool = True) -> set[tuple[int, int]]:
    rec = np.array([e[0] for e in edges], dtype=np.int64)
    room = np.array([e[1] for e in edges], dtype=np.int64)
    mask = force(rec, room, complete)
    return {e for e, m in zip(edges, mask.tolist(), strict=True) if m}


def test_a_room_with_one_record_is_forced_and_the_forcing_cascades() -> None:
    # room 0 has only record 0; record 0 was room 1's other candidate: room 1 is then record 1's; record 1
    # was room 2's other candidate: room 2 is record 2's. Record 3 (a 503 that reached no engine) stays free.
    edges = [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (3, 2)]
    assert _forced(edges) == {(0, 0), (1, 1)}
    # room 2 keeps records 2 and 3 (which one it is the evidence does not say)
    edges = [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2)]
    assert _forced(edges) == {(0, 0), (1, 1), (2, 2)}


def test_a_record_with_one_room_is_not_forced() -> None:
    # record 0 fits room 0 alone, but room 0 fits records 0 and 1: record 0 may have reached no engine
    assert _forced([(0, 0), (1, 0), (1, 1), (2, 1)]) == set()


def test_two_rooms_and_two_records_that_fit_both_stay_open() -> None:
    assert _forced([(0, 0), (0, 1), (1, 0), (1, 1)]) == set()


def test_a_contradiction_forces_nothing_in_its_component() -> None:
    # rooms 0 and 1 both have only record 0: one room's record is missing from the gateway log (or the
    # tolerances failed), so neither is forced; room 2 and record 1, another component, still are
    assert _forced([(0, 0), (0, 1), (1, 2)]) == {(1, 2)}
    # peeling room 0 leaves room 1 without a record: no matching covers the component
    assert _forced([(0, 0), (0, 1), (1, 2), (2, 2), (3, 3)]) == {(3, 3)}
    # three rooms, two records: no matching covers them
    assert _forced([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]) == set()


def test_a_damaged_gateway_log_forces_nothing() -> None:
    assert _forced([(0, 0), (1, 1)], complete=False) == set()
    assert _forced([]) == set()


def test_the_rule_is_order_free() -> None:
    """The same graph with its records and rooms renumbered forces the same pairs."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 30))
        edges = sorted({(int(rng.integers(0, 12)), int(rng.integers(0, 12))) for _ in range(n)})
        pr, pm = rng.permutation(12), rng.permutation(12)
        renamed = sorted((int(pr[a]), int(pm[b])) for a, b in edges)
        back = {(int(np.flatnonzero(pr == a)[0]), int(np.flatnonzero(pm == b)[0])) for a, b in _forced(renamed)}
        assert back == _forced(edges)
        # and every forced room is one whose only record the forcing leaves it
        for a, b in _forced(edges):
            assert (a, b) in edges


def _covering_matchings(edges: list[tuple[int, int]]) -> list[set[tuple[int, int]]]:
    """Every matching that gives each room one record of its own (brute force, small graphs)."""
    rooms = sorted({b for _, b in edges})
    out: list[set[tuple[int, int]]] = []

    def walk(i: int, used: set[int], chosen: set[tuple[int, int]]) -> None:
        if i == len(rooms):
            out.append(set(chosen))
            return
        for a, b in edges:
            if b == rooms[i] and a not in used:
                walk(i + 1, used | {a}, chosen | {(a, b)})

    walk(0, set(), set())
    return out


def _components(edges: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    groups: list[list[tuple[int, int]]] = []
    for e in edges:
        joined = [g for g in groups if any(f[0] == e[0] or f[1] == e[1] for f in g)]
        groups = [g for g in groups if g not in joined] + [[x for g in joined for x in g] + [e]]
    return groups


def test_a_forced_pair_is_in_every_matching_that_covers_the_rooms() -> None:
    """Soundness against brute force: in a component whose rooms can all be matched (A1 and A2 hold
    there), every forced pair is in each such matching."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        edges = sorted({(int(rng.integers(0, 6)), int(rng.integers(0, 5))) for _ in range(int(rng.integers(1, 10)))})
        forced = _forced(edges)
        for comp in _components(edges):
            matchings = _covering_matchings(comp)
            if matchings:
                assert all(forced & set(comp) <= m for m in matchings), edges
