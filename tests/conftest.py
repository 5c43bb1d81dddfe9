from pathlib import Path

import pytest

from tests.support import EXAMPLE


@pytest.fixture
def example_bundle() -> Path:
    return EXAMPLE / "bundle"
