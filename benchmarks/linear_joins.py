"""The joins of issue #49's "analysis that grows linearly", each as it was (the rule as one join on the node,
or one range join) against the query the pipeline runs now, on synthetic tables whose rows double: a
fixed span of time (14 days, as gen_logs.py's bundles) holding N requests on 16 decode nodes, so that
the rate doubles with N as in those bundles. One DuckDB thread; the seconds of each and their ratio
per doubling.

- late_write_rule (findings/queries/late_write_rule.sql): 2% of the rooms aborted, each landing within
  2 s of its abort; rooms held 1 to 8 s.
- time_hits (ingest/queries/gateway_join/05_time_hits.sql): 0.7% of the records (LiteLLM failures) named
  by no id, windows of up to 8 s, their rooms and 1% more unclaimed.
- possible_windows' own rows (forensics.findings.possible.possible_reach): a pool of N sources, a response
  per 10; also the two equi-joins that counted them before the numpy pass (printed beside).

--plain-up-to N leaves the plain joins out above N (the correlated own-row count takes minutes at 500K).

    python benchmarks/linear_joins.py --sizes 250K,500K,1M
    python benchmarks/linear_joins.py --joins own_rows --sizes 250K,500K,1M,2M --plain-up-to 250K
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from run import parse_size  # noqa: E402

from forensics.db import bound, connect  # noqa: E402
from forensics.findings.rules import define_rules  # noqa: E402
from forensics.ingest.gateway import GATEWAY_SLACK_US, LENGTH_ABS, LENGTH_FAR, LENGTH_REL  # noqa: E402
from forensics.paths import load_query, query_dir  # noqa: E402
from tests.findings.test_late_write_buckets import RULE as LATE_RULE  # noqa: E402
from tests.ingest.test_time_hits_buckets import RULE_PAIRS  # noqa: E402

SPAN_S = 14 * 86400
TIME_HITS = (query_dir("ingest") / "gateway_join" / "05_time_hits.sql").read_text(encoding="utf-8")
TIME_RULE = re.sub(
    r"\), width AS \(.*?\n\)\n(?=SELECT file_id, row, room)", lambda _: RULE_PAIRS, TIME_HITS, flags=re.S
)
# possible_reach's count of each response's own rows as it was: a correlated subquery, planned as a join on
# the node with the OR as its filter
OLD_OWN_ROWS = """UPDATE possible_windows SET sources = o.n - (
        SELECT count(*) FROM possible_pool p
        WHERE p.node = possible_windows.node
          AND (p.room = possible_windows.recipient_room OR p.request_id = possible_windows.recipient_request_id)
          AND possible_pair(p.started, p.gone_at, possible_windows.started, possible_windows.finished))
    FROM count_out o WHERE o.id = possible_windows.rowid"""
# ... and as two equi-joins, on (node, room) and on (node, request id) (the count before the numpy pass)
PREV_OWN_ROWS = """UPDATE possible_windows SET sources = o.n - coalesce(k.own, 0)
    FROM count_out o LEFT JOIN (
        SELECT id, count(*) AS own FROM (
            SELECT w.rowid AS id, p.rowid AS pid FROM possible_windows w JOIN possible_pool p
              ON p.node = w.node AND p.room = w.recipient_room
            WHERE possible_pair(p.started, p.gone_at, w.started, w.finished)
            UNION
            SELECT w.rowid, p.rowid FROM possible_windows w JOIN possible_pool p
              ON p.node = w.node AND p.request_id = w.recipient_request_id
            WHERE possible_pair(p.started, p.gone_at, w.started, w.finished))
        GROUP BY id) k ON k.id = o.id
    WHERE o.id = possible_windows.rowid"""
PARAMS = dict(gw_slack_us=GATEWAY_SLACK_US, len_abs=LENGTH_ABS, len_rel=LENGTH_REL, len_far=LENGTH_FAR)


def _timed(con, sql: str, params: dict | None = None) -> float:
    t = time.perf_counter()
    con.execute(sql, bound(sql, params or {}))
    return time.perf_counter() - t


def _cpu(fn: Callable[[], object]) -> float:
    """The process CPU time of fn() (every thread's: one DuckDB thread here): the load of a shared machine
    moves it far less than the wall time."""
    t = time.process_time()
    fn()
    return time.process_time() - t


def late_write(n: int, plain: bool = True) -> tuple[float | None, float]:
    con = connect(":memory:", threads=1)
    con.execute(f"""CREATE TEMP TABLE node_lifecycle AS
        SELECT 'decode-' || (i % 16) AS node, i AS room, 1.79e9 + i * {SPAN_S / n} AS t_alloc,
               1.79e9 + i * {SPAN_S / n} + 1 + 7 * random() AS t_end, 0.001 AS res, i % 50 = 7 AS aborted,
               1.79e9 + i * {SPAN_S / n} + random() AS t_free, 1.79e9 + i * {SPAN_S / n} + random() AS t_land_lo,
               1.79e9 + i * {SPAN_S / n} + 1 + random() AS t_land_hi
        FROM range({n}) t(i)""")
    old = _timed(con, f"CREATE TEMP TABLE ref AS {LATE_RULE}") if plain else None
    new = _timed(con, load_query("findings", "late_write_rule"))
    assert not plain or (
        con.execute("SELECT count(*) FROM (SELECT * FROM ref EXCEPT ALL SELECT * FROM late_write_rule)").fetchone()[0]
        == 0
    )
    return old, new


def time_hits(n: int, plain: bool = True) -> tuple[float | None, float]:
    con = connect(":memory:", threads=1)
    step = SPAN_S * 1_000_000 // n
    con.execute(f"""CREATE TABLE gateway AS
        SELECT 1 AS file_id, i AS row, NULL::BIGINT AS bootstrap_room, 'm' AS model,
        CASE WHEN i % 143 = 0 THEN 503 ELSE 200 END AS status, 100 + i % 900 AS prompt_tokens,
        make_timestamp(1790000000000000 + i * {step}) AS ts, 100 + (i % 80) * 100.0 AS duration_ms
        FROM range({n}) t(i)""")
    con.execute("""CREATE TEMP TABLE join_hits AS
        SELECT file_id, row, CASE WHEN status = 503 THEN 0 ELSE 1 END AS rooms,
        CASE WHEN status = 503 THEN NULL ELSE row END AS room FROM gateway""")
    con.execute(f"""CREATE TEMP TABLE room_lines AS SELECT 'decode-' || (i % 16) AS node, i AS room,
        1790000000000000 + i * {step} + 50000 AS t_us, 1000 AS res_us, 100 + i % 900 AS input_len, false AS entry
        FROM range({n}) t(i) WHERE i % 143 = 0 OR i % 100 = 1 OR i % 7 = 0""")
    con.execute("""CREATE TABLE gateway_clock AS SELECT 'decode-' || i AS node, 10 AS rooms, -20000 AS lo_us,
        20000 AS hi_us, true AS consistent FROM range(16) t(i)""")
    if not plain:
        return None, _timed(con, TIME_HITS, PARAMS)
    old = _timed(con, TIME_RULE, PARAMS)
    con.execute("ALTER TABLE time_hits RENAME TO ref")
    new = _timed(con, TIME_HITS, PARAMS)
    assert con.execute("SELECT count(*) FROM (SELECT * FROM ref EXCEPT ALL SELECT * FROM time_hits)").fetchone()[0] == 0
    return old, new


def own_rows(n: int, plain: bool = True) -> tuple[float | None, float]:
    """The own-row count as one correlated join (plain), as two equi-joins (PREV_OWN_ROWS) and as
    possible_reach counts it now: per node, a sort of the sources and binary searches by room and by
    request id (forensics.findings.possible._own), then the UPDATE by rowid (these two in CPU seconds,
    best of 3; the plain one in wall seconds as the other joins). The arrays are fetched before the clock
    starts (possible_reach fetches them for its count anyway); the request ids as possible_reach codes
    them (integers). Returns (plain, now) and prints both CPU times."""
    import numpy as np
    import pyarrow as pa

    from forensics.db import arrow_view
    from forensics.findings.possible import HI, LO, _filled, _own

    con = connect(":memory:", threads=1)
    define_rules(con)
    con.execute(f"""CREATE TABLE possible_pool AS
        SELECT 'decode-' || (i % 16) AS node, i AS room, 'r' || i AS request_id, i AS rid,
        make_timestamp(1790000000000000 + i * {SPAN_S * 1_000_000 // n}) AS started, NULL::TIMESTAMP AS gone_at
        FROM range({n}) t(i)""")
    con.execute("""CREATE TABLE possible_windows AS
        SELECT request_id AS recipient_request_id, rid, node, room AS recipient_room, started,
               started + INTERVAL 5 SECOND AS finished, NULL::BIGINT AS sources
        FROM possible_pool WHERE room % 10 = 0""")
    con.execute("CREATE TABLE count_out AS SELECT rowid AS id, 100 AS n FROM possible_windows")
    old = _timed(con, OLD_OWN_ROWS) if plain else None
    want = con.execute("SELECT rowid, sources FROM possible_windows ORDER BY 1").fetchall() if plain else None
    prev = min(_cpu(lambda: con.execute(PREV_OWN_ROWS, bound(PREV_OWN_ROWS, {}))) for _ in range(3))
    if want is None:
        want = con.execute("SELECT rowid, sources FROM possible_windows ORDER BY 1").fetchall()
    s = con.execute("""SELECT node, room, rid, epoch_us(started) AS started, epoch_us(gone_at) AS gone
        FROM possible_pool ORDER BY node, rowid""").fetchnumpy()
    r = con.execute("""SELECT rowid AS id, node, recipient_room AS room, rid, epoch_us(started) AS started,
        epoch_us(finished) AS finished FROM possible_windows ORDER BY node, id""").fetchnumpy()
    src = {"room": _filled(s["room"], -1), "rid": _filled(s["rid"], -1), "started": _filled(s["started"], LO),
           "gone": _filled(s["gone"], HI)}  # fmt: skip
    rec = {"room": _filled(r["room"], -2), "rid": _filled(r["rid"], -2), "started": _filled(r["started"], LO),
           "finished": _filled(r["finished"], HI)}  # fmt: skip
    s_node, r_node = np.asarray(s["node"], dtype=object), np.asarray(r["node"], dtype=object)

    def now() -> None:
        count = np.full(len(r_node), 100, dtype=np.int64)
        for node in sorted(set(r_node.tolist())):
            si, ri = np.flatnonzero(s_node == node), np.flatnonzero(r_node == node)
            count[ri] -= _own({k: v[si] for k, v in src.items()}, {k: v[ri] for k, v in rec.items()})
        with arrow_view(con, "own_out", pa.table({"id": np.asarray(r["id"], dtype=np.int64), "n": count})):
            con.execute("UPDATE possible_windows SET sources = o.n FROM own_out o WHERE o.id = possible_windows.rowid")

    new = min(_cpu(now) for _ in range(3))
    assert con.execute("SELECT rowid, sources FROM possible_windows ORDER BY 1").fetchall() == want
    print(f"own_rows {n:,}: CPU s, best of 3: as two equi-joins (the previous count) {prev:.3f} s, now {new:.3f} s",
          flush=True)  # fmt: skip
    return old, new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="250K,500K,1M")
    ap.add_argument("--joins", default="late_write_rule,time_hits,own_rows", help="which, comma-separated")
    ap.add_argument("--plain-up-to", type=parse_size, default=1_000_000, help="the plain joins above it not run")
    a = ap.parse_args(argv)
    sizes = [parse_size(s) for s in a.sizes.split(",")]
    joins = {"late_write_rule": late_write, "time_hits": time_hits, "own_rows": own_rows}
    for name in a.joins.split(","):
        fn = joins[name]
        prev = None
        for n in sizes:
            old, new = fn(n, n <= a.plain_up_to)
            was = "not run" if old is None else f"{old:.2f} s"
            per = f", per doubling now {new / prev[1]:.2f}x" if prev else ""
            if prev and old is not None and prev[0] is not None:
                per += f", as one join {old / prev[0]:.2f}x"
            print(f"{name} {n:,}: as one join {was}, now {new:.2f} s{per}", flush=True)
            prev = (old, new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
