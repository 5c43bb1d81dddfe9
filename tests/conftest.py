import shutil
from pathlib import Path

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


@pytest.fixture(scope="session")
def sample_out(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One investigate run of the bundled sample for the whole test session, shared by the xdist
    workers through a lock file (the catalog and the disclosure tests read it; neither writes into it)."""
    from filelock import FileLock

    from forensics.pipeline import investigate
    from tests.support import SAMPLE

    if worker_id == "master":  # no xdist
        out = tmp_path_factory.mktemp("sample") / "out"
        investigate(SAMPLE, out)
        return out
    shared = tmp_path_factory.getbasetemp().parent  # the same folder for every worker of this session
    out = shared / "sample" / "out"
    with FileLock(str(shared / "sample.lock")):
        if not (out / "manifest.json").exists():
            shutil.rmtree(out, ignore_errors=True)  # a worker that died part way
            investigate(SAMPLE, out)
    return out


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
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: the files in the order they are handed out, HEAVY first, then the larger
    first, each file's tests in their own order (every worker sorts the same collection the same way)."""
    if not hasattr(config, "workerinput"):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def weight(path: str) -> tuple[int, int]:
        return (HEAVY.index(path) if path in HEAVY else len(HEAVY), -len(files[path]))

    items[:] = [item for path in sorted(files, key=weight) for item in files[path]]
