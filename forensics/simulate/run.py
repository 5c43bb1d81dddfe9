"""One simulation run: traffic -> engine -> (optional seq gap) -> bundle files -> truth files."""

from __future__ import annotations

import csv
import gc
import io
import json
import random
from pathlib import Path

from forensics.simulate import vllm_prefix
from forensics.simulate.config import S, SimConfig
from forensics.simulate.engine import Engine
from forensics.simulate.texts import make_texts
from forensics.simulate.traffic import Traffic, cohorts_for
from forensics.simulate.truth import INF, Row, clock_bounds, late_ambiguity, replay
from forensics.simulate.vllm_pd import VllmPD
from forensics.simulate.writer import write_bundle, write_bytes

RESPONSE_COLUMNS = [
    "request_id",
    "room",
    "account_id",
    "cohort",
    "status",
    "decode_node",
    "prefill_node",
    "placeholder",
    "aborted",
    "exposed",
    "kinds",
    "evidence",
    "allowed_indeterminate",
]
EXPOSURE_COLUMNS = ["recipient_request_id", "source_request_id", "node", "kind", "slots"]
# how near a late landing on a node without page telemetry a response in flight there may be doubted
# (a prefill line of 1 s resolution and the clock fit between the nodes leave about that much)
LATE_MARGIN = 2 * S


def apply_gap(cfg: SimConfig, eng: Engine | VllmPD) -> tuple[list[Row], dict[str, object] | None]:
    """All rows (with a dropped flag) and the gap description, if a gap is configured."""
    rows: list[Row] = []
    gap = None
    for name in sorted(eng.nodes):
        node = eng.nodes[name]
        lo = hi = -1
        if cfg.gap_node == name and cfg.gap_events > 0 and node.rows:
            k0 = min(len(node.rows) - 1, int(len(node.rows) * cfg.gap_at))
            k1 = min(len(node.rows), k0 + cfg.gap_events)
            lo, hi = node.rows[k0][0], node.rows[k1 - 1][0]
            after = node.rows[k1][1] if k1 < len(node.rows) else INF
            gap = {
                "node": name,
                "seq_first_dropped": lo,
                "seq_last_dropped": hi,
                "events": k1 - k0,
                "end_true": after - node.spec.clock_offset_us if after < INF else INF,
            }
        for seq, ts, op, room, a, b, peer, src in node.rows:
            rows.append((name, seq, ts, op, room, a, b, peer, src, lo <= seq <= hi))
        node.generated = len(node.rows)
        node.rows = []  # one copy of the events is enough
    return rows, gap


def _csv(header: list[str], rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode()


def simulate(out: Path, cfg: SimConfig) -> dict[str, object]:
    """Run the simulation and write OUT/bundle and OUT/truth; returns the summary."""
    enabled = gc.isenabled()
    gc.disable()  # millions of small tuples: the cyclic GC would rescan them over and over
    try:
        return _simulate(out, cfg)
    finally:
        if enabled:
            gc.enable()


def _simulate(out: Path, cfg: SimConfig) -> dict[str, object]:
    rng = random.Random(cfg.seed)
    reqs = Traffic(cfg, rng).generate()
    eng: Engine | VllmPD = VllmPD(cfg, reqs, rng) if cfg.vllm_pd else Engine(cfg, reqs, rng)
    eng.run()
    rows, gap = apply_gap(cfg, eng)
    telemetry = {n.name for n in cfg.nodes if n.telemetry}
    kept = [row for row in rows if not row[9] and row[0] in telemetry]
    kept_by_node: dict[str, list[Row]] = {n: [] for n in eng.nodes}
    for row in kept:
        kept_by_node[row[0]].append(row)
    echoes = None
    if cfg.texts:  # texts and echoes from RNGs of their own: every other file stays as without them
        pairs = [(a, b) for (a, b, _node, _kind) in eng.exp.parts]
        texts, echoes = make_texts(cfg, reqs, pairs)
        for r in reqs:
            r.extra["text"] = texts[r.idx]
    write_bundle(out / "bundle", cfg, reqs, eng.nodes, kept_by_node, cohorts_for(cfg), rows)

    offsets = {n.name: n.clock_offset_us for n in cfg.nodes}
    room_idx = {r.room: r.idx for r in reqs}
    aborted_rooms = {r.room for r in reqs if r.aborted}
    bounds = clock_bounds(kept, aborted_rooms)
    amb_rooms, amb = late_ambiguity(kept, aborted_rooms, bounds, offsets)
    flagged: set[int] = {room_idx[x] for x in amb_rooms}
    if gap or amb:  # replay only the pools these can affect: each node's state depends on its own rows
        touched = {a[0] for a in amb} | ({str(gap["node"])} if gap else set())
        touched |= {str(row[7]) for row in rows if row[9] and row[3] == "transfer"}
        sub_rows = [row for row in rows if row[0] in touched or (row[3] == "transfer" and row[7] in touched)]
        _, f2 = replay(sub_rows, offsets, room_idx, gap, amb)
        flagged |= f2
    if gap:
        g_lo, g_hi = int(gap["seq_first_dropped"]), int(gap["seq_last_dropped"])  # type: ignore[call-overload]
        seqs: dict[int, list[int]] = {}
        for row in rows:
            if row[0] == gap["node"]:
                seqs.setdefault(row[4], []).append(row[1])
        for room, ss in seqs.items():
            if any(g_lo <= s <= g_hi for s in ss) or (min(ss) < g_lo and max(ss) > g_hi):
                flagged.add(room_idx[room])

    counts = eng.exp.counts()
    # a late landing on a node without page telemetry: which pages it hit the logs cannot say, so every
    # response in flight there within LATE_MARGIN of it may be reported indeterminate
    late = [(r.decode, eng.st[r.idx].land_t) for r in reqs if r.aborted and r.decode not in telemetry]
    in_flight_late = {
        r.idx
        for r in reqs
        if r.decode not in telemetry and r.status == 200
        for node, t in late
        if node == r.decode and eng.st[r.idx].d_alloc_t - LATE_MARGIN <= t <= eng.st[r.idx].end_t + LATE_MARGIN
    }
    # a KV canary line on a node without page telemetry names a slot, not its holder: every response
    # holding pages there within LATE_MARGIN of it may be reported indeterminate
    canary = [(name, t) for name, node in eng.nodes.items() if name not in telemetry for t in node.canary_at]
    in_flight_canary = {
        r.idx
        for r in reqs
        if r.decode not in telemetry
        for node, t in canary
        if node == r.decode and eng.st[r.idx].d_alloc_t - LATE_MARGIN <= t <= eng.st[r.idx].end_t + LATE_MARGIN
    }
    kinds: dict[int, set[str]] = {}
    for (rec, _src, _node, kind), _n in counts.items():
        kinds.setdefault(rec, set()).add(kind)
    resp_rows: list[list[object]] = []
    affected, by_cohort = 0, dict[str, int]()
    for r in sorted(reqs, key=lambda x: x.request_id):
        exposed = r.idx in kinds
        sig = r.decode not in telemetry
        indet = r.idx in flagged or (sig and r.placeholder) or r.idx in in_flight_late or r.idx in in_flight_canary
        resp_rows.append(
            [
                r.request_id,
                r.room,
                r.account,
                r.cohort,
                r.status,
                r.decode,
                r.prefill,
                int(r.placeholder),
                int(r.aborted),
                int(exposed),
                ";".join(sorted(kinds.get(r.idx, ()))),
                "signature" if sig else "pages",
                int(indet),
            ]
        )
        if exposed:
            by_cohort[r.cohort] = by_cohort.get(r.cohort, 0) + 1
        if r.cohort == "customer" and ((exposed and not sig) or (sig and r.placeholder and r.status == 200)):
            affected += 1
    rid = {r.idx: r.request_id for r in reqs}
    exp_rows = sorted([rid[a], rid[b], node, kind, n] for (a, b, node, kind), n in counts.items())
    write_bytes(out / "truth" / "responses.csv", _csv(RESPONSE_COLUMNS, resp_rows))
    write_bytes(out / "truth" / "exposures.csv", _csv(EXPOSURE_COLUMNS, exp_rows))
    if isinstance(eng, VllmPD):  # every prefix-cache hit: a legitimate hit, or an exposure (also above)
        hits = eng.hits.table(rid, {r.idx: r.account for r in reqs}, dict(enumerate(eng.salt)))
        write_bytes(out / "truth" / "prefix_hits.csv", _csv(vllm_prefix.HIT_COLUMNS, hits))
    if echoes is not None:  # every true pair (recipient, source) and whether its response echoes the source
        echo_rows = sorted([rid[a], rid[b], e] for a, b, e in echoes)
        write_bytes(
            out / "truth" / "echoes.csv", _csv(["recipient_request_id", "source_request_id", "echoed"], echo_rows)
        )

    statuses: dict[str, int] = {}
    for r in reqs:
        statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
    summary = {
        "seed": cfg.seed,
        "preset": cfg.preset,
        "requests": len(reqs),
        "statuses": dict(sorted(statuses.items())),
        "placeholders": sum(r.placeholder for r in reqs),
        "aborts": sum(r.aborted for r in reqs),
        "exposed_responses": sum(by_cohort.values()),
        "exposed_responses_by_cohort": dict(sorted(by_cohort.items())),
        "exposure_pairs": len(exp_rows),
        "exposure_pairs_by_kind": {k: sum(1 for e in exp_rows if e[3] == k) for k in ("foreign_write", "stale")},
        "affected_customer_responses": affected,
        "allowed_indeterminate": sum(int(x[-1]) for x in resp_rows),  # type: ignore[call-overload]
        "late_landings_moved": eng.late_moves,
        "late_landings_ambiguous": len(amb),
        "events_generated_per_node": {n: eng.nodes[n].generated for n in sorted(eng.nodes)},
        "events_written_per_node": {n: len(kept_by_node[n]) for n in sorted(eng.nodes) if n in telemetry},
        "page_telemetry": {n: n in telemetry for n in sorted(eng.nodes)},
        "clock_offsets_us": dict(sorted(offsets.items())),
        "clock_bounds_us": {f"{s}->{r}": list(v) for (s, r), v in sorted(bounds.items())},
        "gap": gap,
        "options": cfg.options(),
    }
    write_bytes(out / "truth" / "summary.json", (json.dumps(summary, indent=2, sort_keys=False) + "\n").encode())
    return summary
