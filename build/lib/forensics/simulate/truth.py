"""Ground truth beside the simulator's online slot model: an independent slot-by-slot replay of
page events (true landing times), the clock bounds an analyst can derive from the bundle, and which
responses the bundle cannot decide (allowed_indeterminate)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from forensics.simulate.config import MS

Row = tuple[str, int, int, str, int, int, int, str | None, str | None, bool]  # ..., dropped
INF = 1 << 62


def replay(
    events: Iterable[Row],
    offsets: dict[str, int],
    room_idx: dict[int, int],
    gap: dict[str, object] | None = None,
    ambiguous: list[tuple[str, int, int, int, int]] | None = None,
) -> tuple[dict[tuple[int, int, str, str], int], set[int]]:
    """Replay page events in true-time order and return ({(recipient, source, node, kind): slots}, flagged).

    A transfer row takes effect on its peer's pool at the row's ts on the sender clock. `flagged` holds
    requests whose reads the bundle cannot settle: reads after the seq gap of slots last written at or
    before its end (or never), and reads/attention touching content from a dropped row or from a late
    landing whose order the clock bounds cannot settle (`ambiguous`: node, start, end, true lo, true hi).
    """
    evs = sorted(events, key=lambda e: (e[2] - offsets[e[0]], e[0], e[1]))
    size: dict[str, int] = {}
    last: dict[tuple[str, int], int] = {}
    for e in evs:
        tgt = str(e[7]) if e[3] == "transfer" else e[0]
        size[tgt] = max(size.get(tgt, 0), e[6] + 1)
        last[(e[0], e[4])] = e[1]
    content = {n: np.full(k, -1, np.int32) for n, k in size.items()}
    wtime = {n: np.zeros(k, np.int64) for n, k in size.items()}
    alloc_t = {n: np.zeros(k, np.int64) for n, k in size.items()}
    attend = {n: np.full(k, -1, np.int32) for n, k in size.items()}
    taint = {n: np.zeros(k, bool) for n, k in size.items()}
    shares: dict[str, list[tuple[int, int, int]]] = {n: [] for n in size}
    parts: dict[tuple[int, int, str, str], list[np.ndarray]] = {}
    flagged: set[int] = set()
    amb = ambiguous or []
    g_node = gap["node"] if gap else None
    g_end = int(gap["end_true"]) if gap else 0  # type: ignore[call-overload]

    def add(key: tuple[int, int, str, str], slots: np.ndarray) -> None:
        parts.setdefault(key, []).append(slots)

    for node, seq, ts, op, room, a, b, peer, _src, dropped in evs:
        t = ts - offsets[node]
        me = room_idx.get(room, -1)
        if op in ("write", "transfer"):
            n = peer if op == "transfer" else node
            assert n is not None
            att = attend[n][a:b]
            m = (att >= 0) & (att != me)
            if m.any():
                slots = np.flatnonzero(m) + a
                for u in np.unique(att[m]).tolist():
                    add((u, me, n, "foreign_write"), slots[att[m] == u])
                    if dropped or taint[n][a:b][m].any():
                        flagged.add(u)
            for u, sa, sb in shares[n]:
                lo, hi = max(a, sa), min(b, sb)
                if u != me and lo < hi:
                    add((u, me, n, "foreign_write"), np.arange(lo, hi))
            in_amb = any(x[0] == n and x[1] < b and a < x[2] and x[3] <= t <= x[4] for x in amb)
            content[n][a:b], wtime[n][a:b] = me, t
            taint[n][a:b] = dropped or in_amb
            if in_amb or dropped:
                flagged.update(int(u) for u in np.unique(att[att >= 0]).tolist())
        elif op == "alloc":
            alloc_t[node][a:b] = t
        elif op == "read":
            c = content[node][a:b]
            m = (c >= 0) & (c != me)
            if m.any():
                slots, src = np.flatnonzero(m) + a, c[m]
                stale = wtime[node][a:b][m] < alloc_t[node][a:b][m]
                for s in np.unique(src).tolist():
                    k = src == s
                    if (k & stale).any():
                        add((me, s, node, "stale"), slots[k & stale])
                    if (k & ~stale).any():
                        add((me, s, node, "foreign_write"), slots[k & ~stale])
            attend[node][a:b] = me
            if taint[node][a:b].any():
                flagged.add(me)
            if node == g_node and t > g_end and ((c < 0) | (wtime[node][a:b] <= g_end)).any():
                flagged.add(me)
        elif op == "share":
            shares[node].append((me, a, b))
        elif op == "free":
            att = attend[node][a:b]
            att[att == me] = -1
        if last.get((node, room)) == seq and shares.get(node):
            shares[node] = [x for x in shares[node] if x[0] != me]
    counts = {k: int(len(np.unique(np.concatenate(v)))) for k, v in sorted(parts.items())}
    return counts, flagged


def clock_bounds(rows: list[Row], aborted_rooms: set[int]) -> dict[tuple[str, str], tuple[int, int]]:
    """(sender, receiver) -> (lo, hi): receiver_clock - sender_clock lies in (lo, hi), from ordinary transfers
    visible in the bundle (transfer row ts vs. the room's alloc and read rows on the receiver)."""
    first: dict[tuple[str, int, str], int] = {}
    for node, _seq, ts, op, room, *_ in rows:
        if op in ("alloc", "read"):
            k = (node, room, op)
            first[k] = min(first.get(k, INF), ts)
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for node, _seq, ts, op, room, _a, _b, peer, *_ in rows:
        if op != "transfer" or room in aborted_rooms or peer is None:
            continue
        al, rd = first.get((peer, room, "alloc")), first.get((peer, room, "read"))
        if al is None or rd is None:
            continue
        lo, hi = out.get((node, peer), (-INF, INF))
        out[(node, peer)] = (max(lo, al - ts), min(hi, rd - ts))
    return out


def late_ambiguity(
    rows: list[Row],
    aborted_rooms: set[int],
    bounds: dict[tuple[str, str], tuple[int, int]],
    offsets: dict[str, int],
) -> tuple[set[int], list[tuple[str, int, int, int, int]]]:
    """Rooms whose exposure depends on ordering a late landing within the clock uncertainty (+-1 ms),
    and the ambiguous landings themselves (node, start, end, true lo, true hi)."""
    by_node: dict[str, list[Row]] = {}
    for r in rows:
        by_node.setdefault(r[0], []).append(r)
    arr = {}
    for n, rs in by_node.items():
        cols = list(zip(*rs, strict=True))
        ts, rm, sa, sb = (np.array(cols[k], np.int64) for k in (2, 4, 5, 6))
        o = np.argsort(ts, kind="stable")
        arr[n] = (ts[o], rm[o], sa[o], sb[o])
    xf: dict[str, list[tuple[int, int, int, int, int, int]]] = {}  # receiver -> (ts, room, a, b, w0, w1)
    late = []
    for r in rows:
        if r[3] != "transfer" or r[7] is None or r[7] not in by_node:
            continue
        lo, hi = bounds.get((r[0], r[7]), (-INF, INF))
        w = (r[2] + lo - MS if lo > -INF else -INF, r[2] + hi + MS if hi < INF else INF)
        xf.setdefault(r[7], []).append((r[2], r[4], r[5], r[6], *w))
        if r[4] in aborted_rooms:
            late.append((r[7], r[4], r[5], r[6], *w))
    xa = {n: np.array(sorted(v), np.int64).reshape(-1, 6) for n, v in xf.items()}
    rooms: set[int] = set()
    amb: list[tuple[str, int, int, int, int]] = []
    for recv, room, a, b, w0, w1 in sorted(late):
        ts, rm, sa, sb = arr[recv]
        i0, i1 = np.searchsorted(ts, [w0, w1], side="left")[0], np.searchsorted(ts, w1, side="right")
        m = (sa[i0:i1] < b) & (a < sb[i0:i1]) & (rm[i0:i1] != room)
        hit = set(rm[i0:i1][m].tolist())
        y = xa[recv]
        m = (y[:, 4] <= w1) & (w0 <= y[:, 5]) & (y[:, 2] < b) & (a < y[:, 3]) & (y[:, 1] != room)
        hit |= set(y[m, 1].tolist())
        if hit:
            rooms |= hit
            off = offsets[recv]
            amb.append((recv, a, b, w0 - off if w0 > -INF else -INF, w1 - off if w1 < INF else INF))
    return rooms, amb
