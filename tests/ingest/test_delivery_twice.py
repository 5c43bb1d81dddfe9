"""At-least-once delivery and reordered batches (#47): lines delivered twice, blocks of lines shuffled
within a file, page-event row groups out of order give the same findings, row for row, as the undamaged
bundle; the copies are counted per file (input_duplicates), never loaded as new evidence.

Where engine logs are the evidence (a decode node without page telemetry), a finding cites each line by
its file and line number ("engine/decode-2/server.log line 93"): a copy or a moved block before it moves
the line, and the citation rightly follows it. There the findings are compared with the line numbers
read as "line N"; with page telemetry on every decode node, byte for byte."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from forensics.paths import load_query
from forensics.simulate import build_config, simulate
from tests.support.analysis import Findings
from tests.support.delivery import deliver_twice, reorder, reorder_pages

CSVS = ("affected_responses", "exposures", "accounts", "possible_sources", "hazards", "coverage")


@pytest.fixture(scope="module", params=[(4, 16, None), (2, 64, "decode-2")], ids=["pages", "dark"])
def sim(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Findings, bool]:
    seed, page_size, dark = request.param
    out = tmp_path_factory.mktemp("twice")
    simulate(out, build_config("default", seed=seed, requests=500, page_size=page_size, no_telemetry=dark))
    return out / "bundle", Findings(out / "bundle"), dark is None


def _findings(f: Findings) -> dict[str, list[tuple]]:
    """The findings CSVs' rows, with every cited line number read as "line N" where a citation is text."""
    cite = re.compile(r"\bline \d+")
    return {
        name: [tuple(cite.sub("line N", v) if isinstance(v, str) else v for v in r) for r in rows]
        for name in CSVS
        for rows in [f.rows(load_query("findings", f"{name}_csv"))]
    }


def _same(f: Findings, sim: tuple[Path, Findings, bool]) -> None:
    if sim[2]:  # page telemetry everywhere: nothing cites a line, byte for byte
        assert {n: f.rows(load_query("findings", f"{n}_csv")) for n in CSVS} == {
            n: sim[1].rows(load_query("findings", f"{n}_csv")) for n in CSVS
        }
    assert _findings(f) == _findings(sim[1])


def _copy(tmp_path: Path, bundle: Path) -> Path:
    shutil.copytree(bundle, tmp_path / "bundle")
    return tmp_path / "bundle"


def test_lines_delivered_twice(tmp_path: Path, sim: tuple[Path, Findings, bool]) -> None:
    bundle = _copy(tmp_path, sim[0])
    added = deliver_twice(bundle, seed=7)
    f = Findings(bundle)
    _same(f, sim)
    counted = dict(f.rows("SELECT path, duplicates FROM input_duplicates"))
    for path, n in added.items():
        # every copy of a gateway record or a request log line is counted; a server log also holds lines
        # that are no request line (start-up, batch lines), whose copies the findings do not read
        if path.startswith("gateway/") or path.endswith("requests.jsonl"):
            assert counted.get(path, 0) == n, path
        else:
            assert counted.get(path, 0) <= n, path
    assert not sim[1].rows("SELECT * FROM input_duplicates")


def test_blocks_reordered(tmp_path: Path, sim: tuple[Path, Findings, bool]) -> None:
    bundle = _copy(tmp_path, sim[0])
    reorder(bundle, seed=7)
    f = Findings(bundle)
    _same(f, sim)
    assert f.rows("SELECT count(*) FROM input_duplicates WHERE out_of_order > 0")[0][0] > 0


def test_page_rows_reordered(tmp_path: Path, sim: tuple[Path, Findings, bool]) -> None:
    bundle = _copy(tmp_path, sim[0])
    reorder_pages(bundle, seed=7)
    _same(Findings(bundle), sim)
