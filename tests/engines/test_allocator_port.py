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
