"""`forensics audit-config`: each engine's KV pool size against its context length, from its logs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from forensics.cli.app import app

PathsArg = Annotated[list[Path], typer.Argument(help="Engine log files or folders (one server per folder).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON array, one object per server.")]
ContextOpt = Annotated[
    int | None, typer.Option("--context-length", min=1, help="Context length to use when a log states none.")
]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Also exit 1 when a server's verdict is unknown.")]


@app.command("audit-config")
def audit_config(
    paths: PathsArg, as_json: JsonOpt = False, context_length: ContextOpt = None, strict: StrictOpt = False
) -> None:
    """Audit each engine's KV pool size against its context length, from its logs."""
    from forensics.audit import TOO_SMALL, UNKNOWN, audit_paths
    from forensics.audit.render import as_json as render_json
    from forensics.audit.render import table

    audits = audit_paths(paths, context_length=context_length)
    typer.echo(render_json(audits) if as_json else table(audits))
    failed = any(a.verdict == TOO_SMALL or (strict and a.verdict == UNKNOWN) for a in audits)
    # SystemExit, not typer.Exit: cli.main runs the app with standalone_mode=False, where click
    # turns typer.Exit into a return value that main() does not pass on.
    sys.exit(1 if failed else 0)
