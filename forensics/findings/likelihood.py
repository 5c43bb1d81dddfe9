"""Findings stage, the likelihood of each possible source (spec section 7): a model of the decode node's
page allocator, replayed over the request lifecycle its logs give (forensics.ownership.kernels.allocator).

1. The policy. Each candidate of POLICIES replays the allocations and frees that the bundle's
   instrumented decode nodes logged (same engine build); the one that names the most allocated pages
   right is the policy. Without an instrumented decode node every candidate takes part, the ensemble's
   members drawing them in turn.
2. The walk. Per decode node of a response without page evidence: its rooms' lifecycles
   (node_lifecycle.sql) as events in time order. Where the prefill nodes have page telemetry, their
   transfer events name the slots of the decode node each transfer wrote: they fix the pages of every
   pre-allocation they cover (the recipient's own one-page transfer included). MEMBERS replays: the
   first with the logged times, each other with every time drawn within what the log allows (its
   resolution, the spread of the clock fits), so that orders the log cannot settle vary.
3. The likelihood. A pair found by h of the members gets a rate for h learned where the truth is in the
   bundle: the same walk on the instrumented decode nodes (their lifecycles from their logs only),
   scored against the pairs their page evidence proves, for their placeholder responses. Without an
   instrumented decode node nothing calibrates it: no likelihood is given (the replays that found a pair
   are listed, and rank nothing).
4. The tier. The likely subset (likelihood >= LIKELY) is printed only where its precision, measured on
   the calibration nodes (each held out from the rates the others give, where there are two), reaches
   MIN_PRECISION; else the headline says why the logs cannot rank the sources. A model that scored well
   on one simulator scored an empty likely tier on another's incidents: only the bundle's own page
   evidence may vouch for it.

Reads node_lifecycle (node_lifecycle.sql). Writes: source_likelihood (node, recipient_room, source_room, hits),
likelihood_map (node, hits, likelihood), model_rooms (node, room), allocator_model (one row per node),
source_tier (one row: what the evidence measured of the likely subset), and the macros likely_tier()
(whether the likely subset is printed) and is_likely(likelihood): the likely subset.
"""

from __future__ import annotations

import hashlib
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, define_macros, thread_count
from forensics.engines import sglang_allocator as sglang
from forensics.engines.sglang import DURATION_ROUNDING
from forensics.findings import batch_constraints
from forensics.ownership.kernels import allocator as alloc
from forensics.paths import load_query

MEMBERS = 8
# a possible pair at least this likely is in the likely subset (the is_likely macro the findings and
# report queries read)
LIKELY = 0.5
# the likely subset exists only where the tier was measured good enough to print (source_tier): made
# by source_likelihood once source_tier holds this run's measure (forensics.db.define_macros)
MACROS = {
    "likely_tier()": "(SELECT likely_printed FROM source_tier)",
    "is_likely(likelihood)": f"likelihood >= {LIKELY!r} AND likely_tier()",
}
# the headline prints the likely subset only where the bundle's own page evidence measured its precision
# at least this high, on at least this many true pairs (else it says why the logs cannot rank sources)
MIN_PRECISION = 0.8
MIN_TRUE_PAIRS = 20
# candidate policies: the rules SGLang's releases really run (forensics.engines.sglang_allocator, the
# port tested against SGLang's own classes): name -> (kernel policy, window); fifo: page size 1
# without need_sort, lifo: larger pages without need_sort (and 0.4.9 in PD mode), sorted-deferred:
# 0.5.4+ in PD mode (its merge slack per page size is set where it is scored, _choose_policy)
_KERNEL = {"fifo": alloc.FIFO, "lifo": alloc.LIFO, "deferred": alloc.DEFERRED}
POLICIES = {name: (_KERNEL[r.policy], 0) for name, r in sglang.real_rules().items()}
REAL = tuple(POLICIES)
# rules no SGLang release runs, after the real ones: candidates only where page telemetry scores them,
# so that bundles made by the simulator's old allocator (`coalesce`, the committed sample's) are learned
# with the rule they were made with; never drawn without such evidence
POLICIES |= {
    "lifo-coalesce-16": (alloc.LIFO, 16),
    "lifo-coalesce-64": (alloc.LIFO, 64),
    "lifo-coalesce-256": (alloc.LIFO, 256),
    "lowest-first": (alloc.SORTED, 0),
}
# allocated pages per instrumented node the policy is scored on (the choice settles long before), and
# the instrumented decode nodes the policy is learned and the likelihood calibrated on (those with the
# most placeholder responses first): enough to decide, at a bounded cost
SCORE_PAGES = 1 << 18
LEARN_NODES = 2


@dataclass
class Lifecycle:
    """One decode node's rooms (node_lifecycle.sql), as arrays in room order."""

    room: np.ndarray
    n_read: np.ndarray
    n_xfer: np.ndarray
    n_out: np.ndarray
    aborted: np.ndarray
    times: dict[str, np.ndarray]  # t_alloc, t_land, t_read, t_end, t_free (NaN: unknown)
    unc_alloc: np.ndarray
    unc_land: np.ndarray
    res: np.ndarray

    @property
    def placeholder(self) -> np.ndarray:
        """Rooms decoded over more tokens than their transfer wrote (the prompt replaced by a placeholder):
        the recipients whose attention the walk follows."""
        return ~self.aborted & (self.n_xfer < self.n_read)


def _lifecycle(con: duckdb.DuckDBPyConnection, node: str) -> Lifecycle:
    t = con.execute("SELECT * FROM node_lifecycle WHERE node = ? ORDER BY room", [node]).fetchnumpy()

    def col(name: str, dtype: type) -> np.ndarray:
        v = t[name]
        if np.ma.isMaskedArray(v):
            v = v.filled(np.nan if dtype is float else 0)
        return np.asarray(v, dtype=dtype)

    return Lifecycle(
        room=col("room", np.int64),
        n_read=col("n_read", np.int64),
        n_xfer=col("n_xfer", np.int64),
        n_out=col("n_out", np.int64),
        aborted=col("aborted", bool),
        times={k: col(k, float) for k in ("t_alloc", "t_land", "t_read", "t_end", "t_free")},
        unc_alloc=col("unc_alloc", float),
        unc_land=col("unc_land", float),
        res=col("res", float),
    )


def _pages_of(start: np.ndarray, end: np.ndarray, ps: int) -> tuple[np.ndarray, np.ndarray]:
    """The pages each slot range [start, end) touches, concatenated, and how many per range."""
    first, last = start // ps, (end - 1) // ps
    counts = np.maximum(last - first + 1, 0)
    step = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(first, counts) + step, counts


def _anchors(con: duckdb.DuckDBPyConnection, node: str, lc: Lifecycle, ps: int, n_pages: int) -> tuple[np.ndarray, ...]:
    """Per room (CSR over lc's order): the pages of its pre-allocation the prefill's transfer events name,
    and the exact slot ranges its transfer wrote."""
    t = con.execute(load_query("findings", "transfer_anchors"), {"node": node}).fetchnumpy()
    room = np.asarray(t["room"], dtype=np.int64)
    start, end = np.asarray(t["start"], dtype=np.int64), np.asarray(t["end"], dtype=np.int64)
    idx = np.searchsorted(lc.room, room)
    ok = (idx < len(lc.room)) & (start >= 0) & (end > start) & (end <= (n_pages + 1) * ps)
    ok[ok] &= lc.room[idx[ok]] == room[ok]
    idx, start, end = idx[ok], start[ok], end[ok]
    order = np.lexsort((start, idx))
    idx, start, end = idx[order], start[order], end[order]
    x_ptr = np.zeros(len(lc.room) + 1, dtype=np.int64)
    np.add.at(x_ptr, idx + 1, 1)
    x_ptr = np.cumsum(x_ptr)
    # the pages those ranges touch, per room (ascending), at most its pre-allocation's page count
    page, counts = _pages_of(start, end, ps)
    key = np.unique(np.repeat(idx, counts) * (n_pages + 2) + page)
    owner, page = key // (n_pages + 2), key % (n_pages + 2)
    heads = np.searchsorted(owner, owner)  # the first of each room's pages
    rank = np.arange(len(owner)) - heads
    keep = (page >= 1) & (page <= n_pages) & (rank < (-(-lc.n_read // ps))[owner])
    owner, page = owner[keep], page[keep]
    a_ptr = np.zeros(len(lc.room) + 1, dtype=np.int64)
    np.add.at(a_ptr, owner + 1, 1)
    return np.cumsum(a_ptr), page.astype(np.int32), x_ptr, start, end


def _events(lc: Lifecycle, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """The walk's events in time order: the logged times (rng None), or each drawn within what the log
    allows. A finished room's times all come from one line (its time) and its durations, so they move
    together by the line's resolution, and each by its duration's rounding; an aborted room's
    pre-allocation and landing are estimates of their own spread."""
    n = len(lc.room)
    t = {k: v.copy() for k, v in lc.times.items()}
    if rng is not None:
        shift = rng.uniform(-0.5, 0.5, n) * lc.res
        for k in ("t_alloc", "t_land", "t_read", "t_end", "t_free"):
            t[k] += shift + rng.uniform(-DURATION_ROUNDING, DURATION_ROUNDING, n) * (k != "t_free")
        ab = lc.aborted
        t["t_alloc"][ab] += rng.uniform(-1, 1, int(ab.sum())) * lc.unc_alloc[ab]
        t["t_land"][ab] += rng.uniform(-1, 1, int(ab.sum())) * lc.unc_land[ab]
    # a room's own events keep their order: pre-allocation first, then landing before decode starts
    later = np.fmin(np.fmin(t["t_land"], t["t_read"]), np.fmin(t["t_end"], t["t_free"]))
    t["t_alloc"] = np.fmin(t["t_alloc"], later - 1e-7)
    finished = ~lc.aborted
    t["t_land"][finished] = np.fmin(t["t_land"][finished], t["t_read"][finished] - 1e-8)
    kinds = [
        (alloc.LC_ALLOC_IN, t["t_alloc"]),
        (alloc.LC_LAND, t["t_land"]),
        (alloc.LC_READ, np.where(finished, t["t_read"], np.nan)),
        (alloc.LC_END, np.where(finished, t["t_end"], np.nan)),
        (alloc.LC_FREE, np.where(lc.aborted, t["t_free"], np.nan)),
    ]
    time = np.concatenate([v for _, v in kinds])
    kind = np.concatenate([np.full(n, k, dtype=np.int8) for k, _ in kinds])
    room = np.tile(np.arange(n, dtype=np.int32), len(kinds))
    known = ~np.isnan(time)
    time, kind, room = time[known], kind[known], room[known]
    order = np.lexsort((room, kind, time))
    return kind[order], room[order]


def _tokens_before(con: duckdb.DuckDBPyConnection, node: str, lc: Lifecycle) -> np.ndarray:
    """Per room: the tokens the node's other rooms were given (prompt and output) after its last start-up
    and before this room's pre-allocation, by the logged times: how far the pool may have been written
    when the room got its pages (said beside a signature the model cannot show written over)."""
    starts = np.sort(
        np.asarray(
            [
                r[0]
                for r in con.execute(
                    """SELECT epoch_us(ts) / 1e6 FROM engine_lines
                    WHERE node = ? AND kind IN ('server_args', 'startup') AND ts IS NOT NULL""",
                    [node],
                ).fetchall()
            ],
            dtype=float,
        )
    )
    t = np.nan_to_num(lc.times["t_alloc"], nan=np.inf)
    order = np.argsort(t, kind="stable")
    given = (lc.n_read + lc.n_out)[order]
    cum = np.concatenate(([0], np.cumsum(given)))  # cum[i]: the tokens of the rooms before the i-th
    epoch = np.searchsorted(starts, t[order], side="right")  # the start-ups before each room
    first = np.searchsorted(epoch, epoch, side="left")  # the first room after the same start-up
    out = np.empty(len(t), dtype=np.int64)
    out[order] = cum[np.arange(len(t))] - cum[first]
    return out


@dataclass
class Walks:
    """The ensemble's result on one node: per (recipient, source) index pair, the members that found it."""

    recipient: np.ndarray
    source: np.ndarray
    hits: np.ndarray
    batch_basis: str = ""  # what the node's printed batch lines showed (forensics.findings.batch_constraints)
    # per room (lc's order): the members in whose replay some other room's KV was in its pages
    covered: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _walk_node(
    con: duckdb.DuckDBPyConnection, node: str, lc: Lifecycle, ps: int, n_pages: int, policies: list[tuple[int, int]]
) -> Walks:
    # --- batch lines: the node's printed pool occupancy against this lifecycle, and the aborted rooms'
    # pre-allocation times it settles (forensics.findings.batch_constraints; nothing without the lines)
    lc, batch_basis = batch_constraints.constrain(con, node, lc, ps)
    a_ptr, a_pages, x_ptr, x_start, x_end = _anchors(con, node, lc, ps, n_pages)
    n_in = -(-lc.n_read // ps)
    watch = ~lc.aborted  # placeholders read others' data; any room may receive a late write
    rng = np.random.default_rng(zlib.crc32(node.encode()))  # the same bundle gives the same likelihoods
    # the walk is deterministic: a member whose draws leave the events in an order walked already
    # (events far apart for the log's resolution) shares that walk's result
    walked: dict[tuple[int, int, bytes], Future[np.ndarray]] = {}
    members: list[Future[np.ndarray]] = []

    def one(pol: int, window: int, kind: np.ndarray, room: np.ndarray) -> np.ndarray:
        pairs = alloc.walk(
            n_pages, ps, pol, window, kind, room, n_in, lc.n_read, lc.n_xfer, lc.n_out, watch,
            a_ptr, a_pages, x_ptr, x_start, x_end,
        )  # fmt: skip
        return np.unique(pairs[:, 0].astype(np.int64) * len(lc.room) + pairs[:, 1])

    # the walk releases the GIL: members run side by side, in as many threads as the run was given
    with ThreadPoolExecutor(max_workers=thread_count(con)) as pool:
        for m in range(MEMBERS):
            kind, room = _events(lc, None if m == 0 else rng)
            pol, window = policies[m % len(policies)]
            order = (pol, window, hashlib.sha256(kind.tobytes() + room.tobytes()).digest())
            if order not in walked:
                walked[order] = pool.submit(one, pol, window, kind, room)
            members.append(walked[order])
        found = [f.result() for f in members]
    keys, hits = np.unique(np.concatenate(found), return_counts=True)
    covered = np.zeros(len(lc.room), dtype=np.int64)
    for f in found:
        covered[np.unique(f // len(lc.room))] += 1
    return Walks(keys // len(lc.room), keys % len(lc.room), hits, batch_basis, covered)


def _batches(con: duckdb.DuckDBPyConnection, node: str, ps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An instrumented node's allocations and frees as batches (op, CSR of pages), for policy_accuracy."""
    t = con.execute(load_query("findings", "alloc_batches"), {"node": node}).fetchnumpy()
    op, room = np.asarray(t["op"], dtype=np.int8), np.asarray(t["room"], dtype=np.int64)
    start, end = np.asarray(t["start"], dtype=np.int64), np.asarray(t["end"], dtype=np.int64)
    new = np.ones(len(op), dtype=bool)
    new[1:] = (op[1:] != op[:-1]) | (room[1:] != room[:-1])
    batch = np.cumsum(new) - 1
    pages, counts = _pages_of(start, end, ps)
    pages = pages.astype(np.int32)
    b_ptr = np.zeros(int(new.sum()) + 1, dtype=np.int64)
    np.add.at(b_ptr, batch + 1, counts)
    b_ptr = np.cumsum(b_ptr)
    b_op = op[new]
    keep = int(np.searchsorted(b_ptr, SCORE_PAGES, side="right")) - 1  # whole batches up to SCORE_PAGES pages
    if keep < len(b_op):
        b_op, b_ptr = b_op[:keep], b_ptr[: keep + 1]
        pages = pages[: b_ptr[-1]]
    return b_op, b_ptr, pages


def _policy_by_version(con: duckdb.DuckDBPyConnection) -> tuple[str | None, str]:
    """Without a decode node to learn from: the rule the release bundle.toml names runs on decode nodes
    of the bundle's page sizes (forensics.engines.sglang_allocator.rule), else every real rule in turn."""
    row = con.execute("SELECT version FROM engine_build WHERE version IS NOT NULL").fetchone()
    none = "no decode node with page telemetry to learn the policy from"
    if row is None:
        return None, f"{none}, no engine version in bundle.toml: every candidate policy in turn"
    release = sglang.known_release(row[0])
    if release is None:
        return None, f"{none}, SGLang {row[0]} older than every known release: every candidate policy in turn"
    q = "SELECT DISTINCT coalesce(page_size, 1) FROM node_config WHERE role = 'decode' ORDER BY 1"
    sizes = [r[0] for r in con.execute(q).fetchall()] or [1]
    rules = {sglang.rule(release, ps, "decode").name for ps in sizes}
    if len(rules) > 1:
        return None, (
            f"{none}: SGLang {row[0]} runs {' and '.join(sorted(rules))} on the decode nodes' page sizes "
            f"{', '.join(map(str, sizes))}: every candidate policy in turn"
        )
    (name,) = rules
    return name, (
        f"{none}: SGLang {row[0]}'s rule for decode nodes of page size {', '.join(map(str, sizes))} "
        f"(bundle.toml [engine] version; {sglang.rule(release, sizes[0], 'decode').source})"
    )


def _choose_policy(con: duckdb.DuckDBPyConnection, nodes: list[tuple[str, int, int]]) -> tuple[str | None, str]:
    """The candidate that names the most allocated pages right on the instrumented decode nodes, and
    what it was chosen on; None when there is no such node."""
    score = dict.fromkeys(POLICIES, 0)
    total = 0
    for node, ps, n_pages in nodes:
        b_op, b_ptr, pages = _batches(con, node, ps)
        ok = (pages >= 1) & (pages <= n_pages)
        if not len(b_op) or not ok.all():
            continue
        for name, (pol, window) in POLICIES.items():
            if pol == alloc.DEFERRED:  # the free pages an allocation wants beyond its own before it merges
                window = sglang.merge_slack(ps)
            hit, n = alloc.policy_accuracy(n_pages, pol, window, b_op, b_ptr, pages, *alloc.new_state(n_pages))
            score[name] += hit
        total += n
    if not total:
        return _policy_by_version(con)
    best = max(POLICIES, key=lambda k: score[k])  # the first of equals, in POLICIES order
    ranked = ", ".join(f"{k} {score[k] / total:.3f}" for k in sorted(POLICIES, key=lambda k: -score[k]))
    return best, (
        f"policy {best}, learned from {', '.join(n for n, _, _ in nodes)}: share of {total:,} allocated pages "
        f"each candidate names right when replayed over their page events: {ranked}"
    )


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
    pairs and the candidate pairs."""

    nodes: list[str]
    true: dict[str, np.ndarray]
    total: dict[str, np.ndarray]

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


def _measure_tier(cal: Calibration) -> Tier:
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


def _calibrate(
    con: duckdb.DuckDBPyConnection, nodes: list[tuple[str, int, int]], policies: list[tuple[int, int]]
) -> Calibration:
    """The walk on each instrumented decode node, from its logs and the prefills' transfers alone, against
    the pairs its page evidence proves for its placeholder responses (exposures), bucket by hit count.
    A candidate is every room pre-allocated before the recipient's decode ended."""
    cal = Calibration([], {}, {})
    for node, ps, n_pages in nodes:
        lc = _lifecycle(con, node)
        placeholder = lc.placeholder
        if not placeholder.any():
            continue
        true_b, total_b = np.zeros(MEMBERS + 1, dtype=np.int64), np.zeros(MEMBERS + 1, dtype=np.int64)
        w = _walk_node(con, node, lc, ps, n_pages, policies)
        truth = con.execute(
            "SELECT DISTINCT recipient_room, source_room FROM exposures WHERE node = ? AND source_room IS NOT NULL",
            [node],
        ).fetchnumpy()
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
    return cal


def source_likelihood(con: duckdb.DuckDBPyConnection) -> None:
    """source_likelihood, likelihood_map, model_rooms and allocator_model for the decode nodes of the
    responses without page evidence (signature_responses)."""
    cfg = {
        node: (ps, pool // ps)
        for node, ps, pool in con.execute("""SELECT node, coalesce(page_size, 1), pool_tokens FROM node_config
            WHERE role = 'decode' AND pool_tokens > 0 ORDER BY node""").fetchall()
    }
    dark = [
        r[0]
        for r in con.execute("""SELECT node FROM signature_responses UNION
            SELECT node FROM late_write_responses ORDER BY node""").fetchall()
    ]
    instrumented = [  # the instrumented decode nodes with the most placeholder responses first
        (node, *cfg[node])
        for (node,) in con.execute("""SELECT t.node FROM telemetry_nodes t
            LEFT JOIN node_lifecycle l ON l.node = t.node AND NOT l.aborted AND l.n_xfer < l.n_read
            GROUP BY t.node ORDER BY count(l.room) DESC, t.node""").fetchall()
        if node in cfg
    ][:LEARN_NODES]
    best, policy_basis = _choose_policy(con, instrumented) if dark else (None, "")
    policies = [POLICIES[best]] if best else [POLICIES[k] for k in REAL]
    cal = _calibrate(con, instrumented, policies) if dark else Calibration([], {}, {})
    rates = cal.rates()  # None: nothing calibrates the model, so its replays give no likelihood
    tier = _measure_tier(cal)
    true, total = cal.counts()
    pairs: dict[str, list[np.ndarray]] = {k: [] for k in ("node", "recipient_room", "source_room", "hits")}
    rooms: dict[str, list[np.ndarray]] = {"node": [], "room": [], "written_members": [], "tokens_before": []}
    model: dict[str, list[object]] = {
        k: [] for k in ("node", "policy", "basis", "members", "calibration", "pool_tokens")
    }
    for node in dark:
        model["node"].append(node)
        model["members"].append(MEMBERS)
        if node not in cfg:
            model["policy"].append(None)
            model["basis"].append(f"no pool size or page size of {node} in its log: no allocator model")
            model["calibration"].append(None)
            model["pool_tokens"].append(None)
            continue
        ps, n_pages = cfg[node]
        model["pool_tokens"].append(n_pages * ps)
        lc = _lifecycle(con, node)
        w = _walk_node(con, node, lc, ps, n_pages, policies)
        pairs["node"].append(np.full(len(w.hits), node, dtype=object))
        pairs["recipient_room"].append(lc.room[w.recipient])
        pairs["source_room"].append(lc.room[w.source])
        pairs["hits"].append(w.hits)
        rooms["node"].append(np.full(len(lc.room), node, dtype=object))
        rooms["room"].append(lc.room)
        rooms["written_members"].append(w.covered)
        rooms["tokens_before"].append(_tokens_before(con, node, lc))
        model["policy"].append(best or "all candidates")
        model["basis"].append(policy_basis + w.batch_basis)
        model["calibration"].append(
            f"calibrated on {', '.join(cal.nodes)}: {int(true.sum()):,} true pairs of their placeholder "
            f"responses among {int(total.sum()):,} candidates; {tier.reason}"
            if cal.nodes
            else f"uncalibrated: {tier.reason}; possible_sources.model_replays says how many of the {MEMBERS} "
            "replays found each pair, which ranks nothing"
        )

    def table(cols: dict[str, list[np.ndarray]], types: dict[str, pa.DataType]) -> pa.Table:
        return pa.table(
            {k: pa.array(np.concatenate(v) if v else np.zeros(0, dtype=object), type=types[k]) for k, v in cols.items()}
        )

    i64, s = pa.int64(), pa.string()
    found = table(pairs, {"node": s, "recipient_room": i64, "source_room": i64, "hits": i64})
    replayed = table(rooms, {"node": s, "room": i64, "written_members": i64, "tokens_before": i64})
    rate = pa.table(
        {"hits": np.arange(MEMBERS + 1 if rates is not None else 0), "likelihood": rates if rates is not None else []},
        schema=pa.schema({"hits": i64, "likelihood": pa.float64()}),
    )
    tiers = pa.table(
        {
            "calibrated": [tier.calibrated],
            "likely_printed": [tier.printed],
            "held_out": [tier.held_out],
            "calibration_nodes": [", ".join(cal.nodes) or None],
            "measured_precision": [None if tier.precision is None else round(tier.precision, 3)],
            "measured_recall": [None if tier.recall is None else round(tier.recall, 3)],
            "measured_likely_pairs": [tier.likely_pairs],
            "measured_true_pairs": [tier.true_pairs],
            "reason": [tier.reason if dark else None],
        }
    )
    runs = pa.table({k: pa.array(v, type=i64 if k in ("members", "pool_tokens") else s) for k, v in model.items()})
    with (
        arrow_view(con, "likelihood_pairs", found),
        arrow_view(con, "likelihood_rooms", replayed),
        arrow_view(con, "likelihood_rates", rate),
        arrow_view(con, "likelihood_model", runs),
        arrow_view(con, "likelihood_tier", tiers),
    ):
        con.execute("CREATE OR REPLACE TABLE source_likelihood AS SELECT * FROM likelihood_pairs")
        con.execute("CREATE OR REPLACE TABLE model_rooms AS SELECT * FROM likelihood_rooms")
        con.execute("""CREATE OR REPLACE TABLE likelihood_map AS
            SELECT m.node, r.hits, r.likelihood FROM likelihood_model m CROSS JOIN likelihood_rates r
            WHERE m.policy IS NOT NULL""")
        con.execute("CREATE OR REPLACE TABLE allocator_model AS SELECT * FROM likelihood_model")
        con.execute("CREATE OR REPLACE TABLE source_tier AS SELECT * FROM likelihood_tier")
    define_macros(con, MACROS)  # likely_tier reads source_tier, which now holds this run's measure
