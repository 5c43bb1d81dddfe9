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

The walk is forensics.findings.allocator_walk, the calibration and the tier forensics.findings.calibration.
Reads node_lifecycle (node_lifecycle.sql). Writes: source_likelihood (node, recipient_room, source_room, hits),
likelihood_map (node, hits, likelihood), model_rooms (node, room), calibration_rooms (node, room: the
replays on the calibration nodes, for tier_reliability), allocator_model (one row per node),
source_tier (one row: what the evidence measured of the likely subset), and the macros likely_tier()
(whether the likely subset is printed) and is_likely(likelihood): the likely subset.
"""

from __future__ import annotations

from collections import deque

import duckdb
import numpy as np
import pyarrow as pa

from forensics.db import arrow_view, define_macros
from forensics.findings.allocator_policy import POLICIES, REAL, choose_policy
from forensics.findings.allocator_walk import (
    MEMBERS,
    Lifecycle,
    PendingWalks,
    lifecycle,
    tokens_before,
    walk_node,
    walk_pool,
)
from forensics.findings.calibration import LIKELY, Calibration, calibrate, measure_tier

# the likely subset exists only where the tier was measured good enough to print (source_tier): made
# by source_likelihood once source_tier holds this run's measure (forensics.db.define_macros)
MACROS = {
    "likely_tier()": "(SELECT likely_printed FROM source_tier)",
    "is_likely(likelihood)": f"likelihood >= {LIKELY!r} AND likely_tier()",
}
# the instrumented decode nodes the policy is learned and the likelihood calibrated on (those with the
# most placeholder responses first): enough to decide, at a bounded cost
LEARN_NODES = 2
# the nodes whose walks are submitted and not yet awaited: the next node is prepared while one runs
IN_FLIGHT = 2


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
    best, policy_basis = choose_policy(con, instrumented) if dark else (None, "")
    policies = [POLICIES[best]] if best else [POLICIES[k] for k in REAL]
    with walk_pool(con) as pool:
        cal = calibrate(con, instrumented, policies, pool) if dark else Calibration([], {}, {})
        rates = cal.rates()  # None: nothing calibrates the model, so its replays give no likelihood
        tier = measure_tier(cal)
        true, total = cal.counts()
        pairs: dict[str, list[np.ndarray]] = {k: [] for k in ("node", "recipient_room", "source_room", "hits")}
        rooms: dict[str, list[np.ndarray]] = {"node": [], "room": [], "written_members": [], "tokens_before": []}
        model: dict[str, list[object]] = {
            k: [] for k in ("node", "policy", "basis", "members", "calibration", "pool_tokens")
        }

        def finish(node: str, job: tuple[Lifecycle, PendingWalks, np.ndarray] | None) -> None:
            """The node's rows, in the order of `dark` (its walks awaited)."""
            model["node"].append(node)
            model["members"].append(MEMBERS)
            if job is None:
                model["policy"].append(None)
                model["basis"].append(f"no pool size or page size of {node} in its log: no allocator model")
                model["calibration"].append(None)
                model["pool_tokens"].append(None)
                return
            ps, n_pages = cfg[node]
            model["pool_tokens"].append(n_pages * ps)
            lc, pending, before = job
            w = pending.result()
            pairs["node"].append(np.full(len(w.hits), node, dtype=object))
            pairs["recipient_room"].append(lc.room[w.recipient])
            pairs["source_room"].append(lc.room[w.source])
            pairs["hits"].append(w.hits)
            rooms["node"].append(np.full(len(lc.room), node, dtype=object))
            rooms["room"].append(lc.room)
            rooms["written_members"].append(w.covered)
            rooms["tokens_before"].append(before)
            model["policy"].append(best or "all candidates")
            model["basis"].append(policy_basis + w.batch_basis)
            model["calibration"].append(
                f"calibrated on {', '.join(cal.nodes)}: {int(true.sum()):,} true pairs of their placeholder "
                f"responses among {int(total.sum()):,} candidates; {tier.reason}"
                if cal.nodes
                else f"uncalibrated: {tier.reason}; possible_sources.model_replays says how many of the {MEMBERS} "
                "replays found each pair, which ranks nothing"
            )

        # a node's members are submitted before the node before it is awaited, so that its events are drawn
        # while those walks run; no more than IN_FLIGHT nodes' drawn events are held at once (all of them
        # held together grow with the requests times MEMBERS, outside DuckDB's memory limit)
        queue: deque[tuple[str, tuple[Lifecycle, PendingWalks, np.ndarray] | None]] = deque()
        for node in dark:
            job = None
            if node in cfg:
                lc = lifecycle(con, node)
                job = (lc, walk_node(con, node, lc, *cfg[node], policies, pool), tokens_before(con, node, lc))
            queue.append((node, job))
            while sum(j is not None for _, j in queue) > IN_FLIGHT:
                finish(*queue.popleft())
        while queue:
            finish(*queue.popleft())

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
    calibrated = table(
        {
            "node": [np.full(len(r), n, dtype=object) for n, (r, _) in sorted(cal.written.items())],
            "room": [r for _, (r, _) in sorted(cal.written.items())],
            "written_members": [c for _, (_, c) in sorted(cal.written.items())],
        },
        {"node": s, "room": i64, "written_members": i64},
    )
    with (
        arrow_view(con, "likelihood_pairs", found),
        arrow_view(con, "likelihood_rooms", replayed),
        arrow_view(con, "likelihood_rates", rate),
        arrow_view(con, "likelihood_model", runs),
        arrow_view(con, "likelihood_tier", tiers),
        arrow_view(con, "likelihood_calibrated", calibrated),
    ):
        con.execute(
            f"CREATE OR REPLACE TABLE calibration_rooms AS SELECT *, {MEMBERS} AS members FROM likelihood_calibrated"
        )
        con.execute("CREATE OR REPLACE TABLE source_likelihood AS SELECT * FROM likelihood_pairs")
        con.execute("CREATE OR REPLACE TABLE model_rooms AS SELECT * FROM likelihood_rooms")
        con.execute("""CREATE OR REPLACE TABLE likelihood_map AS
            SELECT m.node, r.hits, r.likelihood FROM likelihood_model m CROSS JOIN likelihood_rates r
            WHERE m.policy IS NOT NULL""")
        con.execute("CREATE OR REPLACE TABLE allocator_model AS SELECT * FROM likelihood_model")
        con.execute("CREATE OR REPLACE TABLE source_tier AS SELECT * FROM likelihood_tier")
    define_macros(con, MACROS)  # likely_tier reads source_tier, which now holds this run's measure
