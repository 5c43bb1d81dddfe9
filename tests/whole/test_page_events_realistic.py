"""`forensics simulate --scale --page-events realistic`: its bundles keep the contract (seq, ts,
alloc/free bookkeeping, transfers inside their receiver's holding), reach the concurrency asked for
whatever the size, are fragmented, deterministic, and `investigate` reads them without rejects and finds
their exposures."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from forensics.pipeline import investigate
from forensics.simulate.pages import PageEvents, generate


def _generate(out: Path, **kw: Any) -> dict:
    return generate(out, PageEvents("realistic", **kw))


# small pools, so that a small bundle runs at many rooms in flight per decode node and reuses its pages
SMALL = {"decode_pool": 262_144, "prefill_pool": 40_000, "context_len": 65_536}
EVENTS = 120_000


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[int, Path]:
    out = {}
    for c in (20, 40):
        d = tmp_path_factory.mktemp(f"c{c}")
        _generate(d, events=EVENTS, seed=3, concurrency=c, **SMALL)
        out[c] = d
    return out


def _meta(root: Path) -> dict:
    return json.loads((root / "truth" / "summary.json").read_text())


def _pages(root: Path) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for f in sorted((root / "bundle" / "pages").glob("*.parquet")):
        t = pq.read_table(f)
        cols = {c: t[c].to_numpy(zero_copy_only=False) for c in ("seq", "op", "room", "start", "end", "peer", "src")}
        cols["ts"] = t["ts"].cast("int64").to_numpy()
        assert set(t["node"].unique().to_pylist()) == {f.stem}
        out[f.stem] = cols
    return out


def _gateway(root: Path) -> dict[int, dict]:
    t = pq.read_table(root / "bundle" / "gateway" / "gateway.parquet").to_pylist()
    return {r["bootstrap_room"]: r for r in t}


def _check_node(node: str, ev: dict[str, np.ndarray], pool: int, ps: int) -> None:
    """seq from 1 without a gap, ts monotone; every alloc takes free slots, every free, read and
    write touches slots the room holds; nothing held at the end."""
    seq, ts = ev["seq"], ev["ts"]
    assert (seq == np.arange(1, len(seq) + 1)).all(), node
    assert (np.diff(ts) >= 0).all(), node
    holder = np.full(pool, -1, np.int64)
    op, room, start, end = ev["op"], ev["room"], ev["start"], ev["end"]
    own = op != "transfer"  # a transfer's slots are its receiver's
    assert (start >= 0).all() and (start < end).all(), node
    assert (end[own] <= pool).all() and (end[~own] <= SMALL["decode_pool"]).all(), node
    for i in range(len(op)):
        o, r, s, e = op[i], room[i], start[i], end[i]
        if o == "alloc":
            assert s % ps == 0 and e % ps == 0, (node, i)
            assert (holder[s:e] == -1).all(), f"{node} seq {seq[i]}: slots allocated twice"
            holder[s:e] = r
        elif o == "free":
            assert s % ps == 0 and e % ps == 0, (node, i)
            assert (holder[s:e] == r).all(), f"{node} seq {seq[i]}: free of slots the room does not hold"
            holder[s:e] = -1
        elif o in ("read", "write"):
            assert (holder[s:e] == r).all(), f"{node} seq {seq[i]}: {o} of slots the room does not hold"
        else:
            assert o == "transfer" and node.startswith("prefill"), (node, o)
    assert (holder == -1).all(), f"{node}: slots still held at the end"
    writes = op == "write"
    assert set(ev["src"][writes]) == {node.split("-")[0]}
    assert all(x is None for x in ev["src"][~writes])
    assert all((x is not None) == (o == "transfer") for x, o in zip(ev["peer"], op, strict=True))


def _inflight(ev: dict[str, np.ndarray]) -> float:
    """Mean rooms holding slots on a node over the middle 80% of its events' time span."""
    room, ts = ev["room"], ev["ts"]
    order = np.argsort(room, kind="stable")
    r, t = room[order], ts[order]
    cut = np.flatnonzero(np.diff(r)) + 1
    a = np.minimum.reduceat(t, np.r_[0, cut])
    b = np.maximum.reduceat(t, np.r_[0, cut])
    w0, w1 = ts[0] + 0.1 * (ts[-1] - ts[0]), ts[0] + 0.9 * (ts[-1] - ts[0])
    return float(np.clip(np.minimum(b, w1) - np.maximum(a, w0), 0, None).sum() / (w1 - w0))


def test_bundle_keeps_the_contract(bundles):
    root = bundles[20]
    meta = _meta(root)
    pages = _pages(root)
    dark = meta["dark_node"]
    assert dark == "decode-3" and dark not in pages
    assert sorted(pages) == ["decode-0", "decode-1", "decode-2", "prefill-0", "prefill-1", "prefill-2"]
    for node, ev in pages.items():
        pool = SMALL["prefill_pool"] if node.startswith("prefill") else SMALL["decode_pool"]
        _check_node(node, ev, pool, 32)
        assert len(ev["seq"]) == meta["counts"][node]
    assert sum(meta["counts"].values()) == meta["events"]
    assert abs(meta["events"] - EVENTS) < 0.05 * EVENTS
    for node in ("decode-0", "decode-1", "decode-2", "decode-3", "prefill-0", "prefill-1", "prefill-2"):
        log = (root / "bundle" / "engine" / node / "server.log").read_text()
        assert "context_length=65536" in log and "page_size=32" in log
        assert f"KV Cache is allocated. #tokens: {SMALL['prefill_pool' if 'prefill' in node else 'decode_pool']}" in log
    # the dark node's transfers are logged by the prefill nodes, from several of them
    senders = {n for n, ev in pages.items() if n.startswith("prefill") and (ev["peer"] == dark).any()}
    assert len(senders) == 3
    gw = _gateway(root)
    status = [r["status"] for r in gw.values()]
    assert len(gw) == meta["requests"] and status.count(499) == meta["aborts"] > 20
    assert status.count(503) == meta["status"].get("503", 0) < 0.01 * len(gw)
    assert meta["placeholders"] > 5 and meta["placeholders"] == sum(
        r["prompt_tokens"] >= meta["pools"]["prefill_limit"] for r in gw.values()
    )
    # 503s have no page events; every other request has events on its decode node (unless dark)
    rooms = {n: set(np.unique(ev["room"]).tolist()) for n, ev in pages.items()}
    for room, r in gw.items():
        on_decode = room in rooms.get(r["decode_node"], set())
        assert on_decode == (r["status"] != 503 and r["decode_node"] != dark), r["request_id"]
        assert (room in rooms[r["prefill_node"]]) == (r["status"] != 503), r["request_id"]


def test_transfers_land_inside_their_receivers_holding(bundles):
    root = bundles[20]
    meta = _meta(root)
    skew = meta["clock_skew_us"]
    pages = _pages(root)
    gw = _gateway(root)
    # per (decode node, room): the prompt's pre-allocation (its first alloc events), first read, first free
    hold: dict[tuple[str, int], dict] = {}
    for node, ev in pages.items():
        if not node.startswith("decode"):
            continue
        t_true = ev["ts"] - skew[node]
        for i in range(len(ev["op"])):
            h = hold.setdefault(
                (node, int(ev["room"][i])), {"alloc_t": t_true[i], "ranges": [], "read": None, "free": None}
            )
            o = ev["op"][i]
            if o == "alloc" and t_true[i] == h["alloc_t"]:
                h["ranges"].append((ev["start"][i], ev["end"][i]))
            elif o == "read" and h["read"] is None:
                h["read"] = t_true[i]
            elif o == "free" and h["free"] is None:
                h["free"] = t_true[i]
    checked = late = 0
    for node, ev in pages.items():
        if not node.startswith("prefill"):
            continue
        x = ev["op"] == "transfer"
        for room, peer, s, e, t in zip(
            ev["room"][x], ev["peer"][x], ev["start"][x], ev["end"][x], ev["ts"][x], strict=True
        ):
            assert peer == gw[room]["decode_node"] and node == gw[room]["prefill_node"]
            if peer == meta["dark_node"]:
                continue
            h = hold[(peer, int(room))]
            t = t - skew[node]
            if gw[room]["status"] == 499:  # late: at least 200 ms after decode gave the slots back
                assert h["read"] is None and t - h["free"] >= 200_000
                late += 1
            else:
                assert h["alloc_t"] + 2_000 <= t <= h["read"] - 2_000 and h["read"] - t <= 20_000
                assert any(a <= s and e <= b for a, b in h["ranges"]), (room, s, e)
                checked += 1
    assert checked > 1000 and late > 20


def test_concurrency_is_what_was_asked_whatever_the_size(bundles):
    metas = {c: _meta(d) for c, d in bundles.items()}
    for c, d in bundles.items():
        pages = _pages(d)
        measured = np.mean([_inflight(ev) for n, ev in pages.items() if n.startswith("decode")])
        assert abs(measured - c) < 0.15 * c, (c, measured)
        assert abs(metas[c]["inflight_mean"] - c) < 0.15 * c
        assert max(v["max"] for v in metas[c]["inflight"].values()) > c
    e20, e40 = metas[20]["events"], metas[40]["events"]
    assert abs(e20 - e40) < 0.05 * e20
    # twice the rooms in flight over the same events: the trace is about half as long
    assert 0.35 < metas[40]["trace_seconds"] / metas[20]["trace_seconds"] < 0.75


def test_allocations_are_fragmented(bundles):
    for d in bundles.values():
        meta = _meta(d)
        pages = _pages(d)
        for node, ev in pages.items():
            a = ev["op"] == "alloc"
            groups = len({(r, t) for r, t in zip(ev["room"][a], ev["ts"][a], strict=True)})
            if node.startswith("decode"):
                assert a.sum() / groups > 1.5, node  # one alloc event per run of consecutive pages
        assert meta["ranges_per_alloc"]["decode"] > 1.5


@pytest.mark.parametrize("ps", [1, 64])
def test_page_sizes(tmp_path: Path, ps: int):
    meta = _generate(tmp_path, events=30_000, seed=5, concurrency=20, page_size=ps, **SMALL)
    pages = _pages(tmp_path)
    for node, ev in pages.items():
        pool = SMALL["prefill_pool"] if node.startswith("prefill") else SMALL["decode_pool"]
        _check_node(node, ev, pool, ps)
    assert meta["page_size"] == ps and meta["ranges_per_alloc"]["decode"] > 1
    assert f"page_size={ps}," in (tmp_path / "bundle" / "engine" / "decode-0" / "server.log").read_text()


def test_same_seed_same_bytes(tmp_path: Path):
    for d in ("a", "b"):
        _generate(tmp_path / d, events=20_000, seed=9, concurrency=30, chunk=3_000, **SMALL)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 1 + 1 + 6 + 7  # truth/summary.json, gateway, 6 page files, 7 server logs
    for f in files:
        if f.name == "summary.json":
            a, b = (json.loads((tmp_path / d / f).read_text()) for d in "ab")
            a.pop("seconds"), b.pop("seconds")
            assert a == b
        else:
            assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    other = _generate(tmp_path / "c", events=20_000, seed=10, concurrency=30, **SMALL)
    assert other["counts"] != json.loads((tmp_path / "a" / "truth" / "summary.json").read_text())["counts"]


def _csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_investigate_finds_the_placeholders_and_the_late_writes(bundles, tmp_path: Path):
    root = bundles[20]
    meta = _meta(root)
    investigate(root / "bundle", tmp_path / "out")
    out = tmp_path / "out"
    assert _csv(out / "rejected.csv") == []
    gw = {r["request_id"]: r for r in _gateway(root).values()}
    limit = meta["pools"]["prefill_limit"]
    exposures = _csv(out / "exposures.csv")
    kinds = {e["kind"] for e in exposures}
    assert kinds == {"stale", "foreign_write"}
    for e in exposures:
        rec, src = gw[e["recipient_request_id"]], gw[e["source_request_id"]]
        assert e["node"] != meta["dark_node"] and rec["decode_node"] == e["node"]
        if e["kind"] == "stale":  # only a placeholder reads slots its own transfer did not fill
            assert rec["prompt_tokens"] >= limit
        else:  # a foreign write is an aborted request's late transfer, into a response's holding
            assert src["status"] == 499 and rec["status"] == 200
    late_sources = {e["source_request_id"] for e in exposures if e["kind"] == "foreign_write"}
    assert len(late_sources) > 5
    affected = _csv(out / "affected_responses.csv")
    paged = [a for a in affected if a["evidence"] == "pages"]
    by_kind = {k: {a["request_id"] for a in paged if k in a["kinds"]} for k in ("stale", "foreign_write")}
    served_placeholders = {
        r["request_id"]
        for r in gw.values()
        if r["prompt_tokens"] >= limit and r["status"] == 200 and r["decode_node"] != meta["dark_node"]
    }
    assert by_kind["stale"] <= served_placeholders and len(by_kind["stale"]) >= 0.8 * len(served_placeholders)
    assert by_kind["foreign_write"]
    # on the dark node, whose logs name no room: every served placeholder-length prompt is indeterminate
    dark_served = {
        r["request_id"]
        for r in gw.values()
        if limit <= r["prompt_tokens"] and r["status"] == 200 and r["decode_node"] == meta["dark_node"]
    }
    dark_affected = {a["request_id"]: a for a in affected if a["decode_node"] == meta["dark_node"]}
    assert dark_served and set(dark_affected) == dark_served
    assert all(a["status"] == "indeterminate" and a["evidence"] == "signature" for a in dark_affected.values())
    # the late writes that hit no response's reads are hazards: writes into slots their room let go
    hazards = _csv(out / "hazards.csv")
    after_free = {int(h["room"]) for h in hazards if h["kind"] == "write_after_free"}
    aborted = {r["bootstrap_room"] for r in gw.values() if r["status"] == 499}
    assert after_free and after_free <= aborted
    # placeholders also read slots nobody ever wrote
    assert any(h["kind"] == "uninitialized_read" for h in hazards)
    coverage = {r["node"]: r for r in _csv(out / "coverage.csv")}
    assert coverage[meta["dark_node"]]["page_telemetry"] == "no"
    assert all(coverage[n]["page_telemetry"] == "yes" for n in meta["counts"])
    assert all(coverage[n]["seq_gaps"] == "0" for n in coverage)
