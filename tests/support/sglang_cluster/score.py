"""A cluster run's figures: `forensics investigate` on its bundle and the guard's verdicts, each against
the driver's truth (driver.Req: the rooms whose KV each decoded response read)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

COLUMNS = ("truly_affected", "missed", "false_confirmed", "false_pairs", "indeterminate_clean", "guard_misses",
           "guard_false_alarms", "enforce_refused_clean", "leaks_delivered")  # fmt: skip


def investigate(bundle: Path, out: Path) -> dict[str, Any]:
    """forensics investigate (this interpreter, this checkout) and the tables the comparison reads."""
    import duckdb

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    subprocess.run([sys.executable, "-m", "forensics", "investigate", str(bundle), "--out", str(out)],
                   check=True, capture_output=True, env=env)  # fmt: skip
    con = duckdb.connect(str(out / "incident.duckdb"), read_only=True)
    try:
        aff = dict(con.execute("SELECT request_id, status FROM affected_responses").fetchall())
        pairs = con.execute("SELECT recipient_request_id, source_request_id, status FROM exposures").fetchall()
    finally:
        con.close()
    return {"affected": aff, "pairs": pairs}


def guard_rooms(plugin: Path) -> set[int]:
    """The rooms the guard alerted on, from each node's alerts.jsonl."""
    rooms: set[int] = set()
    for f in sorted(plugin.glob("*/alerts.jsonl")):
        rooms |= {int(json.loads(x)["room"]) for x in f.read_text().splitlines() if x.strip()}
    return rooms


def score(res: dict[str, Any], out: Path, guard: str, analyse: bool = True) -> dict[str, int]:
    reqs = res["reqs"]
    rid_of = {r.room: r.rid for r in reqs}
    truth = {r.rid for r in reqs if r.sources}
    true_pairs = {(r.rid, rid_of.get(s, str(s))) for r in reqs for s in r.sources}
    flagged = guard_rooms(out / "plugin")
    row = dict.fromkeys(COLUMNS, 0)
    row["truly_affected"] = len(truth)
    decoded = [r for r in reqs if r.decoded]
    if guard == "observe":
        row["guard_misses"] = sum(1 for r in decoded if r.sources and r.room not in flagged)
        row["guard_false_alarms"] = sum(1 for r in decoded if not r.sources and r.room in flagged)
    else:  # a refused request is clean when it neither read nor would have read another's KV (Req.would)
        row["guard_misses"] = sum(1 for r in decoded if r.sources and not r.refused)
        row["guard_false_alarms"] = sum(1 for r in decoded if not r.sources and not r.would and r.room in flagged)
        row["enforce_refused_clean"] = sum(1 for r in decoded if not r.sources and not r.would and r.refused)
    row["leaks_delivered"] = sum(1 for r in decoded if r.sources and not r.refused)
    if analyse:
        found = investigate(out / "bundle", out / "findings")
        aff = found["affected"]
        row["missed"] = len(truth - set(aff))
        row["false_confirmed"] = sum(1 for rid, st in aff.items() if st == "confirmed" and rid not in truth)
        row["indeterminate_clean"] = sum(1 for r in decoded if not r.sources and aff.get(r.rid) == "indeterminate")
        row["false_pairs"] = sum(1 for a, b, st in found["pairs"] if st == "confirmed" and (a, b) not in true_pairs)
    else:
        for k in ("missed", "false_confirmed", "false_pairs", "indeterminate_clean"):
            row[k] = -1  # not measured
    return row
