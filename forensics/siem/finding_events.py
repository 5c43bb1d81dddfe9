"""The findings of an investigate output folder as SIEM events (forensics.siem): one per row of
affected_responses.csv, or of incident.duckdb's view of it when the CSVs are gone, with its source
requests and their accounts (exposures.csv) and the incident's id from manifest.json."""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from forensics.errors import InputError
from forensics.siem.model import Event, parse_ts

# Severity on CEF's 0-10 scale (agentSeverity: 0-3 Low, 4-6 Medium, 7-8 High, 9-10 Very-High), used as
# ECS event.severity and in HEC's event too: one scale across formats.
FINDING_SEVERITY = {("confirmed", "pages"): 9, ("confirmed", "signature"): 8}
INDETERMINATE_SEVERITY = 5
# what a finding's evidence is, in its message (affected_responses.csv evidence)
EVIDENCE_BY = {
    "pages": "page events",
    "signature": "the placeholder signature",
    "none": "no evidence either way (no page events, and no engine line read decides it)",
}


def incident_id(out_dir: Path) -> tuple[str, datetime | None]:
    """The incident id of the output folder (manifest.json), and when its run finished."""
    path = out_dir / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: not found (expected the output folder of forensics investigate)") from None
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: not readable JSON ({err})") from None
    inc = manifest.get("incident") if isinstance(manifest, dict) else None
    if not isinstance(inc, dict) or not isinstance(inc.get("id"), str) or not inc["id"]:
        raise InputError(f"{path}: no incident id (incident.id)")
    run = manifest.get("run") if isinstance(manifest.get("run"), dict) else {}
    finished = run.get("finished_at")
    return inc["id"], parse_ts(finished, f"{path}: run.finished_at") if isinstance(finished, str) else None


def _read_csv(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        f = path.open(encoding="utf-8", newline="")
    except FileNotFoundError:
        raise InputError(f"{path}: not found (expected the output folder of forensics investigate)") from None
    with f:
        reader = csv.DictReader(f)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
        try:
            yield from enumerate(reader, start=2)
        except (csv.Error, UnicodeDecodeError) as err:
            raise InputError(f"{path}: line {reader.line_num}: {err}") from None


@contextmanager
def _tables(out_dir: Path) -> Iterator[Path]:
    """The folder to read the findings CSVs from: OUT_DIR itself, or (when affected_responses.csv is gone
    and incident.duckdb is there) a private temporary copy written from the database's views by the same
    CSV writer investigate uses, so the cells are the same either way."""
    db = out_dir / "incident.duckdb"
    if (out_dir / "affected_responses.csv").exists() or not db.exists():
        yield out_dir
        return
    import duckdb

    from forensics.outputs import write_csv

    with tempfile.TemporaryDirectory(prefix="kvf-siem-") as tmp:
        try:
            con = duckdb.connect(str(db), read_only=True)
        except duckdb.Error as err:
            raise InputError(f"{db}: not readable ({str(err).splitlines()[0]})") from None
        try:
            write_csv(
                con, "SELECT * FROM main.affected_responses ORDER BY request_id", Path(tmp) / "affected_responses.csv"
            )
            write_csv(
                con,
                "SELECT recipient_request_id, source_request_id, source_account_id FROM main.exposures",
                Path(tmp) / "exposures.csv",
            )
        except duckdb.Error as err:
            raise InputError(f"{db}: no findings views ({str(err).splitlines()[0]})") from None
        finally:
            con.close()
        yield Path(tmp)


def source_pairs(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """Per recipient request, the (source request, source account) pairs whose KV it attended
    (exposures.csv): whose data, for suser and OCSF's resources. Read by DuckDB's CSV reader, which
    investigate's CSV writer (DuckDB's too) is read back by as written: a large incident's file holds
    millions of pairs, which Python's csv module reads ten times slower."""
    path = folder / "exposures.csv"
    if not path.exists():
        return {}
    import duckdb

    need = ("recipient_request_id", "source_request_id", "source_account_id")
    with path.open(encoding="utf-8", newline="") as f:
        header = next(csv.reader(f), [])
    missing = [c for c in need if c not in header]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    con = duckdb.connect()
    try:
        rows = con.execute(
            """SELECT DISTINCT coalesce(recipient_request_id, ''), coalesce(source_request_id, ''), source_account_id
               FROM read_csv($path, header = true, all_varchar = true, quote = '"', escape = '"', delim = ',')
               WHERE coalesce(source_account_id, '') <> '' ORDER BY ALL""",
            {"path": str(path)},
        ).fetchall()
    except duckdb.Error as err:
        raise InputError(f"{path}: not readable as CSV ({str(err).splitlines()[0]})") from None
    finally:
        con.close()
    by: dict[str, list[tuple[str, str]]] = {}
    for recipient, source, account in rows:
        by.setdefault(recipient, []).append((source, account))
    return by


def findings(out_dir: Path, incident: str, made_at: datetime | None = None) -> Iterator[Event]:
    with _tables(out_dir) as folder:
        yield from _findings(folder, incident, made_at)


def _findings(folder: Path, incident: str, made_at: datetime | None) -> Iterator[Event]:
    path = folder / "affected_responses.csv"
    sources = source_pairs(folder)
    need = ("request_id", "account_id", "cohort", "status", "evidence", "first_exposed_at", "source_requests")
    for n, row in _read_csv(path, need):
        status, evidence = row["status"], row["evidence"]
        sev = FINDING_SEVERITY.get((status, evidence), INDETERMINATE_SEVERITY)
        where = f"{path}: line {n}: first_exposed_at"
        if row["first_exposed_at"]:
            when = parse_ts(row["first_exposed_at"], where)
        elif made_at is not None:  # no time of its own: when the finding was made (ECS: first seen)
            when = made_at
        else:
            raise InputError(f"{where}: empty, and manifest.json has no run.finished_at")
        row = dict(row)
        pairs = sources.get(row["request_id"], [])
        row["source_accounts"] = ";".join(sorted({acct for _, acct in pairs}))
        by = EVIDENCE_BY.get(evidence, "the placeholder signature")
        verb = "attended" if status == "confirmed" else "may have attended"  # the evidence decides neither way
        yield Event(
            source="finding",
            signature_id=f"kvf-exposure-{evidence or 'unknown'}",
            name=f"KV cache exposure ({status or 'unknown'}, {evidence or 'unknown'})",
            severity=sev,
            time=when,
            event_id=f"{incident}:{row['request_id']}",
            message=f"response {row['request_id']} of account {row['account_id']} ({row['cohort']}) {verb} "
            f"another request's KV cache on {row.get('decode_node') or 'an unknown node'}: {status}, by {by}, "
            f"{row['source_requests'] or 'unknown'} source requests",
            host=row.get("decode_node") or "",
            incident=incident,
            row=row,
            sources=pairs,
        )
