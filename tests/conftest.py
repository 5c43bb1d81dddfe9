from pathlib import Path

import pytest

from tests.support import EXAMPLE


@pytest.fixture
def example_bundle() -> Path:
    return EXAMPLE / "bundle"


@pytest.fixture(scope="session")
def sample_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One investigate run of the bundled sample per test process (the catalog and the disclosure
    tests read it; neither writes into it)."""
    from forensics.pipeline import investigate
    from tests.support import SAMPLE

    out = tmp_path_factory.mktemp("sample") / "out"
    investigate(SAMPLE, out)
    return out
