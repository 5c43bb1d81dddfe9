"""Helpers the tests share: the analysis on a connection (analysis), bundles built from rows
(bundlekit), broken and hostile inputs (broken), comparison with the simulator's truth (truthcheck)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
TESTS = ROOT / "tests"
DATA = TESTS / "data"
EXAMPLE = DATA / "example"  # a copy of shared/spec/example: the contract's worked example
GOLDEN = TESTS / "golden"
REFERENCE = TESTS / "reference"  # SQL definitions the fast paths are checked against
SAMPLE = ROOT / "sample_data" / "bundle"
BENCH = ROOT / "benchmarks"
