"""The guard's alert line and metrics file (forensics.sglang.runtime decides; this writes).

The alert line is the record of `forensics watch`'s alerts (forensics.watch.detector.Alert): watch
--alerts on the plugin's alerts.jsonl keeps the guard's alerts in the same stream and raises no second
alert for the room. The metrics are Prometheus text (node_exporter's textfile collector reads it).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from forensics.sglang.pagefile import iso_us

log = logging.getLogger("forensics.sglang")


def why(v: Any) -> str:
    """What the guard could not prove, by the violation's kind (runtime.Violation)."""
    rooms = ", ".join(map(str, v.sources)) or "unknown"
    return {
        "stale": f"{v.slots} attended KV slots hold another request's KV (rooms {rooms})",
        "foreign_write": f"{v.slots} attended KV slots were written by another request's transfer (rooms {rooms})",
        "in_flight": f"its KV pages may still be written by an unfinished transfer (rooms {rooms})",
        "unproven": "prefill's transferred length did not arrive, so its KV cannot be proven its own",
        "guard_error": "the guard could not check it (no ledger, or its check failed)",
    }.get(v.kind, v.kind)


def alert(rt: Any, v: Any) -> None:
    """rt: the forensics.sglang.runtime.Runtime, v: its Violation (not imported: runtime imports this)."""
    ts = iso_us(rt.clock())
    text = (
        f"KV integrity guard: room {v.room} rid={v.rid} on {rt.node}: {why(v)} ({v.kind}); "
        f"{'refused, finished with an error' if rt.guard == 'enforce' else 'observed'}"
    )
    log.error(text)
    rec: dict[str, Any] = {
        "kind": "exposure",
        "node": rt.node,
        "room": v.room,
        "request_ids": [v.rid] if v.rid else [],
        "evidence": [{"file": "kv-forensics guard", "line": rt.stats.violations, "text": text}],
        "log_time": ts,
        "detected_at": ts,
        "summary": f"room {v.room} on {rt.node}: {why(v)} ({v.kind}), before a forward pass over its KV "
        f"(kv-forensics guard, {rt.guard}); forensics investigate settles it",
        "gateway_request_id": None,
        "account_id": None,
    }
    if rt.alerts_path is not None:
        with rt.alerts_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
    write_metrics(rt)


def write_metrics(rt: Any) -> None:
    if rt.metrics_path is None:
        return
    lines = [
        "# HELP kvf_guard_violations_total Decode requests the KV integrity guard flagged.",
        "# TYPE kvf_guard_violations_total counter",
    ]
    for kind, n in sorted(rt.stats.by_kind.items()):
        lines.append(f'kvf_guard_violations_total{{node="{rt.node}",kind="{kind}",mode="{rt.guard}"}} {n}')
    lines += [  # the requests enforce ended with an error (SGLang counts those refused at the commit too)
        "# HELP kvf_guard_refused_total Requests the guard in enforce ended with an error.",
        "# TYPE kvf_guard_refused_total counter",
        f'kvf_guard_refused_total{{node="{rt.node}"}} {rt.stats.enforced}',
        "# HELP kvf_guard_open_pages Pages an unfinished transfer may still write (their holders are refused).",
        "# TYPE kvf_guard_open_pages gauge",
        f'kvf_guard_open_pages{{node="{rt.node}"}} {int((rt.land.open_n > 0).sum())}',
    ]
    if rt.rec is not None:
        lines += [
            "# HELP kvf_pages_dropped_total Page events dropped on a full queue (a seq gap in the files).",
            "# TYPE kvf_pages_dropped_total counter",
            f'kvf_pages_dropped_total{{node="{rt.node}"}} {rt.rec.dropped}',
        ]
    tmp = rt.metrics_path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(rt.metrics_path)
