"""Command line: parse options, call one pipeline function, print a summary.

No SQL and no row loops here. Each command lives in its own module (investigate: ingest and
investigate; audit, cohorts, simulate), a thin wrapper around one module function, registered on
the Typer app of forensics.cli.app when imported below. `main` is the single error boundary: a
ForensicsError becomes `Error: ...` and its exit code; anything else becomes a one-line internal
error unless --debug.
"""

from __future__ import annotations

import os
import sys

import typer

from forensics.cli import app as _app
from forensics.cli import audit, cohorts, investigate, notices, pack, siem, simulate, verify, watch  # noqa: F401  (they register their commands)
from forensics.cli.app import app
from forensics.errors import ForensicsError, Interrupted


def main() -> None:
    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except typer.TyperException as err:  # usage errors: the parser's own message, exit 2
        show = getattr(err, "show", None)
        if show:
            show()
        else:
            typer.echo(f"Error: {err}", err=True)
        sys.exit(getattr(err, "exit_code", 2))
    except ForensicsError as err:
        if _app.DEBUG:
            raise
        typer.echo(f"Error: {err}", err=True)
        sys.exit(err.exit_code)
    except Interrupted as err:  # SIGTERM/SIGINT under forensics.cli.app.stopped_by_signals
        if _app.DEBUG:
            raise
        typer.echo(f"Error: {err}", err=True)
        sys.exit(err.exit_code)
    except (typer.Exit, SystemExit) as ex:
        code = getattr(ex, "exit_code", getattr(ex, "code", 0))
        sys.exit(code if isinstance(code, int) else 1)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(130)
    except Exception as err:  # the boundary: no traceback reaches the user
        if _app.DEBUG or os.environ.get("FORENSICS_DEBUG"):
            raise
        typer.echo(f"Error: internal error: {type(err).__name__}: {err} (run with --debug for details)", err=True)
        sys.exit(3)
