"""SIEM export: the findings of an investigate output folder, and watch alerts, as SIEM events.

One event per row of affected_responses.csv (or of incident.duckdb's view of it when the CSVs are
gone) and one per line of a watch alerts file, in one of four formats, each written from its own
documentation (tests/fixtures/siem/SOURCES.md lists them):

- ``cef``: ArcSight Common Event Format, OpenText (Micro Focus) "Implementing ArcSight CEF", CEF
  Implementation Standard (SmartConnectors 25.1), chapter 1 (header, character encoding) and chapter 2
  (extension dictionary: rt, duser, suser, dhost, shost, externalId, msg, reason, cs1..cs6, cn1..cn3,
  filePath), appendix A (rt as milliseconds since the epoch). With ``--syslog`` each CEF line is framed
  as an RFC 5424 syslog message (UDP: RFC 5426, one message per datagram; TCP: RFC 6587 octet
  counting).
- ``hec``: Splunk HTTP Event Collector, "Format events for HTTP Event Collector" (event metadata
  ``time`` in epoch seconds, ``host``, ``source``, ``sourcetype``, ``index``; the data in ``event``;
  events batched one after another as /services/collector/event accepts them).
- ``ecs``: Elastic Common Schema 9.4.0 (elastic/ecs generated/ecs/ecs_flat.yml at tag v9.4.0): the
  categorization fields take only their allowed values; ``labels`` holds keyword strings only.
- ``ocsf``: OCSF 1.8.0 Data Security Finding (class_uid 2006; forensics.siem.ocsf cites the schema files).

Every value comes from a log and is hostile: CEF escapes per its character-encoding rules, JSON is
written by json.dumps (which escapes quotes, backslashes and control characters). The findings' text
cells are read as the CSV has them, already neutralized against formula injection
(forensics.outputs.neutralize); alert strings get the same rule here.
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forensics.errors import InputError
from forensics.outputs import neutralize
from forensics.siem import cef, ecs, hec, ocsf
from forensics.siem.model import Event

FORMATS = ("cef", "hec", "ecs", "ocsf")

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
ALERT_SEVERITY = {
    "exposure": 8,
    "canary_violation": 8,
    "placeholder_signature": 7,
    "checksum_mismatch": 7,
    "late_transfer": 6,
    "nixl_expired": 6,
    "nixl_failure": 5,
    "pool_smaller_than_context": 4,
    "mooncake_failure": 4,
}
UNKNOWN_ALERT_SEVERITY = 5


def _parse_ts(text: str, where: str) -> datetime:
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{where}: {text!r} is not an ISO 8601 time") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


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
    return inc["id"], _parse_ts(finished, f"{path}: run.finished_at") if isinstance(finished, str) else None


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
            when = _parse_ts(row["first_exposed_at"], where)
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


def _clean_alert(value: Any) -> Any:
    """Alert strings come straight from logs: the CSV outputs' formula rule applies to them too."""
    if isinstance(value, str):
        return neutralize(value)
    if isinstance(value, list):
        return [_clean_alert(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean_alert(v) for k, v in value.items()}
    return value


def alerts(path: Path, incident: str) -> Iterator[Event]:
    try:
        f = path.open("rb")
    except OSError as err:
        raise InputError(f"{path}: {err.strerror or err}") from None
    with f:
        for n, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{path}: line {n}: not UTF-8") from None
            if not line.strip():
                continue
            try:
                a = json.loads(line)
            except (ValueError, RecursionError) as err:  # RecursionError: nested too deep to read
                why = err.msg if isinstance(err, json.JSONDecodeError) else "nested too deep"
                raise InputError(f"{path}: line {n}: not JSON ({why})") from None
            if not isinstance(a, dict) or not isinstance(a.get("kind"), str) or not isinstance(a.get("node"), str):
                raise InputError(f"{path}: line {n}: not a watch alert (needs kind and node)")
            when = a.get("log_time") or a.get("detected_at")
            if not isinstance(when, str):
                raise InputError(f"{path}: line {n}: no log_time or detected_at")
            ts = _parse_ts(when, f"{path}: line {n}: log_time")
            a = _clean_alert(a)
            ev = a.get("evidence") if isinstance(a.get("evidence"), list) else []
            a["evidence"] = [e for e in ev if isinstance(e, dict)]
            room = a.get("room")
            a["room"] = "" if room is None else str(room)  # 64-bit ids: a JSON number loses digits
            kind, node = a["kind"], a["node"]
            yield Event(
                source="alert",
                signature_id=f"kvf-alert-{kind}",
                name=f"KV leak alert ({kind})",
                severity=ALERT_SEVERITY.get(kind, UNKNOWN_ALERT_SEVERITY),
                time=ts,
                event_id=f"{incident}:alert:{kind}:{a['room'] or node}",
                message=str(a.get("summary") or kind),
                host=node,
                incident=incident,
                row=a,
            )


def events(out_dir: Path, alerts_path: Path | None = None) -> Iterator[Event]:
    if not out_dir.is_dir():
        raise InputError(f"{out_dir}: not a folder (expected the output folder of forensics investigate)")
    inc, made_at = incident_id(out_dir)
    yield from findings(out_dir, inc, made_at)
    if alerts_path is not None:
        yield from alerts(alerts_path, inc)


def render(ev: Event, fmt: str, index: str | None = None) -> str:
    if fmt == "cef":
        return cef.render(ev)
    if fmt == "hec":
        return hec.render(ev, index)
    if fmt == "ecs":
        return ecs.render(ev)
    if fmt == "ocsf":
        return ocsf.render(ev)
    raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")


def export(
    out_dir: Path,
    fmt: str,
    alerts_path: Path | None = None,
    output: Path | None = None,
    syslog: str | None = None,
    index: str | None = None,
    stdout: Any = None,
) -> dict[str, int]:
    """Write (or send) one event per finding and alert; returns the counts. Output files are private
    (they hold customer identifiers), as every output of the tool, and written whole or not at all: the
    events go to a file beside --output, renamed over it once the last is written."""
    import sys
    from contextlib import ExitStack

    from forensics.outputs import atomic_open

    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: not one of {', '.join(FORMATS)}")
    if syslog is not None and fmt != "cef":
        raise InputError(f"--syslog sends CEF (RFC 5424 syslog): use --format cef, not {fmt}")
    if index is not None and fmt != "hec":
        raise InputError("--index is Splunk HEC metadata: use it with --format hec")
    if output is not None and output.is_dir():
        raise InputError(f"{output}: is a folder (--output names the file to write)")
    counts = {"finding": 0, "alert": 0}
    with ExitStack() as stack:
        sender = None
        if syslog is not None:
            from forensics.siem.syslog import Sender

            sender = Sender(syslog)
            stack.callback(sender.close)
        evs = list(events(out_dir, alerts_path))  # every input checked before anything is written or sent
        out = None
        if output is not None:
            try:
                out = stack.enter_context(atomic_open(output))
            except OSError as err:
                raise InputError(f"{output}: {err.strerror or err}") from None
        elif sender is None:
            out = stdout or sys.stdout
        for ev in evs:
            line = render(ev, fmt, index)
            if out is not None:
                out.write(line + "\n")
            if sender is not None:
                from forensics.siem.syslog import frame

                sender.send(frame(line, ev.severity, ev.source))
            counts[ev.source] += 1
    return counts
