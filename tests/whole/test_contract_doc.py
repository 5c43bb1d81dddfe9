"""docs/evidence-bundle.md, the contract the project ships, stays in step with its readers and writers:
the gateway and page-event fields it lists are the ones ingest reads, every output file of its section 7
is written, with the columns it requires."""

from __future__ import annotations

import csv
import re

from forensics.contract import GATEWAY_FIELDS, PAGE_SCHEMA
from tests import support

DOC = support.ROOT / "docs" / "evidence-bundle.md"


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def _first_cells(section: str) -> list[str]:
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    return [row.split("|")[1].strip() for row in rows[1:]]


def test_the_gateway_and_page_fields_are_the_readers() -> None:
    gateway = [f.strip() for cell in _first_cells(_section("## 2. Gateway log")) for f in cell.split(",")]
    assert gateway == list(GATEWAY_FIELDS)
    pages = [f.strip() for cell in _first_cells(_section("## 4. Page events")) for f in cell.split(",")]
    assert pages == PAGE_SCHEMA.names


def test_every_output_of_section_7_is_written_with_its_columns(sample_out) -> None:
    section = _section("## 7. Outputs")
    rows = [line.split("|") for line in section.splitlines() if re.match(r"\| \S+\.(csv|json|html|md|duckdb)", line)]
    assert len(rows) >= 8
    for row in rows:
        for name in re.split(r",\s*", row[1].strip()):
            assert (sample_out / name).exists(), name
            if name.endswith(".csv") and row[3].strip():
                with (sample_out / name).open(newline="") as fh:
                    header = next(csv.reader(fh))
                required = [c.split("(")[0].strip() for c in row[3].split(",")]
                assert set(required) <= set(header), (name, set(required) - set(header))


def test_the_doc_points_nowhere_outside_the_project() -> None:
    assert "../shared" not in DOC.read_text() and "../notes" not in DOC.read_text()
