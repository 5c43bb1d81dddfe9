"""Issue #37: a simulated incident whose engine logs are exported from a log shipper (each format of
forensics.intake.shippers, as tests/support/shipperkit.py writes it) gives findings CSVs byte-identical to
the same incident's plain engine logs: in engine/<node>/ folders, and as one export per pod directly under
engine/ whose labels name the node (bundle.toml [shipper] mapping journald's hosts to nodes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.pipeline import investigate
from forensics.simulate import build_config, simulate
from tests.support.shipperkit import FORMATS, LABELLED, wrap_bundle

SEEDS = {"seed3": {"seed": 3, "requests": 250}, "seed8-p32": {"seed": 8, "requests": 250, "page_size": 32}}


def _csvs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.csv"))}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, bytes]]]:
    tmp = tmp_path_factory.mktemp("shipped")
    got = {}
    for case, kw in SEEDS.items():
        simulate(tmp / case, build_config("default", **kw))
        investigate(tmp / case / "bundle", tmp / f"{case}-out", as_of="2026-10-01T00:00:00Z")
        got[case] = (tmp / case / "bundle", _csvs(tmp / f"{case}-out"))
    return got


# every format in node folders on one seed, and at the root (labels name the node) on the other
RUNS = [(fmt, "seed3", False) for fmt in FORMATS] + [(fmt, "seed8-p32", True) for fmt in LABELLED]


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "case", "at_root"), RUNS)
def test_findings_are_those_of_the_plain_logs(
    plain: dict[str, tuple[Path, dict[str, bytes]]], tmp_path: Path, fmt: str, case: str, at_root: bool
) -> None:
    bundle, want = plain[case]
    wrap_bundle(bundle, tmp_path / "bundle", fmt, at_root=at_root)
    assert not list((tmp_path / "bundle" / "engine").rglob("server.log"))  # nothing left unwrapped
    investigate(tmp_path / "bundle", tmp_path / "out", as_of="2026-10-01T00:00:00Z")
    got = _csvs(tmp_path / "out")
    assert sorted(got) == sorted(want)
    assert [n for n in want if got[n] != want[n]] == []
