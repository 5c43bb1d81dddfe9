"""The port of SGLang's allocators (forensics.engines.sglang_allocator) replays every trace recorded
from SGLang's own classes (scripts/record_allocator_traces.py) with the same result, call for call:
the slots each allocation hands out (or None) and the available size after every call."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from forensics.engines import sglang_allocator as sa

TRACES = Path(__file__).parents[1] / "data" / "allocator_traces"
FILES = sorted(TRACES.glob("*.json.gz"))


def _expand(runs: list[list[int]]) -> list[int]:
    return [s for first, n in runs for s in range(first, first + n)]


def _load(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _replay(release: str, trace: dict) -> None:
    cfg = trace["config"]
    a = sa.Allocator(cfg["size"], cfg["page_size"], cfg["need_sort"], release)
    states = []
    for i, (op, args, want, avail) in enumerate(trace["ops"]):
        got = None
        if op == "alloc":
            got = a.alloc(args)
        elif op == "alloc_extend":
            got = a.alloc_extend(*args)
        elif op == "alloc_decode":
            got = a.alloc_decode(*args)
        elif op == "free":
            a.free(_expand(args))
        elif op == "free_page_ids":
            a.free_page_ids(_expand(args))
        elif op == "free_group":
            a.free_group_begin()
            for kind, part in args:
                getattr(a, kind)(_expand(part))
            a.free_group_end()
        elif op == "backup_state":
            states.append(a.backup_state())
        elif op == "restore_state":
            a.restore_state(states.pop())
        elif op == "clear":
            a.clear()
            states = []
        else:
            raise AssertionError(f"unknown op {op}")
        expect = None if want is None else _expand(want)
        assert got == expect, f"op {i} {op}{args}: port {got} != SGLang {expect}"
        assert a.available_size() == avail, f"op {i} {op}: available {a.available_size()} != {avail}"


def test_traces_cover_the_releases_and_page_sizes() -> None:
    seen = set()
    for path in FILES:
        data = _load(path)
        for tr in data["traces"]:
            seen.add((data["header"]["sglang"], tr["config"]["page_size"], tr["config"]["need_sort"]))
    for rel in ("0.4.9", "0.5.4", "0.5.23"):
        for ps in (1, 16, 64):
            assert (rel, ps, False) in seen
            if rel != "0.4.9":
                assert (rel, ps, True) in seen
    assert sum(p.stat().st_size for p in FILES) < 600_000  # small enough to commit


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_port_replays_sglang(path: Path) -> None:
    data = _load(path)
    head = data["header"]
    assert head["wheel_sha256"] and head["command"].startswith("python scripts/record_allocator_traces.py")
    for tr in data["traces"]:
        _replay(head["sglang"], tr)


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("page_size", [4, 64])
def test_page_shortcuts_do_what_the_slot_calls_do(page_size: int, need_sort: bool) -> None:
    """alloc_extend_pages and free_pages_of (a fresh request's pages, a request's pages freed: the
    simulator's calls, which skip listing the slots) leave the allocator as alloc_extend and free of every
    slot do, and hand out the same pages, over a seeded random run that fills the pool and merges its frees."""
    import random

    rng = random.Random(page_size * 2 + need_sort)
    short, slots = (sa.Allocator(64 * page_size, page_size, need_sort, "0.5.11") for _ in range(2))
    held: list[list[int]] = []
    for _ in range(600):
        if held and (rng.random() < 0.45 or short.available_size() < 8 * page_size):
            pages = held.pop(rng.randrange(len(held)))
            grouped = rng.random() < 0.2  # inside a free group the slots are kept until its end
            for a in (short, slots):
                if grouped:
                    a.free_group_begin()
            short.free_pages_of(pages)
            slots.free([p * page_size + j for p in pages for j in range(page_size)])
            for a in (short, slots):
                if grouped:
                    a.free_group_end()
        else:
            tokens = rng.randrange(1, 8 * page_size)
            got = short.alloc_extend_pages(tokens)
            want = slots.alloc_extend([0], [tokens], [-1], tokens)
            assert got == (None if want is None else [s // page_size for s in want[::page_size]])
            if got:
                held.append(rng.sample(got, len(got)))  # freed in any order
        assert (tuple(short.free_pages), sorted(short.release_pages)) == (
            tuple(slots.free_pages),
            sorted(slots.release_pages),
        )
