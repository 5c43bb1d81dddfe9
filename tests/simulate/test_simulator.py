"""The simulator, checked from the files it WROTE (bundle read back with DuckDB/pyarrow)."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import tomllib
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

from forensics.simulate import build_config, simulate
from forensics.simulate.cluster import Exposures, PagePool, SlotState, page_ranges, token_ranges
from forensics.simulate.cohorts import cohort_of
from forensics.simulate.traffic import INTERNAL_LOAD, INTERNAL_PERF, QA_ACCOUNT, RESEARCHER, RESEARCHER_ALT
from forensics.simulate.truth import replay
from tests import support

EXAMPLE = support.EXAMPLE / "bundle"


def _run(tmp_path_factory: pytest.TempPathFactory, name: str, **kw: object) -> Path:
    out = tmp_path_factory.mktemp(name)
    simulate(out, build_config("default", **kw))
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # lifo (SGLang's rule outside PD mode): freed pages go out again at once, so aborted rooms' late
    # transfers land in other rooms' pages (the real PD rule, sorted-deferred, makes that rare)
    return _run(tmp_path_factory, "clean", seed=3, requests=700, abort_rate=0.05, long_rate=0.05, allocator="lifo")


@pytest.fixture(scope="module")
def gappy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(
        tmp_path_factory,
        "gappy",
        seed=4,
        requests=500,
        no_telemetry="decode-2",
        gap_node="decode-0",
        gap_events=60,
        abort_rate=0.05,
        long_rate=0.05,
    )


def events(bundle: Path) -> list[tuple]:
    """All page events of a bundle: (node, seq, ts µs, op, room, start, end, peer, src, dropped=False)."""
    pages = bundle / "pages"
    con = duckdb.connect()
    sel = 'select node, seq, epoch_us(ts::timestamptz) as ts, op, room, start, "end", peer, src from {}'
    parts = []
    if list(pages.glob("*.parquet")):
        parts.append(sel.format(f"read_parquet('{pages}/*.parquet')"))
    if list(pages.glob("*.jsonl")):
        parts.append(
            sel.format(
                f"read_json('{pages}/*.jsonl', columns={{node:'varchar', seq:'bigint', "
                "ts:'timestamptz', op:'varchar', room:'bigint', start:'bigint', \"end\":'bigint', "
                "peer:'varchar', src:'varchar'})"
            )
        )
    rows = con.sql(" union all ".join(parts) + " order by node, seq").fetchall()
    return [(*r, False) for r in rows]


def gateway(bundle: Path) -> list[dict]:
    g = bundle / "gateway"
    recs = [json.loads(x) for x in (g / "gw-a.jsonl").read_text().splitlines()]
    recs += duckdb.sql(f"select * from read_json_auto('{g}/gw-b.jsonl.gz')").pl().to_dicts()
    with open(g / "gw-c.csv", newline="") as f:
        recs += list(csv.DictReader(f))
    recs += pq.read_table(g / "gw-d.parquet").to_pylist()
    return recs


def truth(out: Path, name: str) -> list[dict]:
    with open(out / "truth" / name, newline="") as f:
        return list(csv.DictReader(f))


def summary(out: Path) -> dict:
    return json.loads((out / "truth" / "summary.json").read_text())


def test_seq_strictly_increasing_except_configured_gap(clean: Path, gappy: Path) -> None:
    for out, gap in ((clean, None), (gappy, "decode-0")):
        by_node: dict[str, list[int]] = {}
        for e in events(out / "bundle"):
            by_node.setdefault(e[0], []).append(e[1])
        assert set(by_node) == {n for n, on in summary(out)["page_telemetry"].items() if on}
        for node, seqs in by_node.items():
            d = np.diff(np.array(seqs))
            if node == gap:
                assert sorted(set(d.tolist())) == [1, 61] and (d == 61).sum() == 1
            else:
                assert (d == 1).all(), node


def test_no_slot_held_by_two_requests(clean: Path) -> None:
    holder: dict[str, np.ndarray] = {}
    for node, _seq, _ts, op, room, a, b, *_ in events(clean / "bundle"):
        h = holder.setdefault(node, np.zeros(1 << 17, dtype=np.int64))
        if op == "alloc":
            assert (h[a:b] == 0).all(), (node, room, a, b)
            assert a % 16 == 0 and b % 16 == 0 and a > 0
            h[a:b] = room
        elif op == "free":
            assert (h[a:b] == room).all(), (node, room, a, b)
            h[a:b] = 0


def test_ordinary_transfers_land_in_slots_the_room_holds(clean: Path) -> None:
    evs = events(clean / "bundle")
    off = summary(clean)["clock_offsets_us"]
    aborted = {int(r["room"]) for r in truth(clean, "responses.csv") if r["aborted"] == "1"}
    held: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}  # (node, room) -> (a, b, alloc_ts, free_ts)
    first_read: dict[tuple[str, int], int] = {}
    for node, _s, ts, op, room, a, b, *_ in evs:
        if op == "alloc":
            held.setdefault((node, room), []).append([a, b, ts, 1 << 62])  # type: ignore[arg-type]
        elif op == "free":
            for h in held.get((node, room), []):
                if h[0] == a and h[1] == b:
                    h[3] = ts  # type: ignore[index]
        elif op == "read":
            first_read.setdefault((node, room), ts)
    n = late = 0
    for node, _s, ts, op, room, a, b, peer, *_ in evs:
        if op != "transfer":
            continue
        land = ts - off[node] + off[peer]  # on the receiver's clock
        if room in aborted:
            late += 1
            assert all(land > h[3] for h in held[(peer, room)])  # lands after decode gave the pages back
            continue
        n += 1
        assert any(h[0] <= a and b <= h[1] and h[2] < land < h[3] for h in held[(peer, room)])
        assert land < first_read[(peer, room)]
    assert n > 500 and late > 10


def test_truth_two_ways_agree_with_the_release_allocator(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The default run (SGLang 0.5.11's own allocator on every node): the replay of its page events
    gives the truth the simulator kept, and the bundle names the release."""
    out = _run(tmp_path_factory, "release", seed=5, requests=400, abort_rate=0.05, long_rate=0.05)
    assert 'version = "0.5.11"' in (out / "bundle" / "bundle.toml").read_text()
    gw = gateway(out / "bundle")
    room_idx = {int(g["bootstrap_room"]): i for i, g in enumerate(gw)}
    rid = {i: g["request_id"] for i, g in enumerate(gw)}
    counts, flagged = replay(events(out / "bundle"), summary(out)["clock_offsets_us"], room_idx)
    replayed = sorted([rid[a], rid[b], n, k, str(c)] for (a, b, n, k), c in counts.items())
    assert replayed == sorted(list(r.values()) for r in truth(out, "exposures.csv"))
    assert replayed and not flagged


def test_truth_two_ways_agree(clean: Path) -> None:
    gw = gateway(clean / "bundle")
    room_idx = {int(g["bootstrap_room"]): i for i, g in enumerate(gw)}
    rid = {i: g["request_id"] for i, g in enumerate(gw)}
    counts, flagged = replay(events(clean / "bundle"), summary(clean)["clock_offsets_us"], room_idx)
    replayed = sorted([rid[a], rid[b], n, k, str(c)] for (a, b, n, k), c in counts.items())
    expected = sorted(list(r.values()) for r in truth(clean, "exposures.csv"))
    assert replayed == expected
    kinds = {e[3] for e in replayed}
    assert kinds == {"stale", "foreign_write"} and not flagged
    exposed = {r["request_id"] for r in truth(clean, "responses.csv") if r["exposed"] == "1"}
    assert exposed == {e[0] for e in replayed}


def test_example_bundle_replay_reproduces_expected_exposures() -> None:
    rows = [json.loads(x) for x in (EXAMPLE / "pages" / "events.jsonl").read_text().splitlines()]
    evs = [
        (
            r["node"],
            r["seq"],
            int(np.datetime64(r["ts"].rstrip("Z"), "us").astype(np.int64)),
            r["op"],
            r["room"],
            r["start"],
            r["end"],
            r.get("peer"),
            r.get("src"),
            False,
        )
        for r in rows
    ]
    names = {1001: "req-A", 2002: "req-B", 3003: "req-C", 4004: "req-D"}
    counts, _ = replay(evs, {"prefill-0": 500_000, "decode-0": 0}, {k: k for k in names})
    got = {(names[a], names[b], n, k): c for (a, b, n, k), c in counts.items()}
    assert got == {
        ("req-B", "req-A", "decode-0", "stale"): 45,
        ("req-D", "req-C", "decode-0", "foreign_write"): 20,
    }


def test_example_scenario_through_the_cluster_model() -> None:
    """req-A..D of the spec example driven through the simulator's own allocator (SGLang's LIFO: a
    paged node outside PD mode, or 0.4.9's) and slot model."""
    ps, exp = 16, Exposures()
    pool, slots = PagePool(8192 // ps, reuse="lifo", page_size=ps), SlotState("decode-0", 8192 + ps, exp)
    A, B, C, D = 0, 1, 2, 3

    def lifecycle(who: int, L: int, out: int, xfer: int, t: int) -> tuple[np.ndarray, np.ndarray]:
        prompt = pool.alloc(-(-L // ps))
        assert prompt is not None
        for a, b in token_ranges(prompt, ps, 0, xfer):
            slots.write(a, b, who, t + 1)  # own transfer lands
        for a, b in token_ranges(prompt, ps, 0, L):
            slots.read(a, b, who, t)
        outp = pool.alloc(-(-out // ps))
        assert outp is not None
        for a, b in token_ranges(outp, ps, 0, out):
            slots.write(a, b, who, t + 2)
        return prompt, outp

    pa_, oa = lifecycle(A, 40, 6, 40, 100)
    assert page_ranges(pa_, ps) == [(16, 64)] and page_ranges(oa, ps) == [(64, 80)]
    for a, b in page_ranges(pa_, ps) + page_ranges(oa, ps):
        slots.release(a, b, A)
    pool.free(np.concatenate((pa_, oa)))
    pb, ob = lifecycle(B, 5000, 3, 1, 200)
    assert page_ranges(pb, ps) == [(16, 5024)] and page_ranges(ob, ps) == [(5024, 5040)]
    pool.free(np.concatenate((pb, ob)))
    slots.release(16, 5040, B)
    pc = pool.alloc(2)  # C pre-allocates, its client aborts, decode frees at once
    assert pc is not None and page_ranges(pc, ps) == [(16, 48)]
    pool.free(pc)
    pd, od = lifecycle(D, 20, 4, 20, 300)
    assert page_ranges(pd, ps) == [(16, 48)] and page_ranges(od, ps) == [(48, 64)]
    slots.write(16, 46, C, 400)  # C's transfer lands late, while D attends [16,36)
    assert exp.counts() == {(B, A, "decode-0", "stale"): 45, (D, C, "decode-0", "foreign_write"): 20}


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    def digest(out: Path) -> dict[str, str]:
        return {
            str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*"))
            if p.is_file()
        }

    kw = dict(seed=11, requests=250, gap_node="prefill-1", gap_events=5, no_telemetry="decode-1")
    simulate(tmp_path / "a", build_config("default", **kw))
    simulate(tmp_path / "b", build_config("default", **kw))
    simulate(tmp_path / "c", build_config("default", **{**kw, "seed": 12}))
    a, b, c = digest(tmp_path / "a"), digest(tmp_path / "b"), digest(tmp_path / "c")
    assert len(a) >= 20 and a == b
    assert a["bundle/pages/decode-0.parquet"] != c["bundle/pages/decode-0.parquet"]


def test_placeholder_signature_in_logs(clean: Path) -> None:
    bundle = clean / "bundle"
    resp = {r["room"]: r for r in truth(clean, "responses.csv")}
    gw = {str(g["bootstrap_room"]): g for g in gateway(bundle)}
    stats = re.compile(
        r"Req Time Stats\(rid=(\w+), bootstrap_room=(\d+), input len=(\d+), output len=\d+, "
        r"type=(prefill|decode)\)"
    )
    over = re.compile(
        r"Input length \((\d+) tokens\) exceeds the maximum allowed length \(4090 tokens\)\. Use a "
        r"shorter input or enable --allow-auto-truncate\., self\.rid='(\w+)'"
    )
    seen: dict[tuple[str, str], tuple[str, int]] = {}
    over_rids: dict[str, int] = {}
    for log in bundle.glob("engine/*/server.log"):
        text = log.read_text()
        for rid, room, n, kind in stats.findall(text):
            seen[(room, kind)] = (rid, int(n))
        over_rids.update({rid: int(n) for n, rid in over.findall(text)})
    placeholders = [r for r in resp.values() if r["placeholder"] == "1"]
    assert len(placeholders) >= 10
    for r in placeholders:
        rid, n = seen[(r["room"], "prefill")]
        assert n == 1 and over_rids[rid] == int(gw[r["room"]]["prompt_tokens"])
        if r["status"] == "200":
            assert seen[(r["room"], "decode")][1] == int(gw[r["room"]]["prompt_tokens"])
    for room, r in resp.items():
        if r["placeholder"] == "0" and (room, "prefill") in seen:
            assert seen[(room, "prefill")][0] not in over_rids


def test_cohorts_follow_exclusions_semantics(clean: Path) -> None:
    bundle = clean / "bundle"
    spec = tomllib.loads((bundle / "exclusions.toml").read_text())
    resp = {r["request_id"]: r["cohort"] for r in truth(clean, "responses.csv")}
    after, before = (spec["cohort"][1]["match"][0][k] for k in ("after", "before"))
    picked: dict[str, str] = {}
    for g in gateway(bundle):
        ts = str(g["ts"]).replace(" ", "T")[:19]
        inside = after[:19] <= ts < before[:19]
        hdr = g.get("headers")
        hdr = json.loads(hdr) if isinstance(hdr, str) and hdr else hdr
        want = {
            INTERNAL_LOAD: "internal-test",
            INTERNAL_PERF: "internal-test",
            QA_ACCOUNT: "internal-test",
        }.get(g["account_id"])
        if g["account_id"] in (RESEARCHER, RESEARCHER_ALT):
            want = "researcher-repro" if inside else "customer"
        if g["account_id"] == QA_ACCOUNT:
            assert hdr == {"x-internal-test": "1"}
        if want:
            assert resp[g["request_id"]] == want, (g["account_id"], ts)
            picked[f"{g['account_id']}:{want}"] = g["request_id"]
    assert {
        "acct-int-loadtest:internal-test",
        "acct-int-perf:internal-test",
        "acct-3c9e1f:researcher-repro",
        "acct-3c9e1f:customer",
        "acct-b71d02:researcher-repro",
    } <= set(picked)
    cohorts = [type("C", (), {"name": c["name"], "matches": c["match"]})() for c in spec["cohort"]]
    probe = {
        "account_id": "acct-x",
        "api_token_id": "t",
        "client_ip": "192.0.2.77",
        "user_agent": "x",
        "headers": None,
        "model": "glm-5.3",
        "ts_us": 0,
    }
    assert cohort_of(cohorts, probe) == "customer"  # before the window: the CIDR table's `after` fails


def test_gap_and_no_telemetry(gappy: Path) -> None:
    resp = truth(gappy, "responses.csv")
    s = summary(gappy)
    assert not (gappy / "bundle" / "pages" / "decode-2.parquet").exists()
    assert all(r["decode_node"] != "decode-2" for r in resp if r["aborted"] == "1")
    assert all(r["evidence"] == ("signature" if r["decode_node"] == "decode-2" else "pages") for r in resp)
    assert all(
        r["allowed_indeterminate"] == "1" for r in resp if r["evidence"] == "signature" and r["placeholder"] == "1"
    )
    g = s["gap"]
    dropped = {e for e in range(g["seq_first_dropped"], g["seq_last_dropped"] + 1)}
    seqs = {e[1] for e in events(gappy / "bundle") if e[0] == "decode-0"}
    assert not dropped & seqs and len(dropped) == 60
    assert sum(r["allowed_indeterminate"] == "1" and r["decode_node"] == "decode-0" for r in resp) >= 3
    assert len(gateway(gappy / "bundle")) == s["requests"] == len(resp)


def test_release_and_allocator_options() -> None:
    """--release names the nodes' SGLang release and, by default, their allocators (the registry's
    rule per role and page size); --allocator overrides the decode nodes'; coalesce is no release's."""
    cfg = build_config("default", seed=1, requests=10)
    assert cfg.release == "0.5.11"
    assert cfg.node_allocator("decode") == cfg.node_allocator("prefill") == "sorted-deferred"
    old = build_config("default", seed=1, requests=10, release="0.4.9", page_size=1)
    assert old.node_allocator("decode") == "fifo"
    assert build_config("default", seed=1, requests=10, release="0.4.9").node_allocator("decode") == "lifo"
    legacy = build_config("default", seed=1, requests=10, allocator="coalesce")
    assert (legacy.node_allocator("decode"), legacy.node_allocator("prefill")) == ("coalesce", "sorted")
    assert build_config("default", seed=1, requests=10, decode_reuse="deferred").allocator == "sorted-deferred"
    bad_options = (dict(release="0.3.0"), dict(allocator="fifo"), dict(allocator="lifo", page_size=1))
    for bad in bad_options:
        with pytest.raises(ValueError):
            build_config("default", seed=1, requests=10, **bad)
