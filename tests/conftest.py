import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import EXAMPLE


def pytest_configure(config: pytest.Config) -> None:
    """The numba kernels compiled once for all the test workers (tests/support/numba_once.py)."""
    import forensics
    from tests.support import numba_once

    numba_once.serialize(numba_once.lock_path(Path(forensics.__file__).parent))


@pytest.fixture
def example_bundle() -> Path:
    return EXAMPLE / "bundle"


def _shared(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, build: Callable[[Path], None]) -> Path:
    """A folder built once for the whole test session by `build`, shared by the xdist workers through a
    lock file: the first worker to ask builds it, the others wait and read it (no test writes into it)."""
    from filelock import FileLock

    if worker_id == "master":  # no xdist
        folder = tmp_path_factory.mktemp(name) / "out"
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker of this session
    folder, done = shared / name / "out", shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died part way
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def sample_out(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One investigate run of the bundled sample for the whole test session (the catalog and the
    disclosure tests read it)."""
    from forensics.pipeline import investigate
    from tests.support import SAMPLE

    def build(out: Path) -> None:
        investigate(SAMPLE, out)

    return _shared(tmp_path_factory, worker_id, "sample", build)


@pytest.fixture(scope="session")
def incident_bundle(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The incident preset simulated once for the session (seed 5, 900 requests: four nodes, page
    telemetry on all, exposures to compare): test_window, test_nodework and test_ray_cluster read it."""
    from forensics.simulate import build_config, simulate

    def build(sim: Path) -> None:
        simulate(sim, build_config("incident", seed=5, requests=900))

    return _shared(tmp_path_factory, worker_id, "incident-s5", build) / "bundle"


@pytest.fixture(scope="session")
def incident_serial(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, incident_bundle: Path
) -> tuple[Path, dict[str, Any]]:
    """incident_bundle investigated once for the session with one worker (every node on the run's own
    connection), the reference the other executors and layouts are compared with; beside the out
    folder, what the run returned that it does not write: its summary and whether the nodes ran apart."""
    from forensics.ownership import Execution
    from forensics.pipeline import investigate

    def build(out: Path) -> None:
        result = investigate(incident_bundle, out, execution=Execution(workers=1))
        ran = result.execution
        assert ran is not None
        said = {"summary": result.summary(), "apart": ran.apart, "tasks_run": ran.tasks_run}
        (out.parent / "run.json").write_text(json.dumps(said))

    out = _shared(tmp_path_factory, worker_id, "incident-s5-serial", build)
    return out, json.loads((out.parent / "run.json").read_text())


# The files that take longest on the 2-core machine (measured with --durations; the heaviest first).
# make test's workers take them first (--no-loadscope-reorder keeps this order), so that the last file a
# worker takes is a short one and the two workers end together.
HEAVY = (
    "tests/damage/test_fault_injection_slow.py",
    "tests/damage/test_fault_injection_slow_b.py",
    "tests/damage/test_fault_injection_slow_c.py",
    "tests/damage/test_fault_injection_slow_d.py",
    "tests/damage/test_fault_injection.py",
    "tests/whole/test_hardening.py",
    "tests/ownership/test_allocator.py",
    "tests/audit/test_sieve.py",
    "tests/findings/test_possible_compact.py",
    # 10 to 35 s of CPU each (measured in one process), with few tests: by their count they would be
    # handed out among the last files (test_kernel_signatures the very last)
    "tests/ingest/test_window.py",
    "tests/findings/test_sender_sources.py",
    "tests/ingest/test_readers_agree.py",
    "tests/whole/test_kernel_signatures.py",
    "tests/ownership/test_replay.py",
    "tests/ingest/test_delivery_twice.py",
    "tests/report/test_pack.py",
    "tests/findings/test_late_write_buckets.py",
    "tests/ingest/test_time_hits_buckets.py",
    "tests/findings/test_properties.py",
    "tests/ingest/test_seqs.py",
    "tests/watch/test_watch_vs_investigate.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: the files in the order they are handed out, HEAVY first, then the files with
    tests marked slow (the most first: whole incidents, a wheel, a Ray cluster; a file of a few such tests
    handed out last would keep one worker busy while the other waits), then the larger first, each file's
    tests in their own order (every worker sorts the same collection the same way)."""
    if not hasattr(config, "workerinput"):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    slow = {path: sum(1 for i in tests if i.get_closest_marker("slow")) for path, tests in files.items()}

    def weight(path: str) -> tuple[int, int, int]:
        return (HEAVY.index(path) if path in HEAVY else len(HEAVY), -slow[path], -len(files[path]))

    items[:] = [item for path in sorted(files, key=weight) for item in files[path]]
