"""Issue #47, damaged gateway logs: a cut gzip file of every format read up to its break, an SMG log whose
request_id was renamed named by the field, a gateway file never delivered seen by its shadow (rooms the
engines served that no record names), and the only gateway log unusable refused in one line.

Expectations are computed here from the undamaged files (the whole lines before a cut read as a plain
file, the rooms the removed records named), never written in.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import zlib
from datetime import datetime
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from forensics.db import connect, rows_of
from forensics.findings.damage import GAP_PARAMS, _select
from forensics.ingest import ingest_gateway, ingest_into
from tests import support

FIXTURES = Path(__file__).parent.parent / "fixtures" / "gateway"
TS = re.compile(r"(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d))")  # a record's ts: the first time it holds
ROWS = "SELECT request_id, account_id, ts, model, status, prompt_tokens FROM gateway ORDER BY request_id, ts"


def _read_gateway(bundle: Path) -> tuple[list[tuple], list]:
    con = connect(":memory:")
    try:
        files = ingest_gateway(con, bundle)
        return con.execute(ROWS).fetchall(), files
    finally:
        con.close()


def _cut_at_half(plain: bytes) -> tuple[bytes, bytes]:
    """A gzip of `plain` cut at the first compressed byte whose prefix decompresses to half the lines or
    more, and the whole lines that prefix holds (what a reader can still read)."""
    packed = gzip.compress(plain, compresslevel=9, mtime=0)
    half = plain.count(b"\n") // 2
    for at in range(10, len(packed)):
        got = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(packed[:at])
        if got.count(b"\n") >= max(half, 2):
            return packed[:at], got[: got.rfind(b"\n") + 1]
    raise AssertionError("no cut holds half the lines")


@pytest.mark.parametrize(
    "name", ["litellm_spendlogs.csv", "otlp.jsonl", "smg.jsonl", "envoy.jsonl", "litellm_payload.jsonl"]
)
def test_a_cut_gzip_gateway_file_of_any_format_is_read_up_to_its_break(tmp_path: Path, name: str) -> None:
    plain = (FIXTURES / name).read_bytes()
    cut, whole_lines = _cut_at_half(plain)
    damaged = tmp_path / "damaged"
    (damaged / "gateway").mkdir(parents=True)
    (damaged / "gateway" / f"{name}.gz").write_bytes(cut)
    expected = tmp_path / "expected"  # the same whole lines, delivered as a plain file
    (expected / "gateway").mkdir(parents=True)
    (expected / "gateway" / name).write_bytes(whole_lines)
    want, _ = _read_gateway(expected)
    got, (f,) = _read_gateway(damaged)
    assert want, "the cut must leave records to read"
    assert got == want
    assert f.error is None
    (d,) = [d for d in f.damage if d.kind == "stream_cut"]
    assert d.at_byte == len(cut) and d.bytes_after == 0
    assert f.rows_rejected >= 1  # the cut itself


def test_a_cut_gzip_csv_beside_other_gateway_files_is_estimated(tmp_path: Path) -> None:
    bundle = shutil.copytree(support.SAMPLE, tmp_path / "bundle")
    src = bundle / "gateway" / "gw-c.csv"
    cut, whole_lines = _cut_at_half(src.read_bytes())
    src.unlink()
    (bundle / "gateway" / "gw-c.csv.gz").write_bytes(cut)
    con = connect(":memory:")
    files, _ = ingest_into(con, bundle)
    (f,) = [f for f in files if f.rel == "gateway/gw-c.csv.gz"]
    read = con.execute("SELECT count(*) FROM gateway WHERE file_id = ?", [f.file_id]).fetchone()[0]
    assert f.error is None and read == whole_lines.count(b"\n") - 1  # every whole row after the header
    (row,) = rows_of(con, _select("damage_stream_cut"))
    assert row["input"] == "gateway/gw-c.csv.gz" and row["lost_basis"] == "estimated"


def _smg_renamed(tmp: Path, only: str | None) -> tuple[Path, list[dict]]:
    """The SMG fixture with request_id renamed requestId in every line (only: in the lines of that request)."""
    recs = [json.loads(line) for line in (FIXTURES / "smg.jsonl").read_text().splitlines() if line.strip()]

    def rename(v: object) -> object:
        if isinstance(v, dict):
            hit = only is None or v.get("request_id") == only
            return {("requestId" if k == "request_id" and hit else k): rename(x) for k, x in v.items()}
        return [rename(x) for x in v] if isinstance(v, list) else v

    out = [rename(r) for r in recs]
    b = tmp / "bundle"
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / "smg.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    return b, recs


def _request_id(rec: dict) -> str | None:
    return (rec.get("span") or {}).get("request_id")


def test_an_smg_log_without_request_id_is_skipped_naming_the_field(tmp_path: Path) -> None:
    b, recs = _smg_renamed(tmp_path, None)
    requests = sum(r.get("message") == "started processing request" for r in recs)
    con = connect(":memory:")
    (f,) = ingest_gateway(con, b)
    assert f.error and "field request_id missing" in f.error and "requestId may be request_id renamed" in f.error
    (d,) = f.damage
    assert d.kind == "skipped_file" and (d.records_lost, d.lost_basis) == (requests, "counted")
    assert con.execute("SELECT count(*) FROM gateway").fetchone()[0] == 0


def test_smg_lines_of_a_request_without_request_id_are_rejected_naming_it(tmp_path: Path) -> None:
    recs = [json.loads(line) for line in (FIXTURES / "smg.jsonl").read_text().splitlines() if line.strip()]
    ids = sorted({i for r in recs if (i := _request_id(r))})
    b, _ = _smg_renamed(tmp_path, ids[0])
    unnamed = sum(_request_id(r) == ids[0] for r in recs)
    con = connect(":memory:")
    (f,) = ingest_gateway(con, b)
    assert f.error is None
    reasons = [r for (r,) in con.execute("SELECT reason FROM rejected").fetchall()]
    assert len(reasons) == unnamed and all(r.startswith("no request_id:") for r in reasons)
    got = [r for (r,) in con.execute("SELECT request_id FROM gateway ORDER BY 1").fetchall()]
    assert got == ids[1:]


# --- a gateway file never delivered: its shadow ------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_rooms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The undamaged sample, ingested: its gap rows (none), each record's room and time, the rooms the
    engines finished."""
    con = connect(tmp_path_factory.mktemp("sample") / "db.duckdb")
    ingest_into(con, support.SAMPLE)
    gaps = rows_of(con, _select("damage_gateway_gap"), GAP_PARAMS)
    records = con.execute(
        "SELECT f.path, g.ts, g.bootstrap_room FROM gateway g JOIN files f USING (file_id)"
    ).fetchall()
    finished = {r for (r,) in con.execute("SELECT room FROM engine_requests WHERE kind = 'finished'").fetchall()}
    con.close()
    return {"gaps": gaps, "records": records, "finished": finished}


def _gap_rows(bundle: Path) -> list[dict]:
    con = connect(":memory:")
    ingest_into(con, bundle)
    return rows_of(con, _select("damage_gateway_gap"), GAP_PARAMS)


def _lost_rooms(records: list[tuple], gone, finished: set[int]) -> int:  # noqa: ANN001 (a predicate)
    kept = {room for path, ts, room in records if not gone(path, ts)}
    lost = {room for path, ts, room in records if gone(path, ts)}
    return len((lost - kept) & finished)


def test_the_undamaged_sample_has_no_gap(sample_rooms: dict) -> None:
    assert sample_rooms["gaps"] == []


def test_a_gateway_file_of_several_side_by_side_missing_is_counted(tmp_path: Path, sample_rooms: dict) -> None:
    bundle = shutil.copytree(support.SAMPLE, tmp_path / "bundle")
    (bundle / "gateway" / "gw-a.jsonl").unlink()
    want = _lost_rooms(sample_rooms["records"], lambda path, ts: path == "gateway/gw-a.jsonl", sample_rooms["finished"])
    (row,) = _gap_rows(bundle)
    assert (row["input"], row["source"], row["kind"], row["lost_basis"]) == ("gateway/", "gateway", "gateway_gap",
                                                                          "counted")  # fmt: skip
    assert row["records_lost"] == want > 0
    assert "spread over that time" in row["detail"]


def _drop_between(bundle: Path, t0: datetime, t1: datetime) -> None:
    """Every gateway record received from t0 to t1 removed from every file: the export of that time lost."""
    for path in sorted((bundle / "gateway").iterdir()):
        if path.name.endswith(".parquet"):
            t = pq.read_table(path)
            ts = t["ts"]
            keep = pc.or_(pc.less(ts, pc.cast(t0, ts.type)), pc.greater(ts, pc.cast(t1, ts.type)))
            pq.write_table(t.filter(keep), path)
            continue
        opened = gzip.open if path.name.endswith(".gz") else open
        with opened(path, "rt") as fh:
            lines = fh.read().splitlines(keepends=True)
        head = lines[:1] if ".csv" in path.name else []
        kept = list(head)
        for line in lines[len(head) :]:
            m = TS.search(line)
            assert m, line
            if not t0 <= datetime.fromisoformat(m[1].replace("Z", "+00:00")) <= t1:
                kept.append(line)
        with opened(path, "wt") as fh:
            fh.write("".join(kept))


def test_a_time_range_of_the_gateway_log_missing_is_a_gap(tmp_path: Path, sample_rooms: dict) -> None:
    records = sample_rooms["records"]
    times = sorted(ts for _, ts, _ in records)
    t0, t1 = times[len(times) * 2 // 5], times[len(times) // 2]
    bundle = shutil.copytree(support.SAMPLE, tmp_path / "bundle")
    _drop_between(bundle, t0, t1)
    want = _lost_rooms(records, lambda path, ts: t0 <= ts <= t1, sample_rooms["finished"])
    rows = _gap_rows(bundle)
    assert [r["kind"] for r in rows] == ["gateway_gap"], rows
    (row,) = rows
    # the gap counts the rooms the removed records named, give or take the few at its edges that finished
    # among recorded ones (the run's tolerance): never more than were removed
    assert want * 0.95 <= row["records_lost"] <= want, (row["records_lost"], want)
    assert t0 <= row["time_from"] <= t1 <= row["time_to"]
    assert "may be missing, cut short or skipped" in row["detail"]


# --- the only gateway log unusable: the run stops in one line -------------------------------------------


def test_the_only_gateway_log_without_request_id_is_refused_naming_the_field(tmp_path: Path) -> None:
    bundle = shutil.copytree(support.EXAMPLE / "bundle", tmp_path / "bundle")
    (bundle / "gateway" / "gateway.jsonl").unlink()
    text = (FIXTURES / "litellm_spendlogs.csv").read_text()
    head, rest = text.split("\n", 1)
    (bundle / "gateway" / "spend_logs.csv").write_text(head.replace("request_id", "req_id") + "\n" + rest)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "forensics", "investigate", str(bundle), "--out", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "gateway/spend_logs.csv" in line and "request_id missing" in line
    assert "req_id may be request_id renamed" in line and "To go on:" in line
    assert not out.exists()


def test_a_file_whose_records_all_lack_the_account_field_says_so(tmp_path: Path) -> None:
    text = (FIXTURES / "envoy.jsonl").read_text()
    b = tmp_path / "bundle"
    (b / "gateway").mkdir(parents=True)
    (b / "gateway" / "envoy.jsonl").write_text(text.replace('"x-tenant-id"', '"x_tenant_id"'))
    records = sum(1 for line in text.splitlines() if line.strip())
    con = connect(":memory:")
    (f,) = ingest_gateway(con, b)
    assert f.error is None and con.execute("SELECT count(*) FROM gateway").fetchone()[0] == records
    (d,) = f.damage
    assert (
        d.kind == "missing_field"
        and "x-tenant-id" in d.detail
        and (d.records_lost, d.lost_basis)
        == (
            records,
            "counted",
        )
    )
    # the undamaged file: some record names its account, so nothing is said
    (b / "gateway" / "envoy.jsonl").write_text(text)
    con = connect(":memory:")
    (f,) = ingest_gateway(con, b)
    assert f.damage == []
