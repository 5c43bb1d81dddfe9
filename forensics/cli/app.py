"""The command-line app object and its global options. The commands register on it: ingest and
investigate in forensics.cli.investigate, the others in their own modules of forensics.cli (imported by forensics.cli).
It lives apart from forensics.cli so that the command modules import it without importing the CLI
that imports them."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from forensics.errors import SIGNALLED, Interrupted

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="KV Forensics: find responses that attended another request's KV cache, and report them.",
    pretty_exceptions_enable=False,
    # help texts are plain text: "[scale]", "[engine]" and "[udp://|tcp://]" are words, not rich markup
    rich_markup_mode=None,
)

DEBUG = False  # set by --debug (before the command), read by forensics.cli.main's error boundary


def _show_version(value: bool) -> None:
    if value:
        import duckdb

        import forensics

        typer.echo(f"kv-forensics {forensics.__version__} (DuckDB {duckdb.__version__})")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks on errors."),
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """KV Forensics."""
    global DEBUG
    DEBUG = debug


@contextmanager
def stopped_by_signals(detail: str = "") -> Iterator[None]:
    """SIGTERM and SIGINT raise Interrupted in the main thread, so that the command's cleanup runs (a
    default SIGTERM ends the process with no cleanup at all). Whatever error the interruption turns
    into on its way up (DuckDB makes it RuntimeError('Query interrupted')), it leaves as Interrupted,
    with `detail`: what the cleanup guarantees. Later signals are only recorded, so that they cannot
    cut the cleanup short."""

    def handler(signum: int, frame: object) -> None:
        SIGNALLED.append(signum)
        if len(SIGNALLED) == 1:
            raise Interrupted(signum)

    SIGNALLED.clear()
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    except BaseException as err:
        if SIGNALLED:
            raise Interrupted(SIGNALLED[0], detail) from err
        raise
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        SIGNALLED.clear()  # the record is this command's: a later run in the same process starts clean
