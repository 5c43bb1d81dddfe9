"""`forensics simulate --scale --page-events`: page-event bundles at a benchmark's volume, streamed with
bounded memory (the benchmarks' bundles: benchmarks/run.py, shapes.py, the replay peers). No
ground-truth replay: OUT/truth/summary.json holds what the run drew (events per node, placeholders,
aborts, the sizing), not the exposures.

- `uniform` (uniform.py, numpy): N prefill and N decode nodes, one request per 25 ms tick each, no slot
  held twice; a share of placeholder prompts reads stale KV. About 1M events per second.
- `realistic` (realistic.py driving the compiled loop of loop.py, kernel.py and rooms.py; traffic.py the
  draws and the sizing, parquet.py the files): an incident's shape: fragmented LIFO pools, bursts,
  aborts whose transfers land late, a decode node without page telemetry, the rooms in flight asked
  for (`concurrency`) whatever the size.

Both write pages/<node>.parquet (forensics.contract.PAGE_SCHEMA), gateway/gateway.parquet
(GATEWAY_SCHEMA) and engine/<node>/server.log with the simulator's start-up lines (common.py); no
engine request lines. The same options and seed give the same bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from forensics.simulate.pages.options import PageEvents

__all__ = ["PageEvents", "generate"]


def generate(out: Path, a: PageEvents, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write OUT/bundle and OUT/truth/summary.json; returns the summary."""
    if a.mode == "uniform":
        from forensics.simulate.pages import uniform

        events = a.events
        requests = uniform.requests_for_events(events) if events else (a.requests or 100_000)
        kw: dict[str, Any] = {"page": a.page_size} if a.page_size else {}
        kw |= {"chunk": a.chunk} if a.chunk else {}
        nodes = a.decode_nodes or 1
        rate = 0.01 if a.placeholder_rate is None else a.placeholder_rate
        summary = uniform.generate(out, requests, a.seed, nodes, rate, progress=progress, **kw)
    else:
        from forensics.simulate.pages import realistic

        given = {
            "page_size": a.page_size,
            "prefill_nodes": a.prefill_nodes,
            "decode_nodes": a.decode_nodes,
            "placeholder_rate": a.placeholder_rate,
            "abort_rate": a.abort_rate,
            "concurrency": a.concurrency,
            "dark_node": a.no_telemetry,
            "decode_pool": a.decode_pool,
            "prefill_pool": a.prefill_pool,
            "context_len": a.context_len,
            "chunk": a.chunk,
        }
        kw = {k: v for k, v in given.items() if v is not None}
        summary = realistic.generate(out, events=a.events, requests=a.requests, seed=a.seed, progress=progress, **kw)
    (out / "truth").mkdir(parents=True, exist_ok=True)
    (out / "truth" / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
