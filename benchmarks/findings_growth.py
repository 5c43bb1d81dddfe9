"""The logs-only findings steps of issue #49's "analysis that grows linearly" (source_likelihood,
late_write_rule, late_write_responses, possible_sources, possible_reach, and the steps between them) on
`forensics simulate --scale` bundles whose requests double, each step's CPU time on one thread.

For every size of --sizes: the bundle is simulated once (cached in --work), then ingested, its cohorts
labelled, its ownership rebuilt and the findings steps before dark_rooms run, once, into a database
kept in --work (its temporary tables copied into the schema kept_tmp). Each measured run (a child
process: its peak RSS by os.wait4) copies that database, restores the temporary tables and runs the
findings steps from dark_rooms to possible_reach with one DuckDB thread and one walk thread (DuckDB
memory limit --memory-limit), timing each step's process CPU (time.process_time: every thread of the
process, so the walks' threads count; the load of a shared machine changes it far less than the wall
time). The allocator model's walks are counted on the side (how many, how many rooms and events they
replayed, their threads' CPU): what source_likelihood's time is made of.

Printed: per size the best of --repeat runs per step, then per doubling (t2 / t1) ^ (1 / log2(n2 / n1))
between consecutive sizes. Results accumulate in --results (findings_growth.json).

    python benchmarks/findings_growth.py --sizes 25K,50K,100K,200K --memory-limit 4GB
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from run import PY, fmt_size, measure, parse_size  # noqa: E402

FIRST, LAST = "dark_rooms", "possible_reach"
SHOWN = (
    "source_likelihood",
    "late_write_rule",
    "late_write_responses",
    "possible_sources",
    "possible_reach",
    "dark_rooms",
    "node_lifecycle",
)


def _name(step: Any) -> str:
    return step if isinstance(step, str) else str(step[0]) if isinstance(step, tuple) else str(step.__name__)


def child_prep(bundle: str, db: str) -> None:
    """Everything before dark_rooms, into db; the temporary tables kept in the schema kept_tmp."""
    from forensics import findings
    from forensics.cohorts import assign_cohorts
    from forensics.cohorts.preview import store_warnings
    from forensics.db import connect, run_steps
    from forensics.ingest import ingest_into
    from forensics.ownership import rebuild_ownership
    from forensics.run import load_run

    Path(db).unlink(missing_ok=True)
    run = load_run(Path(bundle), threads=1)
    con = connect(db, threads=1)
    ingest_into(con, run.bundle, run.window, run.config)
    assign_cohorts(con, list(run.rules))
    store_warnings(con, list(run.rules))
    rebuild_ownership(con, run.execution)
    first = [_name(s) for s in findings.STEPS].index(FIRST)
    run_steps(con, "findings", findings.STEPS[:first])
    con.execute("CREATE SCHEMA kept_tmp")
    for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY 1").fetchall():
        con.execute(f'CREATE TABLE kept_tmp."{t}" AS SELECT * FROM temp."{t}"')
    con.close()


def child_steps(db: str, work: str, memory_limit: str | None) -> None:
    """The steps dark_rooms .. possible_reach on a copy of db, one thread; prints one JSON line."""
    import numpy as np

    from forensics import findings
    from forensics.db import connect, run_steps
    from forensics.ownership.kernels import allocator

    walks: list[tuple[float, int, int]] = []
    plain = allocator.walk

    def counted(*a: object) -> object:
        t = time.thread_time()
        out = plain(*a)
        walks.append((time.thread_time() - t, len(a[4]), len(a[6])))  # type: ignore[arg-type]
        return out

    allocator.walk = counted
    shutil.copy(db, work)
    con = connect(work, threads=1, memory_limit=memory_limit)
    for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'kept_tmp'").fetchall():
        con.execute(f'CREATE TEMP TABLE "{t}" AS SELECT * FROM kept_tmp."{t}"')
    findings.define_rules(con)
    names = [_name(s) for s in findings.STEPS]
    cpu, wall = {}, {}
    for step in findings.STEPS[names.index(FIRST) : names.index(LAST) + 1]:
        c0, w0 = time.process_time(), time.perf_counter()
        run_steps(con, "findings", [step])
        cpu[_name(step)], wall[_name(step)] = time.process_time() - c0, time.perf_counter() - w0
    w = np.array(walks, dtype=float).reshape(-1, 3)
    rows = {
        t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
        for t in ("node_lifecycle", "late_write_rule", "late_write_responses", "source_likelihood", "possible_pool",
                  "possible_windows", "possible_extra")
    }  # fmt: skip
    rows["dark_nodes"] = con.execute("SELECT count(*) FROM allocator_model").fetchone()[0]  # type: ignore[index]
    con.close()
    Path(work).unlink()
    out = {"cpu": cpu, "wall": wall, "rows": rows, "walks": len(w), "walk_cpu": float(w[:, 0].sum()),
           "walk_events": int(w[:, 1].sum()), "walk_rooms": int(w[:, 2].sum())}  # fmt: skip
    print("RESULT " + json.dumps(out))


def ensure(work: Path, requests: int, seed: int, log) -> Path:
    """The size's prepared database (bundle simulated and prepared once)."""
    d = work / f"scale-r{fmt_size(requests)}-s{seed}"
    db = d / "prepared.duckdb"
    if db.is_file():
        return db
    if not (d / "truth" / "summary.json").is_file():
        shutil.rmtree(d, ignore_errors=True)
        log(f"  simulating {d} ...")
        cmd = [PY, "-m", "forensics", "simulate", str(d), "--scale", "--requests", str(requests), "--seed", str(seed)]
        r = measure(cmd, 7200)
        if r["rc"] != 0:
            raise SystemExit(f"simulate failed:\n{r['output']}")
    log(f"  preparing {db} ...")
    r = measure([PY, __file__, "--child-prep", str(d / "bundle"), str(db) + ".part"], 7200)
    if r["rc"] != 0:
        raise SystemExit(f"prepare failed:\n{r['output']}")
    os.replace(str(db) + ".part", db)
    return db


def per_doubling(a: float, b: float, n1: int, n2: int) -> float:
    return (b / a) ** (1 / math.log2(n2 / n1)) if a > 0 and b > 0 else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="25K,50K,100K,200K")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="runs per size; the best CPU of each step is kept")
    ap.add_argument("--memory-limit", default="4GB")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kvf-findings-growth"))
    ap.add_argument("--results", type=Path, default=HERE / "findings_growth.json")
    ap.add_argument("--child-prep", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--child-steps", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child_prep:
        child_prep(*a.child_prep)
        return 0
    if a.child_steps:
        child_steps(*a.child_steps, a.memory_limit)
        return 0
    a.work.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    sizes = [parse_size(s) for s in a.sizes.split(",")]
    results = []
    for n in sizes:
        db = ensure(a.work, n, a.seed, log)
        runs = []
        for _ in range(a.repeat):
            load = os.getloadavg()[0]
            cmd = [PY, __file__, "--child-steps", str(db), str(db) + ".run", "--memory-limit", a.memory_limit]
            r = measure(cmd, 7200)
            line = [x for x in r["output"].splitlines() if x.startswith("RESULT ")]
            if r["rc"] != 0 or not line:
                raise SystemExit(f"steps failed:\n{r['output']}")
            runs.append(json.loads(line[0][7:]) | {"rss_mb": r["rss_mb"], "load": round(load, 2)})
        best = {k: min(x["cpu"][k] for x in runs) for k in runs[0]["cpu"]}
        rec = {"requests": n, "seed": a.seed, "memory_limit": a.memory_limit, "cpu": best, "runs": runs,
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        results.append(rec)
        w = min(runs, key=lambda x: x["walk_cpu"])
        log(
            f"{n:,}: " + ", ".join(f"{k} {best[k]:.2f}" for k in SHOWN)
            + f" s CPU; walks {w['walks']} ({w['walk_rooms']:,} rooms, {w['walk_cpu']:.2f} s), dark nodes "
            f"{w['rows']['dark_nodes']}; peak RSS {max(x['rss_mb'] for x in runs):.0f} MB, "
            f"load {[x['load'] for x in runs]}"
        )  # fmt: skip
    for p, q in zip(results, results[1:], strict=False):
        n1, n2 = p["requests"], q["requests"]
        ratios = ", ".join(f"{k} {per_doubling(p['cpu'][k], q['cpu'][k], n1, n2):.2f}x" for k in SHOWN)
        log(f"per doubling {fmt_size(n1)} -> {fmt_size(n2)}: {ratios}")
    old = json.loads(a.results.read_text()) if a.results.is_file() else []
    a.results.write_text(json.dumps(old + results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
