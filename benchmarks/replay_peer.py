"""Timing peer: the straightforward per-event replay an investigator would write without the tool.

For each node, a Python loop over its page events in seq order, with numpy arrays indexed by slot
(last writer room, position of the last write, holder, position of the holder's alloc, bound reader).
Transfers (logged by the sender on its clock) are placed on the receiver: one fixed clock offset per
(sender, receiver) pair, the middle of the bounds that ordinary transfers give (the room allocated
the slots on the receiver before the landing and read them after), and the landing goes right after
the receiver's last event whose timestamp is not later than the shifted sender timestamp.

A read finds, per slot: its own data, never-written slots (a hazard), or another room's KV:
`stale` if that write came before the reader allocated the slot, `foreign_write` if after. A write or
landing by another room into slots a reader is bound to (read, not yet freed) is a `foreign_write`
for that reader. `share` binds like a read but is sanctioned sharing (not an exposure).

No seq-gap handling, no clock-bound ambiguity, no cohorts: a peer for timing, correct on the simple
bundles of `forensics simulate --scale --page-events uniform`.

    python benchmarks/replay_peer.py BUNDLE [--out exposures.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

OPS = {"alloc": 0, "free": 1, "write": 2, "read": 3, "share": 4, "transfer": 5}
ALLOC, FREE, WRITE, READ, SHARE, TRANSFER = range(6)
LANDING = 6  # a transfer placed on the receiver
STALE, FOREIGN = 0, 1
KINDS = ("stale", "foreign_write")
STEP = 1_000_000  # events converted to Python lists at a time


def _codes(col: pa.ChunkedArray, names: list[str]) -> np.ndarray:
    """String column -> int codes into `names` (-1 for null / unknown)."""
    idx = pc.index_in(col, value_set=pa.array(names))
    return pc.fill_null(idx, -1).to_numpy().astype(np.int32)


def load(bundle: Path) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    files = sorted((bundle / "pages").glob("*.parquet"))
    t = pq.read_table(files, columns=["node", "seq", "ts", "op", "room", "start", "end", "peer"])
    nodes = sorted(pc.unique(t["node"]).to_pylist())
    node = _codes(t["node"], nodes)
    seq = t["seq"].to_numpy()
    order = np.lexsort((seq, node))
    cols = {
        "node": node[order],
        "seq": seq[order],
        "ts": t["ts"].cast(pa.int64()).to_numpy()[order],
        "op": _codes(t["op"], list(OPS))[order],
        "room": t["room"].to_numpy()[order],
        "start": t["start"].to_numpy()[order],
        "end": t["end"].to_numpy()[order],
        "peer": _codes(t["peer"], nodes)[order],
    }
    del t
    bounds = np.searchsorted(cols["node"], np.arange(len(nodes) + 1))
    per_node = {n: {k: v[bounds[i] : bounds[i + 1]] for k, v in cols.items()} for i, n in enumerate(nodes)}
    return nodes, per_node


def _first_ts(ev: dict[str, np.ndarray], op: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique rooms with the timestamp of their first `op` event on this node."""
    m = ev["op"] == op
    rooms, first = np.unique(ev["room"][m], return_index=True)
    return rooms, ev["ts"][m][first]


def clock_offsets(nodes: list[str], per_node: dict) -> dict[tuple[int, int], int]:
    """(sender, receiver) -> receiver-minus-sender clock offset in us, from ordinary transfers."""
    offsets = {}
    firsts = {i: (_first_ts(per_node[n], ALLOC), _first_ts(per_node[n], READ)) for i, n in enumerate(nodes)}
    for s, sn in enumerate(nodes):
        ev = per_node[sn]
        x = ev["op"] == TRANSFER
        for r in np.unique(ev["peer"][x]):
            if r < 0:
                continue
            m = x & (ev["peer"] == r)
            rooms, xts = ev["room"][m], ev["ts"][m]
            (arooms, ats), (rrooms, rts) = firsts[r]
            ia = np.clip(np.searchsorted(arooms, rooms), 0, max(len(arooms) - 1, 0))
            ir = np.clip(np.searchsorted(rrooms, rooms), 0, max(len(rrooms) - 1, 0))
            ok = np.zeros(len(rooms), bool)
            if len(arooms) and len(rrooms):
                ok = (arooms[ia] == rooms) & (rrooms[ir] == rooms)
            if not ok.any():
                offsets[(s, int(r))] = 0
                continue
            lower = ats[ia[ok]] - xts[ok]
            upper = rts[ir[ok]] - xts[ok]
            lo, hi = lower.max(), upper.min()
            mid = (lo + hi) // 2 if lo <= hi else int(np.median((lower + upper) // 2))
            offsets[(s, int(r))] = int(mid)
    return offsets


def _merged(i: int, nodes: list[str], per_node: dict, offsets: dict) -> dict[str, np.ndarray]:
    """Receiver i's events with the transfers landing on it, in replay order."""
    ev = per_node[nodes[i]]
    parts_room, parts_start, parts_end, parts_key, parts_adj = [], [], [], [], []
    run_ts = np.maximum.accumulate(ev["ts"]) if len(ev["ts"]) else ev["ts"]
    for s, sn in enumerate(nodes):
        sev = per_node[sn]
        m = (sev["op"] == TRANSFER) & (sev["peer"] == i)
        if not m.any():
            continue
        adj = sev["ts"][m] + offsets.get((s, i), 0)
        after = np.searchsorted(run_ts, adj, side="right") - 1  # lands after receiver event `after`
        parts_room.append(sev["room"][m])
        parts_start.append(sev["start"][m])
        parts_end.append(sev["end"][m])
        parts_key.append(2 * after + 1)
        parts_adj.append(adj)
    n = len(ev["op"])
    op = ev["op"].copy()
    op[op == TRANSFER] = -1  # the sender's own record: nothing happens in its pool
    if not parts_room:
        return {"op": op, "room": ev["room"], "start": ev["start"], "end": ev["end"]}
    key = np.concatenate([2 * np.arange(n, dtype=np.int64)] + parts_key)
    adj = np.concatenate([np.zeros(n, np.int64)] + parts_adj)
    order = np.lexsort((adj, key))
    land = sum(len(p) for p in parts_room)
    return {
        "op": np.concatenate([op, np.full(land, LANDING, np.int32)])[order],
        "room": np.concatenate([ev["room"]] + parts_room)[order],
        "start": np.concatenate([ev["start"]] + parts_start)[order],
        "end": np.concatenate([ev["end"]] + parts_end)[order],
    }


def replay_node(ev: dict[str, np.ndarray], exposures: dict, hazards: dict, node: str) -> None:
    size = int(max(ev["end"].max(initial=0), 1)) + 1
    writer = np.zeros(size, np.int64)
    wpos = np.full(size, -1, np.int64)
    holder = np.zeros(size, np.int64)
    apos = np.full(size, -1, np.int64)
    reader = np.zeros(size, np.int64)
    n = len(ev["op"])
    for base in range(0, n, STEP):
        ops = ev["op"][base : base + STEP].tolist()
        rooms = ev["room"][base : base + STEP].tolist()
        starts = ev["start"][base : base + STEP].tolist()
        ends = ev["end"][base : base + STEP].tolist()
        for j, op in enumerate(ops):
            idx = base + j
            room, s, e = rooms[j], starts[j], ends[j]
            if e <= s or s < 0:
                continue
            if op == ALLOC:
                holder[s:e] = room
                apos[s:e] = idx
                reader[s:e] = 0
            elif op == FREE:
                holder[s:e] = 0
                reader[s:e] = 0
            elif op == WRITE or op == LANDING:
                rd = reader[s:e]
                if rd.any():
                    bad = (rd != 0) & (rd != room)
                    if bad.any():
                        victims, counts = np.unique(rd[bad], return_counts=True)
                        for v, c in zip(victims.tolist(), counts.tolist(), strict=True):
                            exposures[(node, v, room, FOREIGN)] += c
                writer[s:e] = room
                wpos[s:e] = idx
            elif op == READ:
                w = writer[s:e]
                if not (w == room).all():
                    blank = w == 0
                    nb = int(blank.sum())
                    if nb:
                        hazards[(node, room)] += nb
                    other = ~blank & (w != room)
                    if other.any():
                        src = w[other]
                        late = wpos[s:e][other] > apos[s:e][other]  # written after the reader's alloc
                        for k, sel in ((STALE, src[~late]), (FOREIGN, src[late])):
                            if len(sel):
                                srcs, counts = np.unique(sel, return_counts=True)
                                for sr, c in zip(srcs.tolist(), counts.tolist(), strict=True):
                                    exposures[(node, room, sr, k)] += c
                reader[s:e] = room
            elif op == SHARE:
                reader[s:e] = room


def replay(bundle: Path) -> tuple[dict, dict, int]:
    nodes, per_node = load(bundle)
    offsets = clock_offsets(nodes, per_node)
    exposures: dict = defaultdict(int)
    hazards: dict = defaultdict(int)
    events = 0
    for i, n in enumerate(nodes):
        events += len(per_node[n]["op"])
        replay_node(_merged(i, nodes, per_node, offsets), exposures, hazards, n)
    return dict(exposures), dict(hazards), events


def write_csv(exposures: dict, path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["node", "recipient_room", "source_room", "kind", "slots"])
        for (node, rec, src, k), slots in sorted(exposures.items()):
            w.writerow([node, rec, src, KINDS[k], slots])


def print_summary(exposures: dict, hazards: dict, events: int, t0: float) -> None:
    """The one JSON line a peer prints (benchmarks/run.py and shapes.py read it)."""
    print(
        json.dumps(
            {
                "events": events,
                "exposure_pairs": len(exposures),
                "hazard_reads": len(hazards),
                "seconds": round(time.perf_counter() - t0, 3),
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--out", type=Path, help="write exposures CSV here")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    exposures, hazards, events = replay(a.bundle)
    if a.out:
        write_csv(exposures, a.out)
    print_summary(exposures, hazards, events, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
