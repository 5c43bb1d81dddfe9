"""The walk from a notice line to its evidence (issue #51), for `forensics verify`: every finding id a notice
of the compliance pack cites (`ar-` or `ex-` and 16 hex digits: forensics.report.evidence) is a row of the
pack's evidence.csv, and every evidence line that row names (`file:line` in the bundle) is a line of an
input the run hashed: a text file's line (a gzip file's, unpacked), a Parquet file's row, a JSON array's
element. The hashes prove that no byte changed since the manifest was written; this proves that what a
notice cites is there, so a notice edited and the manifest hashed again over it still fails, naming the
notice file and the id.

The notices walked are the pack's (pack/notices/, each jurisdiction's folder included) and investigate's
(notices/: the pack's are hard links of them, each file read once). An id-shaped request id that a
notice lists (requests.csv) is not taken for a citation.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

import duckdb

EVIDENCE = "pack/evidence.csv"
NOTICE_FOLDERS = ("pack/notices", "notices")
ID = r"(?:ar|ex)-[0-9a-f]{16}"
# an id where it stands alone: not inside a longer name (a path, a request id that holds one)
FINDING_ID = re.compile(rf"(?<![A-Za-z0-9_.:/-]){ID}(?![A-Za-z0-9_.-])")
CSV = "header = true, all_varchar = true, quote = '\"', escape = '\"', delim = ','"


@dataclass
class Walk:
    """What the walk found: failures name the notice file (or evidence.csv) and the id."""

    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cited: int = 0  # citations walked (an id per notice that cites it)


def walk(out: Path, bundle: Path | None, inputs: set[str]) -> Walk:
    """Every citation of every notice in OUT against OUT/pack/evidence.csv and, where the bundle folder
    is there, every evidence line a cited row names against the run's inputs (`inputs`: their paths in
    the bundle)."""
    w = Walk()
    index = out / EVIDENCE
    if not index.is_file():  # no pack: nothing to walk to (verify's summary counts 0 citations)
        return w
    con = duckdb.connect()
    try:
        ids = _ids(con, index)
        unsound = _unsound_refs(con, index, bundle, inputs, w)
        listed = _id_shaped_requests(con, out)
    except duckdb.Error as err:
        w.failures.append(f"{index}: not readable as the evidence index ({str(err).splitlines()[0]})")
        return w
    finally:
        con.close()
    seen: set[tuple[int, int]] = set()
    for folder in NOTICE_FOLDERS:
        for path in _notice_files(out / folder):
            st = os.stat(path)
            if (st.st_dev, st.st_ino) in seen:  # the pack's hard link of investigate's notice
                continue
            seen.add((st.st_dev, st.st_ino))
            with open(path, encoding="utf-8", errors="replace") as f:
                found = set(FINDING_ID.findall(f.read())) - listed
            for fid in sorted(found):
                w.cited += 1
                if fid not in ids:
                    w.failures.append(f"{path}: cites finding {fid}, which {EVIDENCE} does not hold")
                elif fid in unsound:
                    w.failures.append(f"{path}: cites finding {fid}, whose evidence line {unsound[fid]}")
    return w


def _notice_files(folder: Path) -> list[str]:
    """The notices in `folder` and its subfolders (the CSVs beside them list, they do not cite)."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found += [os.path.join(root, f) for f in sorted(files) if not f.endswith(".csv")]
    return found


def _ids(con: duckdb.DuckDBPyConnection, index: Path) -> set[str]:
    rows = con.execute(f"SELECT finding_id FROM read_csv($p, {CSV})", {"p": str(index)}).fetchall()
    return {r[0] for r in rows}


def _id_shaped_requests(con: duckdb.DuckDBPyConnection, out: Path) -> set[str]:
    """Request ids the notices list that look like a finding id (ids are the logs' text)."""
    got: set[str] = set()
    for folder in NOTICE_FOLDERS:
        for root, _, files in os.walk(out / folder):
            if "requests.csv" in files:
                rows = con.execute(
                    f"SELECT DISTINCT request_id FROM read_csv($p, {CSV}) WHERE regexp_full_match(request_id, $id)",
                    {"p": os.path.join(root, "requests.csv"), "id": ID},
                ).fetchall()
                got |= {r[0] for r in rows}
    return got


def _unsound_refs(
    con: duckdb.DuckDBPyConnection, index: Path, bundle: Path | None, inputs: set[str], w: Walk
) -> dict[str, str]:
    """Per finding id, the first of its evidence lines that is not a line of an input, and why."""
    if bundle is None or not bundle.is_dir():
        w.notes.append("evidence lines not checked: the bundle folder is not there (pass --bundle)")
        return {}
    con.execute(
        f"""CREATE TEMP TABLE refs AS
            SELECT finding_id, ref, regexp_extract(ref, '^(.*):([0-9]+)$', 1) AS path,
                   TRY_CAST(regexp_extract(ref, '^(.*):([0-9]+)$', 2) AS BIGINT) AS line
            FROM (SELECT finding_id, unnest(string_split(evidence_refs, ';')) AS ref
                  FROM read_csv($p, {CSV}) WHERE coalesce(evidence_refs, '') <> '')""",
        {"p": str(index)},
    )
    unsound: dict[str, str] = {}
    for path, top in con.execute("SELECT path, max(line) FROM refs GROUP BY path ORDER BY path").fetchall():
        if path not in inputs:
            why, last = "names no input of the run", -1
        else:
            last = _records(con, bundle / path)
            if top <= last:
                continue
            why = f"is past the end of the file ({last:,} lines)"
        rows = con.execute(
            "SELECT finding_id, min(ref) FROM refs WHERE path = $path AND (line IS NULL OR line < 1 OR line > $last) "
            "GROUP BY finding_id",
            {"path": path, "last": last},
        ).fetchall()
        for fid, ref in rows:
            unsound.setdefault(fid, f"{ref} {why}")
    return unsound


def _records(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    """How many lines (rows of a Parquet file, elements of a JSON array) `path` has: the last `line` an
    evidence reference to it may name."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        row = con.execute("SELECT count(*) FROM read_parquet($p)", {"p": str(path)}).fetchone()
        return int(row[0]) if row else 0
    f = cast(IO[bytes], gzip.open(path, "rb") if name.endswith(".gz") else open(path, "rb"))  # noqa: SIM115
    lines, last = 0, b""
    with f:
        try:
            head = f.read(1 << 16)
            if name.endswith((".json", ".json.gz")) and head.lstrip().startswith(b"["):
                try:
                    data = json.loads(head + f.read())
                except ValueError:
                    data = None
                if isinstance(data, list):
                    return len(data)
            lines, last = head.count(b"\n"), head[-1:]
            while chunk := f.read(1 << 20):
                lines, last = lines + chunk.count(b"\n"), chunk[-1:]
        except (OSError, EOFError, zlib.error):  # a cut gzip stream: its lines up to the break, as ingest read them
            pass
    return lines + (1 if last and last != b"\n" else 0)
