import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402

DATA = Path(__file__).parent / "data"
EXAMPLE = DATA / "example"  # a copy of shared/spec/example: the contract's worked example


@pytest.fixture
def example_bundle() -> Path:
    return EXAMPLE / "bundle"
