"""forensics.ownership.steps.landing: the receiver seqs around each landing window, against their definition
(max seq stamped at or before land_lo, min seq stamped at or after land_hi), for stamps that rise
with seq (the shortcut) and for stamps out of order (sorted first), with ties and open bounds."""

from __future__ import annotations

import numpy as np
import pytest

from forensics.ownership.steps.landing import _receiver, _receiver_chunks


def brute(t, seq, lo, hi):
    out = []
    for a, b in zip(lo, hi, strict=True):
        before = [s for ts, s in zip(t, seq, strict=True) if a is not None and ts <= a]
        after = [s for ts, s in zip(t, seq, strict=True) if b is not None and ts >= b]
        out.append((max(before) if before else None, min(after) if after else None))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_receiver_seqs_match_the_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    seq = np.arange(100, 100 + n, dtype=np.int64)
    t = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)  # rising, with ties
    if seed % 2:  # clock steps back now and then: stamps out of seq order
        t = t + rng.integers(-4, 5, n)
    m = 40
    lo = rng.integers(-3, int(t.max(initial=0)) + 4, m)
    hi = lo + rng.integers(0, 6, m)
    lo_mask = rng.random(m) < 0.15
    ev = {"t": t, "seq": seq}
    x = {
        "link": np.arange(m),
        "lo": np.ma.masked_array(lo, mask=lo_mask),
        "hi": np.ma.masked_array(hi, mask=lo_mask),
    }
    got = _receiver(ev, x).to_pydict()
    want = brute(
        t,
        seq,
        [None if k else int(v) for v, k in zip(lo, lo_mask, strict=True)],
        [None if k else int(v) for v, k in zip(hi, lo_mask, strict=True)],
    )
    assert list(zip(got["seq_max"], got["seq_min"], strict=True)) == want


@pytest.mark.parametrize("seed", range(8))
def test_streamed_receiver_seqs_match_in_any_chunking(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 80))
    seq = np.arange(7, 7 + n, dtype=np.int64) * 2  # rising, not contiguous
    t = np.cumsum(rng.integers(0, 3, n)).astype(np.int64)  # rising, with ties across chunk cuts
    m = 50
    lo = rng.integers(-3, int(t.max()) + 4, m)
    hi = lo + rng.integers(0, 6, m)
    mask = rng.random(m) < 0.15
    x = {
        "link": np.arange(m),
        "lo": np.ma.masked_array(lo, mask=mask),
        "hi": np.ma.masked_array(hi, mask=mask),
    }
    cuts = sorted({0, n, *rng.integers(0, n + 1, int(rng.integers(0, 6))).tolist()})
    batches = [(t[a:b], seq[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    got = _receiver_chunks(iter(batches), x)
    assert got is not None
    assert got.to_pydict() == _receiver({"t": t, "seq": seq}, x).to_pydict()
    if n > 2:  # a stamp that steps back: the stream gives up, the sorted path takes over
        t2 = t.copy()
        t2[n // 2] = t2[n // 2 - 1] - 1
        assert _receiver_chunks(iter([(t2, seq)]), x) is None


# the definition window_hits replaced: receiver events strictly inside a window touching its slots
HITS_SQL = """SELECT DISTINCT g.sender, g.xseq FROM transfer_landing g
    JOIN page_events v ON v.node = g.receiver AND v.seq > g.seq_lo AND v.seq < g.seq_hi AND v.op <> 'transfer'
     AND v.start < g."end" AND v."end" > g.start
    ORDER BY ALL"""


@pytest.mark.parametrize("seed", range(6))
def test_window_hits_match_the_definition(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import forensics.ownership.execution.streams as streams
    import forensics.ownership.steps.landing as landing
    from forensics.db import connect, run_query

    rng = np.random.default_rng(seed)
    con = connect(":memory:")
    n = 4000
    seq = rng.permutation(n) if seed % 3 == 0 else np.arange(n)  # stored out of order, or in order
    if seed % 3 == 1:  # seqs that repeat and jump
        seq = np.sort(rng.integers(0, n // 2, n)) * 3
    slots = int(rng.choice([7, 200, 5000]))
    start = rng.integers(0, slots, n)
    con.execute(
        """CREATE TABLE page_events AS SELECT unnest($node) AS node, unnest($seq) AS seq, unnest($op) AS op,
           unnest($start) AS start, unnest($end) AS "end", TIMESTAMPTZ '2026-01-01 00:00:00+00' AS ts""",
        {
            "node": rng.choice(["a", "b"], n).tolist(),
            "seq": seq.tolist(),
            "op": rng.choice(["alloc", "read", "write", "transfer"], n).tolist(),
            "start": start.tolist(),
            "end": (start + rng.integers(1, 20, n)).tolist(),
        },
    )
    m = 600
    lo = rng.integers(-5, int(seq.max()) + 5, m)
    xs = rng.integers(0, slots + 30, m)  # some beyond every event's slots
    con.execute(
        """CREATE TABLE transfer_landing AS SELECT unnest($s) AS sender, unnest($x) AS xseq, unnest($r) AS receiver,
           unnest($lo) AS seq_lo, unnest($hi) AS seq_hi, unnest($xs) AS start, unnest($xe) AS "end" """,
        {
            "s": ["p"] * m,
            "x": list(range(m)),
            "r": rng.choice(["a", "b", "c"], m).tolist(),
            "lo": [None if rng.random() < 0.05 else v for v in lo.tolist()],  # open: never ambiguous
            "hi": (lo + rng.choice([0, 1, 2, 5, 40, 1024, 1025, 3000], m)).tolist(),  # narrow and wide
            "xs": xs.tolist(),
            "xe": (xs + rng.integers(1, 30, m)).tolist(),
        },
    )
    monkeypatch.setattr(streams, "CHUNK_EVENTS", int(rng.choice([50, 333, 10_000])))
    run_query(con, "ownership", "telemetry_nodes")
    landing.window_hits(con)
    got = con.execute("SELECT * FROM landing_window_hits ORDER BY ALL").fetchall()
    want = con.execute(HITS_SQL).fetchall()
    assert got == want and 0 < len(want) < m


# the definition: every transfer ranked within its (receiver, seq_lo) by the start of its landing
# window on the receiver's clock (unbounded last), never by the sender's own stamp
SUB_SQL = """SELECT receiver, seq_lo * 2 + 1 AS pos,
       row_number() OVER (PARTITION BY receiver, seq_lo ORDER BY land_lo NULLS LAST, sender, xseq) AS sub,
       sender, xseq
    FROM transfer_landing ORDER BY ALL"""


@pytest.mark.parametrize("seed", range(4))
def test_timeline_ranks_only_transfers_that_share_a_landing(seed: int) -> None:
    from forensics.db import connect, run_query

    rng = np.random.default_rng(200 + seed)
    con = connect(":memory:")
    m = 500
    # few distinct landings per receiver: many transfers share one, with ties on the stamp
    con.execute(
        """CREATE TABLE transfer_landing AS SELECT unnest($s) AS sender, unnest($x) AS xseq, unnest($r) AS receiver,
           unnest($lo) AS seq_lo, TIMESTAMPTZ '2026-08-29 10:00:00+00' + to_microseconds(unnest($t)) AS xts,
           1::BIGINT AS room, 0::BIGINT AS start, 1::BIGINT AS "end",
           CASE WHEN unnest($w) >= 0 THEN TIMESTAMPTZ '2026-08-29 10:00:01+00' + to_microseconds(unnest($w)) END
             AS land_lo,
           NULL::TIMESTAMPTZ AS land_hi, false AS ambiguous""",
        {
            "s": rng.choice(["p0", "p1"], m).tolist(),
            "x": rng.permutation(m).tolist(),
            "r": rng.choice(["d0", "d1"], m).tolist(),
            "lo": rng.integers(0, 400 if seed % 2 else 60, m).tolist(),
            "t": rng.integers(0, 5, m).tolist(),
            "w": rng.integers(-1, 4, m).tolist(),  # -1: an unbounded window (no land_lo)
        },
    )
    con.execute(
        "CREATE TABLE telemetry_nodes AS SELECT 'd0' AS node, 1 AS own_first_seq, 9 AS own_last_seq, 5 AS own_max_end"
    )
    con.execute("CREATE TABLE node_index AS SELECT unnest(['d0', 'd1']) AS node, unnest([1, 2])::BIGINT << 40 AS base")
    run_query(con, "ownership", "timeline")
    got = con.execute("SELECT node, pos, sub, sender, xseq FROM timeline_xfer ORDER BY ALL").fetchall()
    want = con.execute(SUB_SQL).fetchall()
    assert got == want
    subs = {r[2] for r in want}
    assert 1 in subs and max(subs) > 2  # transfers alone and transfers sharing a landing
