"""The Run (forensics.pipeline): a run's inputs read and checked once, before any work, then handed down
frozen to the stages (#49)."""

from __future__ import annotations

import dataclasses
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from forensics.pipeline import investigate
from forensics.run import load_run
from tests.support import EXAMPLE


def test_investigate_reads_bundle_toml_and_the_exclusions_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: Counter[str] = Counter()
    load = tomllib.load

    def counted(fh: Any, **kw: Any) -> dict[str, Any]:
        reads[Path(fh.name).name] += 1
        return load(fh, **kw)

    read_bytes = Path.read_bytes

    def counted_bytes(self: Path) -> bytes:  # intake.read_toml_hashed: the bytes parsed are the bytes hashed
        if self.suffix == ".toml":
            reads[self.name] += 1
        return read_bytes(self)

    monkeypatch.setattr(tomllib, "load", counted)
    monkeypatch.setattr(Path, "read_bytes", counted_bytes)
    bundle = EXAMPLE / "bundle"
    assert (bundle / "bundle.toml").is_file() and (bundle / "exclusions.toml").is_file()
    out = tmp_path / "out"
    investigate(bundle, out)
    investigate(bundle, out)  # into a previous run's --out: its incident id is checked against the same read
    # jurisdictions.toml: the shipped notification rules (forensics/report), read once per run too
    assert reads == {"bundle.toml": 2, "exclusions.toml": 2, "jurisdictions.toml": 2}


def test_the_run_is_frozen_and_holds_what_the_files_say() -> None:
    bundle = EXAMPLE / "bundle"
    run = load_run(bundle, as_of="2026-09-10T12:00:00Z", threads=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.as_of = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.config.incident = {}  # type: ignore[misc]
    raw = tomllib.loads((bundle / "bundle.toml").read_text())
    assert run.config.incident.get("id") == raw.get("incident", {}).get("id")
    assert run.exclusions == bundle / "exclusions.toml"
    cohorts = tomllib.loads(run.exclusions.read_text())["cohort"]
    assert [(r.cohort, r.index) for r in run.rules] == [
        (c["name"], i) for c in cohorts for i in range(1, len(c["match"]) + 1)
    ]
    assert run.as_of is not None and run.as_of.isoformat() == "2026-09-10T12:00:00+00:00"
    assert run.execution.threads == 1  # the run's threads hold for the per-node tasks too
