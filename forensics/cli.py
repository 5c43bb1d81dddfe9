"""Command line: parse options, call one pipeline function, print a summary.

No SQL and no row loops here. `main` is the single error boundary: a ForensicsError becomes
`Error: ...` and its exit code; anything else becomes a one-line internal error unless --debug.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from forensics import app as _app
from forensics.app import app
from forensics.errors import ForensicsError

SELF_CONTAINED = typer.Option(
    False,
    "--self-contained",
    help="Copy the page events and gateway rows into the database, so that it opens without the bundle "
    "(by default it reads the bundle's Parquet files where they lie; the copy costs about a minute per "
    "100M page events).",
)


@app.command()
def ingest(
    bundle: Path = typer.Argument(..., help="Evidence bundle folder (see the evidence-bundle spec)."),
    db: Path = typer.Option(Path("incident.duckdb"), "--db", help="DuckDB database file to write."),
    exclusions: Path | None = typer.Option(None, "--exclusions", help="exclusions.toml overriding the bundle's."),
    self_contained: bool = SELF_CONTAINED,
) -> None:
    """Load a bundle into typed DuckDB tables, with row accounting and a manifest."""
    from forensics.ingest import ingest_bundle

    result = ingest_bundle(bundle, db, exclusions=exclusions, self_contained=self_contained)
    typer.echo(result.summary())


@app.command()
def investigate(
    bundle: Path = typer.Argument(..., help="Evidence bundle folder."),
    out: Path = typer.Option(..., "--out", help="Output folder for findings and report."),
    exclusions: Path | None = typer.Option(None, "--exclusions", help="exclusions.toml overriding the bundle's."),
    as_of: str | None = typer.Option(None, "--as-of", help="Report 'as of' time (RFC 3339); none by default."),
    memory_limit: str | None = typer.Option(
        None, "--memory-limit", help="DuckDB memory limit, e.g. 8GB (default: half the machine); the rest spills."
    ),
    threads: int | None = typer.Option(None, "--threads", help="DuckDB worker threads (default: all cores)."),
    workers: int = typer.Option(
        0,
        "--workers",
        min=0,
        help="Per-node worker processes; 1 = all nodes in this process; default 0 = auto: one per node up to "
        "the cores on machines with more than 2 cores, else 1.",
    ),
    executor: str = typer.Option("process", "--executor", help="Where per-node tasks run: process or ray."),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="Ray cluster to join (default: start a local one). Paths must be shared."
    ),
    cache: Path | None = typer.Option(
        None, "--cache", help="Folder of per-node results, reused while a node's inputs are unchanged."
    ),
    since: str | None = typer.Option(
        None,
        "--since",
        help="Replay window start (RFC 3339 or YYYY-MM-DD, UTC); date= partitions before it are not read.",
    ),
    until: str | None = typer.Option(None, "--until", help="Replay window end (exclusive), like --since."),
    full_replay: bool = typer.Option(
        False,
        "--full-replay",
        help="Replay every room in detail, not only the rooms the screening pass flags (same findings, slower; "
        "for checking the screen).",
    ),
    self_contained: bool = SELF_CONTAINED,
) -> None:
    """Ingest, rebuild page ownership and provenance, write findings and the disclosure report."""
    from forensics.errors import InputError
    from forensics.nodework import EXECUTORS, Execution
    from forensics.pipeline import investigate as run

    if executor not in EXECUTORS:
        raise InputError(f"--executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    from forensics.bundle import Window

    window = Window.parse(since, until)
    execution = Execution(
        executor=executor, workers=workers, cache=cache, ray_address=ray_address, screen=not full_replay
    )
    result = run(
        bundle,
        out,
        exclusions=exclusions,
        as_of=as_of,
        memory_limit=memory_limit,
        threads=threads,
        execution=execution,
        window=window,
        self_contained=self_contained,
    )
    typer.echo(result.summary())


# the other commands, each in its cmd_* module, register themselves on the app when imported
from forensics import commands as _commands  # noqa: E402,F401


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
