"""#47's fault-injection suite: every damage kind of tests.support.damage on simulated incidents (seeds,
page sizes 1 / 16 / 64, with and without page telemetry, the gateway formats of the registry), each
damaged copy investigated as a user would (the CLI's stdout, report.md, incident.duckdb) and held to the
simulator's truth:
- no confirmed response that the truth calls unexposed;
- every truly exposed response listed (confirmed or indeterminate), by request id, engine rid or room;
- every true (recipient, source) pair among the exposures or the possible sources;
- the damaged input named on the command line and in part 1 (before "## 1.");
- duplicates and reordering: findings byte-identical to the undamaged run's.
The first incidents run always; the rest, marked slow, are in test_fault_injection_slow*.py (files of
their own, SLOW_PARTS: the test run gives each file to one worker, so the two workers share them).
`python -m tests.damage.matrix` prints the same checks as counts, damage kind x incident."""

from __future__ import annotations

import filecmp
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.damage import KINDS, apply
from tests.support.faultcheck import (
    FAST,
    INCIDENTS,
    SLOW,
    SLOW_PARTS,
    Run,
    Truth,
    damaged_run,
    investigate,
    measure,
    simulated,
)

# Damage the tool does not yet answer soundly, each named with what fails (a strict xfail: the day one
# passes, the mark must go).
OPEN: dict[tuple[str, str], str] = {}  # (incident, kind) -> why it fails: strict xfails, none today


def _case(incident: str, kind: str, slow: bool) -> object:
    marks = [pytest.mark.slow] if slow else []
    if (incident, kind) in OPEN:
        marks.append(pytest.mark.xfail(strict=True, reason=OPEN[incident, kind]))
    return pytest.param(incident, kind, id=f"{incident}-{kind}", marks=marks)


CASES = [_case(i.name, k, False) for i in FAST for k in KINDS]  # SLOW: test_fault_injection_slow*.py


@pytest.fixture(scope="module")
def faults_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder: its simulated incidents under sims/ (each simulated once), their runs beside."""
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def incidents(faults_root: Path) -> dict[str, tuple[Path, Run]]:
    """Each incident simulated and investigated undamaged once per module (per xdist worker)."""
    root = faults_root

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, name: str) -> tuple[Path, Run]:
            sim = simulated(INCIDENTS[name], root / "sims")
            clean = investigate(sim / "bundle", root / name / "clean-out")
            self[name] = (sim, clean)
            return self[name]

    return Lazy()


@pytest.mark.parametrize(("incident", "kind"), CASES)
def test_damaged_evidence_keeps_the_disclosure_true(
    incidents: dict[str, tuple[Path, Run]], tmp_path: Path, incident: str, kind: str
) -> None:
    check_case(incidents, tmp_path, incident, kind)


def check_case(incidents: dict[str, tuple[Path, Run]], tmp_path: Path, incident: str, kind: str) -> None:
    """One damage kind on one incident, held to the five properties."""
    sim, clean = incidents[incident]
    assert clean.exit_code == 0, clean.error
    f = damaged_run(sim, kind, INCIDENTS[incident].seed, tmp_path, clean)
    assert f.exposed_total and f.pairs_total, "the incident must expose something for the checks to mean anything"
    assert not f.failures(), f"{f.damage}:\n" + "\n".join(f.failures())


def slow_part(part: int) -> Any:
    """The test of one part of the slow incidents (SLOW_PARTS[part]), every damage kind on each: each
    part's file (test_fault_injection_slow*.py) binds it under one name, so the two workers, which take a
    file at a time, share the slow incidents."""

    @pytest.mark.slow
    @pytest.mark.parametrize(("incident", "kind"), [_case(i.name, k, True) for i in SLOW_PARTS[part] for k in KINDS])
    def test_damaged_evidence_keeps_the_disclosure_true_slow(
        incidents: dict[str, tuple[Path, Run]], tmp_path: Path, incident: str, kind: str
    ) -> None:
        check_case(incidents, tmp_path, incident, kind)

    return test_damaged_evidence_keeps_the_disclosure_true_slow


@pytest.mark.parametrize("name", [i.name for i in FAST])
def test_the_undamaged_incident_holds(incidents: dict[str, tuple[Path, Run]], name: str) -> None:
    """The control: without damage the truth's properties hold, so a failure above is the damage's."""
    from tests.support.damage import Damage

    sim, clean = incidents[name]
    f = measure(Truth(sim), Damage("none", "-", "-", "no damage"), clean, None)
    assert f.exposed_total and f.pairs_total
    assert not (f.error or f.false_confirmed or f.exposed_missing or f.pairs_missing), f.failures()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_damage_is_seeded_and_true_to_its_record(faults_root: Path, tmp_path: Path, kind: str) -> None:
    """The same seed damages the same bytes; another seed may not; the record's input is what changed."""
    sim = simulated(FAST[0], faults_root / "sims")  # the module's undamaged incident (damage goes to copies)
    copies = []
    for n in range(2):
        b = tmp_path / f"b{n}"
        shutil.copytree(sim / "bundle", b)
        copies.append((b, apply(kind, b, 3)))
    (a, da), (b, db) = copies
    assert da == db
    cmp = filecmp.dircmp(a, b)
    assert not _differs(cmp), f"seed 3 twice gave different bundles: {_differs(cmp)}"
    orig = sim / "bundle"
    changed = _differs(filecmp.dircmp(orig, a))
    if da.named:
        assert any(p.startswith(da.input) for p in changed), changed
    else:
        assert not (a / da.input).exists() and changed
    if da.invariant:
        assert da.records_lost is None
    else:
        assert da.records_lost, "a damage that loses records says how many"


def _differs(cmp: filecmp.dircmp, base: str = "") -> list[str]:  # type: ignore[type-arg]
    out = [base + n for n in cmp.left_only + cmp.right_only + cmp.diff_files]
    for name, sub in cmp.subdirs.items():
        out += _differs(sub, f"{base}{name}/")
    return out


def test_the_slow_files_share_out_every_slow_incident_once() -> None:
    """SLOW_PARTS, a test file each, hold every slow incident exactly once: splitting the files dropped none."""
    parted = [i.name for part in SLOW_PARTS for i in part]
    assert sorted(parted) == sorted(i.name for i in SLOW) and len(set(parted)) == len(parted)
    files = sorted(p.name for p in Path(__file__).parent.glob("test_fault_injection_slow*.py"))
    assert len(files) == len(SLOW_PARTS), files
    bound = sorted(t for f in files for t in re.findall(r"slow_part\((\d+)\)", (Path(__file__).parent / f).read_text()))
    assert bound == [str(n) for n in range(len(SLOW_PARTS))], bound  # each part bound by one file
