"""Helpers the tests share: the analysis on a connection (analysis), bundles built from rows
(bundlekit), broken and hostile inputs (broken), comparison with the simulator's truth (truthcheck)."""

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLE = DATA / "example"  # a copy of shared/spec/example: the contract's worked example
