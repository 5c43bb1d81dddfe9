"""SIEM export: the findings of an investigate output folder, and watch alerts, as SIEM events.

One event per row of affected_responses.csv (or of incident.duckdb's view of it when the CSVs are
gone) and one per line of a watch alerts file, in one of four formats, each written from its own
documentation (tests/fixtures/siem/SOURCES.md lists them); the findings are read by finding_events.py,
the alerts by alert_events.py:

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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from forensics.errors import InputError
from forensics.siem import cef, ecs, hec, ocsf
from forensics.siem.alert_events import alerts
from forensics.siem.finding_events import findings, incident_id
from forensics.siem.model import Event

FORMATS = ("cef", "hec", "ecs", "ocsf")


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
