import shutil
from pathlib import Path

import pytest

from tests.support import EXAMPLE


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
