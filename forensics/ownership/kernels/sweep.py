"""Which holdings an event hit: a sweep over one node's events in order (forensics.ownership.steps.overlaps
drives it), so the cost is the events plus the pairs found, whatever the number of rooms in flight.

A holding holds slots [start, end) strictly between two event ranks (kg_a < kg < kg_f); a query (an
allocation, an anomalous write) at rank kg hits every holding alive then whose slots overlap its own.
The live holdings sit in buckets of BUCKET slots, each a linked list of the holdings overlapping it;
a query walks the buckets its slots span, unlinking the holdings that have ended on the way (the
sweep only moves forward, so an ended holding never comes back).
"""

from __future__ import annotations

import numpy as np
from numba import njit

BUCKET = 4096  # slots per bucket: a few pages of the largest page size, many of the smallest


@njit(cache=True)
def hits(
    q_kg: np.ndarray,
    q_start: np.ndarray,
    q_end: np.ndarray,
    h_kg_a: np.ndarray,
    h_kg_f: np.ndarray,
    h_start: np.ndarray,
    h_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(query index, holding index) of every pair with h_kg_a < q_kg < h_kg_f and overlapping slots, in
    query-rank order. Slots are non-negative."""
    qo = np.argsort(q_kg, kind="mergesort")
    ho = np.argsort(h_kg_a, kind="mergesort")
    top = 0
    for i in range(len(h_end)):
        top = max(top, h_end[i])
    for i in range(len(q_end)):
        top = max(top, q_end[i])
    n_buckets = top // BUCKET + 1
    head = np.full(n_buckets, -1, dtype=np.int64)
    # the list cells: holding, next; freed cells are reused
    cap = 1024
    cell_h = np.zeros(cap, dtype=np.int64)
    cell_next = np.zeros(cap, dtype=np.int64)
    free = -1
    used = 0
    out_q = np.zeros(1024, dtype=np.int64)
    out_h = np.zeros(1024, dtype=np.int64)
    n_out = 0
    seen = np.full(len(h_end), -1, dtype=np.int64)  # the last query a holding was reported for
    hi = 0
    for qi in range(len(qo)):
        q = qo[qi]
        kg = q_kg[q]
        while hi < len(ho) and h_kg_a[ho[hi]] < kg:  # holdings begun before this query: alive from now
            h = ho[hi]
            hi += 1
            if h_kg_f[h] <= kg or h_end[h] <= h_start[h]:
                continue
            for b in range(h_start[h] // BUCKET, (h_end[h] - 1) // BUCKET + 1):
                if free >= 0:
                    c = free
                    free = cell_next[c]
                else:
                    if used == cap:
                        cap *= 2
                        grown_h = np.zeros(cap, dtype=np.int64)
                        grown_n = np.zeros(cap, dtype=np.int64)
                        grown_h[:used] = cell_h[:used]
                        grown_n[:used] = cell_next[:used]
                        cell_h, cell_next = grown_h, grown_n
                    c = used
                    used += 1
                cell_h[c] = h
                cell_next[c] = head[b]
                head[b] = c
        if q_end[q] <= q_start[q]:
            continue
        for b in range(q_start[q] // BUCKET, (q_end[q] - 1) // BUCKET + 1):
            prev = -1
            c = head[b]
            while c >= 0:
                h = cell_h[c]
                nxt = cell_next[c]
                if h_kg_f[h] <= kg:  # ended: unlink the cell, for good
                    if prev < 0:
                        head[b] = nxt
                    else:
                        cell_next[prev] = nxt
                    cell_next[c] = free
                    free = c
                else:
                    if seen[h] != q and h_start[h] < q_end[q] and h_end[h] > q_start[q]:
                        seen[h] = q
                        if n_out == len(out_q):
                            grown_q = np.zeros(2 * n_out, dtype=np.int64)
                            grown_o = np.zeros(2 * n_out, dtype=np.int64)
                            grown_q[:n_out] = out_q
                            grown_o[:n_out] = out_h
                            out_q, out_h = grown_q, grown_o
                        out_q[n_out] = q
                        out_h[n_out] = h
                        n_out += 1
                    prev = c
                c = nxt
    return out_q[:n_out], out_h[:n_out]
