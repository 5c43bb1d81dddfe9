"""`forensics export-siem OUT_DIR --format cef|hec|ecs|ocsf`: the findings of an investigate output folder (and
the alerts of a watch alerts file) as SIEM events, one per affected response and per alert
(forensics.siem)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.app import app

EPILOG = """Examples:

  forensics export-siem out/ --format ecs --output findings.ecs.jsonl

  forensics export-siem out/ --format ocsf --alerts alerts.jsonl --output findings.ocsf.jsonl

  forensics export-siem out/ --format hec --alerts alerts.jsonl --index security > hec.jsonl

  forensics export-siem out/ --format cef --syslog tcp://siem.example.com:514   # plain TCP, octet counting (no TLS)
"""


@app.command("export-siem", epilog=EPILOG)
def export_siem(
    out_dir: Annotated[Path, typer.Argument(help="Output folder of forensics investigate.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="cef (ArcSight CEF), hec (Splunk HEC JSON), ecs (Elastic) or ocsf (OCSF 1.8.0 Data Security Finding).",
        ),
    ],
    alerts: Annotated[
        Path | None, typer.Option("--alerts", help="A watch alerts file (JSON lines): one event per alert too.")
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", help="Write the events here; default stdout.")] = None,
    syslog: Annotated[
        str | None,
        typer.Option("--syslog", help="Send CEF as RFC 5424 syslog to [udp://|tcp://]HOST:PORT (UDP by default)."),
    ] = None,
    index: Annotated[str | None, typer.Option("--index", help="Splunk index (HEC metadata).")] = None,
) -> None:
    """Export findings and watch alerts as SIEM events (CEF, Splunk HEC, Elastic Common Schema, OCSF)."""
    from forensics.siem import export

    counts = export(out_dir, fmt.lower(), alerts, output, syslog, index)
    where = " and ".join(x for x in (str(output) if output else "", f"syslog {syslog}" if syslog else "") if x)
    print(
        f"export-siem: {counts['finding']} findings, {counts['alert']} alerts as {fmt.lower()}"
        + (f" to {where}" if where else ""),
        file=sys.stderr,
    )
