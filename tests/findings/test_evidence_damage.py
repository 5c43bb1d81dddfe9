"""Issue #47, evidence damage as a finding: every loss is named, by input, with what it cost.

Each damage is built on a copy of a bundle; the expected figures are computed here from the undamaged
files (the records a file held, the lines a cut stream had), never written in.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forensics.db import connect, rows_of
from forensics.ingest import ingest_into
from forensics.paths import load_query
from forensics.pipeline import investigate
from tests import support

EXAMPLE = support.EXAMPLE / "bundle"


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _csv_records(path: Path) -> int:
    with path.open(newline="") as fh:
        return sum(1 for _ in csv.DictReader(fh))


def test_a_gateway_csv_without_its_account_column_is_named_with_the_column(tmp_path: Path) -> None:
    bundle = _copy(support.SAMPLE, tmp_path / "bundle")
    path = bundle / "gateway" / "gw-c.csv"
    held = _csv_records(path)
    text = path.read_text()
    head, rest = text.split("\n", 1)
    path.write_text(head.replace("account_id", "acct") + "\n" + rest)
    con = connect(":memory:")
    files, _ = ingest_into(con, bundle)
    (f,) = [f for f in files if f.rel == "gateway/gw-c.csv"]
    (d,) = f.damage
    assert d.kind == "skipped_file"
    assert "column account_id missing" in d.detail and "acct may be account_id renamed" in d.detail
    assert (d.records_lost, d.lost_basis) == (held, "counted")
    stored = con.execute("SELECT kind, records_lost, lost_basis FROM input_damage").fetchall()
    assert stored == [("skipped_file", held, "counted")]


def test_a_cut_gzip_keeps_what_it_read_and_estimates_what_it_lost(tmp_path: Path) -> None:
    bundle = _copy(support.SAMPLE, tmp_path / "bundle")
    path = bundle / "gateway" / "gw-b.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        total = sum(1 for line in fh if line.strip())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    con = connect(":memory:")
    files, _ = ingest_into(con, bundle)
    (f,) = [f for f in files if f.rel == "gateway/gw-b.jsonl.gz"]
    read = con.execute("SELECT count(*) FROM gateway WHERE file_id = ?", [f.file_id]).fetchone()[0]
    (d,) = f.damage
    assert d.kind == "stream_cut" and d.at_byte == len(data) // 2 and d.bytes_after == 0
    assert read == d.records_read > 0  # the whole lines before the cut are loaded, not dropped
    (row,) = rows_of(con, load_query("findings", "damage_stream_cut"))
    assert row["lost_basis"] == "estimated" and row["time_from"] is not None
    m = re.search(r"give or take ([\d,]+)", row["detail"])
    assert m, row["detail"]
    tolerance = int(m.group(1).replace(",", ""))
    assert abs(row["records_lost"] - (total - read)) <= tolerance, (row["records_lost"], total - read, tolerance)


def _damaged_example(root: Path) -> tuple[Path, dict[str, int]]:
    """The worked example with three losses: a gateway CSV without account_id (a copy of its records
    under other ids), a page file of decode-0 cut short, and one page event of decode-0 dropped from the
    middle of its seqs. Returns the bundle and what each loss holds."""
    bundle = _copy(EXAMPLE, root / "bundle")
    records = [json.loads(line) for line in (bundle / "gateway" / "gateway.jsonl").read_text().splitlines()]
    with (bundle / "gateway" / "more.csv").open("w", newline="") as fh:
        fields = [k if k != "account_id" else "acct" for k in records[0] if k != "headers"]
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in records:
            w.writerow(
                {**{k if k != "account_id" else "acct": v for k, v in r.items()}, "request_id": r["request_id"] + "-x"}
            )
    events = (bundle / "pages" / "events.jsonl").read_text().splitlines()
    decode = [i for i, line in enumerate(events) if json.loads(line)["node"] == "decode-0"]
    dropped = decode[len(decode) // 2]
    (bundle / "pages" / "events.jsonl").write_text("\n".join(e for i, e in enumerate(events) if i != dropped) + "\n")
    whole = root / "whole.parquet"
    pq.write_table(pa.table({"node": ["decode-0"], "seq": [1], "ts": ["2026-08-29T10:40:00Z"]}), whole)
    (bundle / "pages" / "decode-0.parquet").write_bytes(whole.read_bytes()[:-20])
    return bundle, {"more.csv": len(records), "seq": 1}


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int], object]:
    root = tmp_path_factory.mktemp("damaged")
    bundle, held = _damaged_example(root)
    result = investigate(bundle, root / "out")
    return root / "out", held, result


def _rows(out: Path) -> list[dict[str, str]]:
    with (out / "evidence_damage.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_every_loss_is_a_row(damaged) -> None:
    out, held, _ = damaged
    rows = {(r["input"], r["kind"]): r for r in _rows(out)}
    assert set(rows) == {
        ("gateway/more.csv", "skipped_file"),
        ("pages/decode-0.parquet", "page_file_cut"),
        ("pages/events.jsonl", "seq_gap"),  # the file holding decode-0's events: one of them is lost
    }
    skipped = rows["gateway/more.csv", "skipped_file"]
    assert "column account_id missing" in skipped["detail"]
    assert (skipped["records_lost"], skipped["lost_basis"]) == (str(held["more.csv"]), "counted")
    cut = rows["pages/decode-0.parquet", "page_file_cut"]
    assert cut["node"] == "decode-0" and cut["records_lost"] == "" and cut["lost_basis"] == "unknown"
    assert "has page events from other files" in cut["detail"]
    gap = rows["pages/events.jsonl", "seq_gap"]
    assert gap["node"] == "decode-0"
    assert (gap["records_lost"], gap["lost_basis"]) == (str(held["seq"]), "counted") and gap["time_from"]


def test_the_command_line_json_and_manifest_lead_with_it(damaged) -> None:
    out, held, result = damaged
    lines = result.summary().splitlines()
    damaged_lines = [line for line in lines if line.startswith("DAMAGED ")]
    assert lines[: len(damaged_lines)] == damaged_lines and len(damaged_lines) == 3
    assert "DAMAGED gateway/more.csv: skipped whole, column account_id missing" in lines[0]  # by input
    assert f"({held['more.csv']} records lost)" in lines[0]
    assert "records lost: unknown" in next(line for line in lines if "decode-0.parquet" in line)
    data = json.loads(result.to_json())
    assert next(iter(data)) == "evidence_damage" and len(data["evidence_damage"]) == 3
    manifest = json.loads((out / "manifest.json").read_text())
    assert [d["input"] for d in manifest["evidence_damage"]] == [r["input"] for r in _rows(out)]


def test_part_1_and_the_brief_say_it(damaged) -> None:
    out, _, _ = damaged
    md = (out / "report.md").read_text()
    block = md[md.index("## Evidence damage") : md.index("## 1. Clocks and deadlines")]
    assert md.index("## Headline") < md.index("## Evidence damage")
    assert "3 inputs of the evidence are damaged" in block
    for name in ("gateway/more.csv", "pages/decode-0.parquet", "pages/events.jsonl"):
        assert f"**{name}**" in block
    assert "no response whose evidence lies in it is cleared" in block
    assert "3 inputs of the evidence are damaged" in (out / "brief.html").read_text()


def test_an_undamaged_bundle_has_no_rows(tmp_path: Path) -> None:
    result = investigate(EXAMPLE, tmp_path / "out")
    assert _rows(tmp_path / "out") == []
    assert result.summary().splitlines()[0] == "No damage found in the evidence read."
    assert json.loads(result.to_json())["evidence_damage"] == []
    md = (tmp_path / "out" / "report.md").read_text()
    assert "No damage found in the evidence read." in md[md.index("## Evidence damage") :]
    assert "No damage found in the evidence read." in (tmp_path / "out" / "brief.html").read_text()
