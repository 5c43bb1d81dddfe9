"""Issue #7: per-node tasks give the same answer in this process, in worker processes and on Ray, and
a cache of per-node results is reused exactly while a node's inputs are unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forensics.ownership.execution.nodes import Execution, NodeRun, auto_workers
from forensics.pipeline import investigate
from tests import support

FINDINGS = ("affected_responses.csv", "exposures.csv", "accounts.csv", "hazards.csv", "coverage.csv", "report.md")
TABLES = {  # tables the per-node tasks make, and a total order for comparing them
    "room_state": "node, room, seg_start, k",
    "timeline": "node, k",
    "holdings": "node, room, seg_start, a_k",
    "history_items": "item, s",
    "history_found": "item, s",
    "history_open": "item, s",
}


@pytest.fixture(scope="module")
def bundle(incident_bundle: Path) -> Path:
    return incident_bundle  # the session's incident (tests/conftest.py): seed 5, 900 requests


def run(bundle: Path, out: Path, **kw) -> NodeRun:
    result = investigate(bundle, out, execution=Execution(**kw))
    ran = result.execution
    assert ran is not None
    if ran.apart:  # the command's summary says what ran and what was reused
        assert f"Per-node tasks: {ran.tasks_run} run, {ran.reused} reused" in result.summary()
    else:
        assert "Per-node tasks" not in result.summary()
    return ran


def tables(out: Path) -> dict[str, list[tuple]]:
    con = support.open_db(out / "incident.duckdb")
    try:
        return {
            t: sorted(con.execute(f"SELECT * FROM {t} ORDER BY {order}").fetchall(), key=repr)
            for t, order in TABLES.items()
        }
    finally:
        con.close()


def assert_same(a: Path, b: Path) -> None:
    for name in FINDINGS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ta, tb = tables(a), tables(b)
    for name in TABLES:
        assert ta[name] == tb[name], name


@pytest.fixture(scope="module")
def serial(incident_serial: tuple[Path, dict]) -> Path:
    """The bundle investigated with one worker (the session's run, tests/conftest.py), as run() checks it."""
    out, ran = incident_serial
    assert ran["tasks_run"] is None and not ran["apart"]  # one worker: all nodes at once in this process
    assert "Per-node tasks" not in ran["summary"]
    rows = sum(1 for _ in (out / "affected_responses.csv").open()) - 1
    assert rows >= 5  # exposures to compare
    return out


def test_worker_processes_match_one_worker(bundle: Path, serial: Path, tmp_path: Path) -> None:
    ex = run(bundle, tmp_path / "pool", workers=2)
    assert ex.tasks_run == 4 and ex.workers == 2
    assert {t["node"] for t in ex.tasks} == {"decode-0", "decode-1", "prefill-0", "prefill-1"}
    assert_same(serial, tmp_path / "pool")
    assert not (tmp_path / "pool" / ".kvf-work").exists()  # task files are scratch


def test_ray_local_matches_one_worker(bundle: Path, serial: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    ex = run(bundle, tmp_path / "ray", executor="ray", workers=2)
    assert ex.tasks_run == 4
    assert_same(serial, tmp_path / "ray")


def test_cache_reuses_unchanged_nodes_only(bundle: Path, serial: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run(bundle, tmp_path / "c1", workers=1, cache=cache)
    assert (first.tasks_run, first.reused) == (4, 0)
    assert_same(serial, tmp_path / "c1")
    again = run(bundle, tmp_path / "c2", workers=1, cache=cache)
    assert (again.tasks_run, again.reused) == (0, 4)
    assert_same(serial, tmp_path / "c2")

    # the bundle grows: one more file with later events of decode-1 only
    grown = tmp_path / "grown"
    shutil.copytree(bundle, grown)
    last = pq.read_table(bundle / "pages" / "decode-1.parquet").to_pylist()[-1]
    ts = last["ts"].isoformat().replace("+00:00", "Z")
    extra = [
        {"node": "decode-1", "seq": last["seq"] + 1, "ts": ts, "op": "alloc", "room": 7, "start": 0, "end": 64},
        {"node": "decode-1", "seq": last["seq"] + 2, "ts": ts, "op": "free", "room": 7, "start": 0, "end": 64},
    ]
    (grown / "pages" / "decode-1-late.jsonl").write_text("".join(json.dumps(r) + "\n" for r in extra))
    third = run(grown, tmp_path / "c3", workers=1, cache=cache)
    assert (third.tasks_run, third.reused) == (1, 3)
    fresh = run(grown, tmp_path / "c4", workers=1)
    assert_same(fresh_out := tmp_path / "c4", tmp_path / "c3")
    assert fresh.tasks_run is None and fresh_out.is_dir()
    # the new events are in the analysis (a node's timeline grew by two)
    con = support.open_db(tmp_path / "c3" / "incident.duckdb")
    n = con.execute("SELECT count(*) FROM timeline WHERE node = 'decode-1' AND room = 7").fetchone()[0]
    con.close()
    assert n == 2


def test_auto_workers() -> None:
    assert auto_workers(4, cores=2) == 1  # two cores: DuckDB's threads already use both
    assert auto_workers(4, cores=8) == 4
    assert auto_workers(16, cores=8) == 8
    assert auto_workers(0, cores=8) == 1


def test_threads_reach_the_node_tasks_and_the_likelihood(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--threads 1 holds in every per-node task (their DuckDB, in whose threads their walks run) and in
    the allocator model's pool, on a machine that seems to have 8 cores (the defaults would take them)."""
    import os

    import forensics.ownership.execution.walks as walk  # the allocator model's walk pool

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    pools: list[int] = []
    pool = walk.ThreadPoolExecutor

    def recorded(max_workers: int):
        pools.append(max_workers)
        return pool(max_workers=max_workers)

    monkeypatch.setattr(walk, "ThreadPoolExecutor", recorded)
    result = investigate(support.SAMPLE, tmp_path / "out", threads=1, execution=Execution(workers=2))
    ran = result.execution
    assert ran is not None and ran.tasks_run and ran.workers == 2
    assert [t["threads"] for t in ran.tasks] == [1] * ran.tasks_run
    assert pools and set(pools) == {1}  # the sample's decode-2 has no page telemetry: the model walks it


def test_each_worker_gets_its_share_of_the_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from forensics.ownership.execution.nodes import task_threads

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert (task_threads(None, 1), task_threads(None, 3), task_threads(4, 2), task_threads(1, 4)) == (8, 2, 2, 1)


def test_a_dead_or_wrong_ray_address_is_refused_in_seconds() -> None:
    """No head at the port, or something there that is not one: refused before ray.init would retry."""
    import socket
    import time

    pytest.importorskip("ray")
    from forensics.errors import InputError
    from forensics.ownership.execution.cluster import PROBE_SECONDS, probe_ray_address

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"
    with pytest.raises(InputError, match="no Ray head answers there"):
        probe_ray_address(dead)
    with socket.socket() as mute:  # accepts connections and never answers
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        t0 = time.monotonic()
        with pytest.raises(InputError, match="does not answer as a Ray head"):
            probe_ray_address(f"127.0.0.1:{mute.getsockname()[1]}")
        assert time.monotonic() - t0 < 2 * PROBE_SECONDS + 1
    with pytest.raises(InputError, match="expected HOST:PORT"):
        probe_ray_address("head-node")


def test_a_failed_ray_task_names_its_node() -> None:
    ray = pytest.importorskip("ray")
    from forensics.errors import CapacityError
    from forensics.ownership.execution.cluster import task_failed

    task = "decode-3"
    crashed = task_failed(ray, ray.exceptions.WorkerCrashedError(), task)
    assert isinstance(crashed, RuntimeError) and "node decode-3 failed" in str(crashed)
    raised = ray.exceptions.RayTaskError("run_node_on_ray", "Traceback ...", MemoryError("out of memory"))
    assert str(task_failed(ray, raised, task)).endswith("node decode-3 failed: MemoryError: out of memory")
    too_big = ray.exceptions.RayTaskError("run_node_on_ray", "Traceback ...", CapacityError("raise --memory-limit"))
    assert isinstance(failed := task_failed(ray, too_big, task), CapacityError)
    assert str(failed) == "the Ray task analysing node decode-3: raise --memory-limit"


def test_ray_address_needs_the_ray_executor(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from forensics.cli import app
    from forensics.errors import InputError

    done = CliRunner().invoke(
        app, ["investigate", str(support.SAMPLE), "--out", str(tmp_path / "o"), "--ray-address", "h:1"]
    )
    assert isinstance(done.exception, InputError) and str(done.exception) == "--ray-address needs --executor ray"
    assert not (tmp_path / "o").exists()
