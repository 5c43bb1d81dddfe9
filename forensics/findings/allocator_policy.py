"""Findings stage, the allocator model's policy (used by forensics.findings.likelihood): the candidate
rules (POLICIES), the one that names the most allocated pages right when replayed over the instrumented
decode nodes' page events (alloc_batches.sql), else the rule of the release bundle.toml names."""

from __future__ import annotations

import duckdb
import numpy as np

from forensics.engines import sglang_allocator as sglang
from forensics.findings.allocator_walk import pages_of
from forensics.ownership.kernels import allocator as alloc
from forensics.paths import load_query

# candidate policies: the rules SGLang's releases really run (forensics.engines.sglang_allocator, the
# port tested against SGLang's own classes): name -> (kernel policy, window); fifo: page size 1
# without need_sort, lifo: larger pages without need_sort (and 0.4.9 in PD mode), sorted-deferred:
# 0.5.4+ in PD mode (its merge slack per page size is set where it is scored, choose_policy)
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
# allocated pages per instrumented node the policy is scored on: the choice settles long before
SCORE_PAGES = 1 << 18


def _batches(con: duckdb.DuckDBPyConnection, node: str, ps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An instrumented node's allocations and frees as batches (op, CSR of pages), for policy_accuracy."""
    t = con.execute(load_query("findings", "alloc_batches"), {"node": node}).fetchnumpy()
    op, room = np.asarray(t["op"], dtype=np.int8), np.asarray(t["room"], dtype=np.int64)
    start, end = np.asarray(t["start"], dtype=np.int64), np.asarray(t["end"], dtype=np.int64)
    new = np.ones(len(op), dtype=bool)
    new[1:] = (op[1:] != op[:-1]) | (room[1:] != room[:-1])
    batch = np.cumsum(new) - 1
    pages, counts = pages_of(start, end, ps)
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


def choose_policy(con: duckdb.DuckDBPyConnection, nodes: list[tuple[str, int, int]]) -> tuple[str | None, str]:
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
