"""Findings stage, the allocator model's calibration (used by forensics.findings.likelihood): the walk
(forensics.findings.allocator_walk) on the instrumented decode nodes, from their logs alone, scored
against the pairs their page evidence proves; the likelihood per hit count (isotonic, with a weak
prior); and the tier: whether the likely subset's measured precision lets the headline print it.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, field

import duckdb
import numpy as np

from forensics.findings.allocator_walk import MEMBERS, lifecycle, walk_node

# a possible pair at least this likely is in the likely subset (the is_likely macro the findings and
# report queries read)
LIKELY = 0.5
# the headline prints the likely subset only where the bundle's own page evidence measured its precision
# at least this high, on at least this many true pairs (else it says why the logs cannot rank sources)
MIN_PRECISION = 0.8
MIN_TRUE_PAIRS = 20


def _isotonic(rate: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest to `rate` (pool adjacent violators): a pair more members
    found is never less likely."""
    vals, wts, sizes = [], [], []
    for r, w in zip(rate.tolist(), weight.tolist(), strict=True):
        vals.append(r)
        wts.append(w)
        sizes.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            w2 = wts[-2] + wts[-1]
            v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / w2
            s = sizes[-2] + sizes[-1]
            del vals[-1], wts[-1], sizes[-1]
            vals[-1], wts[-1], sizes[-1] = v, w2, s
    return np.repeat(vals, sizes)


@dataclass
class Calibration:
    """The walk scored against page evidence, per calibration node: per hit count 0..MEMBERS, the true
    pairs and the candidate pairs; and per room, how many replays put another room's KV in its pages
    (written: rooms, counts), which tier_reliability scores the signature's pool check by."""

    nodes: list[str]
    true: dict[str, np.ndarray]
    total: dict[str, np.ndarray]
    written: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def counts(self, nodes: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        pick = self.nodes if nodes is None else nodes
        zero = np.zeros(MEMBERS + 1, dtype=np.int64)
        return sum((self.true[n] for n in pick), zero), sum((self.total[n] for n in pick), zero)

    def rates(self, nodes: list[str] | None = None) -> np.ndarray | None:
        """The calibrated likelihood per hit count (from `nodes`, default all), or None: nothing to
        calibrate on. A prior of (h + 1/2) / (MEMBERS + 1) weighs 2 pairs per bucket, so that an empty
        bucket is not 0 or 1."""
        true, total = self.counts(nodes)
        if not total.sum():
            return None
        prior = (np.arange(MEMBERS + 1) + 0.5) / (MEMBERS + 1)
        return _isotonic((true + 2 * prior) / (total + 2), total + 2)


@dataclass
class Tier:
    """What the bundle's own evidence measured of the likely subset (likelihood >= LIKELY): its precision
    and recall on the calibration nodes' true pairs, held out by node where there are two or more (each
    node scored with the rates the others give), and whether the headline may print it."""

    calibrated: bool
    printed: bool
    held_out: bool
    precision: float | None
    recall: float | None
    likely_pairs: int
    true_pairs: int
    reason: str


def measure_tier(cal: Calibration) -> Tier:
    if not cal.nodes:
        return Tier(False, False, False, None, None, 0, 0, (
            "no decode node with page telemetry and placeholder responses to calibrate the allocator model "
            "on: its replays are not a likelihood, and the logs alone cannot rank the possible sources"
        ))  # fmt: skip
    held_out = len(cal.nodes) > 1
    hit = likely = true = 0
    for node in cal.nodes:
        rates = cal.rates([n for n in cal.nodes if n != node] if held_out else None)
        if rates is None:  # the other nodes gave nothing to calibrate on
            continue
        t, n = cal.counts([node])
        top = rates >= LIKELY
        hit, likely, true = hit + int(t[top].sum()), likely + int(n[top].sum()), true + int(t.sum())
    precision = hit / likely if likely else None
    recall = hit / true if true else None
    where = f"{'held out by node' if held_out else 'in sample, one node'} on {', '.join(cal.nodes)}"
    if true < MIN_TRUE_PAIRS:
        why = (
            f"too few true pairs to measure the likely subset ({true:,} on {', '.join(cal.nodes)}, "
            f"{MIN_TRUE_PAIRS} needed)"
        )
    elif precision is None:
        why = f"no pair reaches likelihood {LIKELY} ({where}): the replays do not single sources out"
    elif precision < MIN_PRECISION:
        why = (
            f"the likely subset's measured precision is {precision:.2f} ({where}; {MIN_PRECISION} needed): the "
            "allocator model cannot tell these sources apart"
        )
    else:
        return Tier(True, True, held_out, precision, recall, likely, true, (
            f"measured precision {precision:.2f} and recall {recall or 0:.2f} of the likely subset against "
            f"{true:,} true pairs ({where})"
        ))  # fmt: skip
    return Tier(True, False, held_out, precision, recall, likely, true, why)


def calibrate(
    con: duckdb.DuckDBPyConnection,
    nodes: list[tuple[str, int, int]],
    policies: list[tuple[int, int]],
    pool: Executor,
) -> Calibration:
    """The walk on each instrumented decode node, from its logs and the prefills' transfers alone, against
    the pairs its page evidence proves for its placeholder responses (exposures), bucket by hit count.
    A candidate is every room pre-allocated before the recipient's decode ended."""
    cal = Calibration([], {}, {})
    for node, ps, n_pages in nodes:
        lc = lifecycle(con, node)
        placeholder = lc.placeholder
        if not placeholder.any():
            continue
        true_b, total_b = np.zeros(MEMBERS + 1, dtype=np.int64), np.zeros(MEMBERS + 1, dtype=np.int64)
        pending = walk_node(con, node, lc, ps, n_pages, policies, pool)
        truth = con.execute(
            "SELECT DISTINCT recipient_room, source_room FROM exposures WHERE node = ? AND source_room IS NOT NULL",
            [node],
        ).fetchnumpy()
        w = pending.result()
        r_idx = np.searchsorted(lc.room, np.asarray(truth["recipient_room"], dtype=np.int64))
        s_idx = np.searchsorted(lc.room, np.asarray(truth["source_room"], dtype=np.int64))
        ok = (r_idx < len(lc.room)) & (s_idx < len(lc.room))
        ok[ok] &= (lc.room[r_idx[ok]] == truth["recipient_room"][ok]) & (lc.room[s_idx[ok]] == truth["source_room"][ok])
        ok[ok] &= placeholder[r_idx[ok]]
        n = len(lc.room)
        true_keys = np.unique(r_idx[ok] * n + s_idx[ok])
        mine = placeholder[w.recipient]
        keys, hits = w.recipient[mine] * n + w.source[mine], w.hits[mine]
        is_true = np.isin(keys, true_keys)
        np.add.at(total_b, hits, 1)
        np.add.at(true_b, hits[is_true], 1)
        true_b[0] += len(true_keys) - int(is_true.sum())
        allocs = np.sort(lc.times["t_alloc"])
        ends = lc.times["t_end"][placeholder]
        candidates = int(np.searchsorted(allocs, ends, side="right").sum()) - int(placeholder.sum())
        total_b[0] += max(candidates - len(keys), 0)
        cal.nodes.append(node)
        cal.true[node], cal.total[node] = true_b, total_b
        cal.written[node] = (lc.room, w.covered)
    return cal
