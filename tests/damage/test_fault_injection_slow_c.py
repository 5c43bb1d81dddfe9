"""#47's fault-injection suite on part 3 of the slow incidents (SLOW_PARTS[2]): see test_fault_injection_slow.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.damage.test_fault_injection import _case, check_case, incidents  # noqa: F401 (the fixture)
from tests.support.damage import KINDS
from tests.support.faultcheck import SLOW_PARTS, Run

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("incident", "kind"), [_case(i.name, k, True) for i in SLOW_PARTS[2] for k in KINDS])
def test_damaged_evidence_keeps_the_disclosure_true_slow(
    incidents: dict[str, tuple[Path, Run]],  # noqa: F811
    tmp_path: Path,
    incident: str,
    kind: str,
) -> None:
    check_case(incidents, tmp_path, incident, kind)
