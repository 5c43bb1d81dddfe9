"""Issue #8: the same evidence gives byte-identical findings and reports, run after run, on 1 or 2 threads."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from forensics.ownership import steps as node_steps
from forensics.pipeline import investigate
from forensics.simulate import build_config, simulate

COMPARED = (
    "affected_responses.csv",
    "exposures.csv",
    "accounts.csv",
    "hazards.csv",
    "coverage.csv",
    "rejected.csv",
    "notifications.csv",
    "shared_prefix.csv",
    "manifest.json",
    "report.md",
    "report.html",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("determinism")
    simulate(tmp / "sim", build_config("default", seed=11, requests=150))
    bundle = tmp / "sim" / "bundle"
    (bundle / "gateway" / "zz-junk.jsonl").write_text(  # rejected rows too
        'not json\n{"ts": "yesterday", "request_id": 1, "account_id": "a", "status": 200}\n'
    )
    outs = []
    for i, threads in enumerate((1, 2, 2)):
        out = tmp / f"run{i}"
        investigate(bundle, out, threads=threads)
        outs.append(out)
    # the timeline as a ranked table (when keys would not fit in a view: timeline_ranked.sql) gives the
    # same findings and report as the view (the screen then reads it sorted; the report's provenance
    # reads page_events and timeline_xfer either way)
    real = node_steps.run_query

    def ranked(con, stage, name, **params):
        return real(con, stage, "timeline_ranked" if name == "timeline_view" else name, **params)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(node_steps, "run_query", ranked)
        investigate(bundle, tmp / "ranked", threads=2)
    views = duckdb.connect(str(tmp / "ranked" / "incident.duckdb"), read_only=True)
    assert not views.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'timeline'").fetchall()[0][0]
    views.close()
    outs.append(tmp / "ranked")
    return outs


def test_findings_are_not_empty(runs: list[Path]) -> None:
    assert len((runs[0] / "exposures.csv").read_text().splitlines()) > 1
    assert len((runs[0] / "rejected.csv").read_text().splitlines()) == 3


@pytest.mark.parametrize("name", COMPARED)
def test_two_runs_and_thread_counts_give_identical_bytes(runs: list[Path], name: str) -> None:
    first = _evidence_bytes(runs[0] / name)
    for other in runs[1:]:
        assert _evidence_bytes(other / name) == first, f"{name} differs between {runs[0].name} and {other.name}"
    extra = sorted(p.name for p in runs[0].glob("blast_*.csv"))
    for n in extra:
        assert all((o / n).read_bytes() == (runs[0] / n).read_bytes() for o in runs[1:]), n


def _evidence_bytes(path: Path) -> bytes:
    """The file's bytes; for the manifest, without its `run` section (the command, the operator, the
    times and the database's hash: a record of this run, not a function of the evidence)."""
    if path.name != "manifest.json":
        return path.read_bytes()
    manifest = json.loads(path.read_text())
    assert set(manifest.pop("run")) == {
        "command",
        "operator",
        "started_at",
        "finished_at",
        "bundle",
        "exclusions",
        "previous_manifest",
        "outputs_sha256",
    }
    return json.dumps(manifest, sort_keys=True).encode()


def test_output_hashes_agree_between_runs(runs: list[Path]) -> None:
    """Every output's recorded hash is the same run after run, except the database's (DuckDB's file
    layout is not byte-stable)."""
    hashes = [json.loads((r / "manifest.json").read_text())["run"]["outputs_sha256"] for r in runs]
    for h in hashes:
        h.pop("incident.duckdb")
    assert all(h == hashes[0] for h in hashes[1:])
