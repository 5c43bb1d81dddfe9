"""The engine logs read as tasks by node and time range (forensics/ownership/execution/engine_logs.py),
here run in this process: every table ingest leaves, row for row and in its order, and every file's
accounting are the one-process reader's, with each file a task of its own (the smallest time shard),
on the sample and on a rotated, gzipped logs-only bundle with a cut gzip stream and a line not UTF-8."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import forensics.ownership.execution.engine_logs as engine_logs
from forensics.db import connect
from forensics.ingest import ingest_into
from forensics.ownership import Execution
from tests.support import SAMPLE


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sim = tmp_path_factory.mktemp("scale") / "sim"
    args = ["simulate", str(sim), "--scale", "--requests", "800", "--seed", "9", "--days", "2"]
    args += ["--decode-nodes", "2", "--prefill-nodes", "1", "--rotation", "numbered-gz"]
    subprocess.run([sys.executable, "-m", "forensics", *args], check=True, capture_output=True)
    bundle = sim / "bundle"
    cut = next(iter(sorted((bundle / "engine").glob("decode-*/server.log.1.gz"))))
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])  # a gzip stream cut part way
    with next(iter(sorted((bundle / "engine").glob("prefill-*/server.log")))).open("ab") as f:
        f.write(b"a line \xff\xfe not UTF-8\n")
    return bundle


def tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    """Every table and temp table ingest left, its rows in stored order."""
    names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    return {t: con.execute(f"SELECT * FROM {t}").fetchall() for t in names}


@pytest.mark.parametrize("which", ["sample", "damaged"])
def test_tasks_by_node_and_file_give_the_one_process_tables(
    which: str, damaged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = SAMPLE if which == "sample" else damaged
    one = connect(":memory:")
    files_one, _ = ingest_into(one, bundle)
    monkeypatch.setattr(engine_logs, "SHARD_BYTES", 1)  # every file a task of its own
    ran: list[engine_logs.IngestTask] = []

    def here(tasks: list[engine_logs.IngestTask]) -> list[dict]:
        ran.extend(tasks)
        return [engine_logs.ingest_node(t) for t in reversed(tasks)][::-1]  # in any order, results in order

    execution = Execution(executor="ray", workers=2)
    apart = connect(":memory:")
    files_apart, _ = ingest_into(
        apart, bundle, engine_loader=lambda c, f, tz, rows: engine_logs.load_apart(c, f, tz, rows, execution, here)
    )
    engine = [f for f in files_one if f.source in ("engine_log", "engine_requests")]
    assert len(ran) == len(engine) and len({t.node for t in ran}) < len(ran)  # several shards per node
    assert [f.manifest_entry() for f in files_one] == [f.manifest_entry() for f in files_apart]
    if which == "damaged":
        assert any(f.damage for f in files_one) and any(f.rows_rejected for f in engine)
    a, b = tables(one), tables(apart)
    assert sorted(a) == sorted(b)
    assert a["engine_requests"] and a["engine_lines"]
    for name in a:
        assert a[name] == b[name], name
