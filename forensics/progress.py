"""Stage progress on stderr for a long run: a spinner naming the stage and step under way with its
elapsed time, and one line per finished stage. It shows only on a terminal (a pipe or a log file gets
nothing, so scripted runs and the findings stay byte-identical) and never with --quiet.

forensics.db.timed reports every timed block here: a label without '/' is a stage (ingest, cohorts,
ownership, findings, write_findings, report), a label with one is a step of the stage before the '/'.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

STAGE_NAMES = {
    "ingest": "reading the evidence",
    "cohorts": "labelling cohorts",
    "ownership": "rebuilding page ownership",
    "findings": "computing findings",
    "write_findings": "writing the findings CSVs",
    "report": "rendering the report",
    "copy_in_place": "copying the evidence into the database",
    "publish": "documenting the database (views and comments)",
}


class _Display:
    """A rich status line on stderr; the stage lines are printed above it as each stage ends."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self.stage: str | None = None
        self.step: str | None = None
        self.t_run = time.perf_counter()
        self.status = console.status(self, spinner="dots")  # renders __rich__ below at every refresh
        self.status.start()

    def __rich__(self) -> str:
        """The status text, made at each refresh so that the elapsed time runs during a long step."""
        elapsed = time.perf_counter() - self.t_run
        if self.stage is None:
            return f"starting  ({elapsed:.0f} s)"
        where = f" > {self.step}" if self.step else ""
        return f"{self.stage}{where}  ({STAGE_NAMES.get(self.stage, '')}; {elapsed:.0f} s so far)"

    def started(self, label: str) -> None:
        stage, _, step = label.partition("/")
        if not step:
            self.stage = stage
        self.step = step or None

    def ended(self, label: str, seconds: float) -> None:
        if "/" not in label:
            self.console.print(f"[green]done[/] {label:<15} {seconds:8.1f} s   {STAGE_NAMES.get(label, '')}")
        self.step = None

    def close(self) -> None:
        self.status.stop()
        self.console.print(f"finished in {time.perf_counter() - self.t_run:.1f} s")


_display: _Display | None = None


def started(label: str) -> None:
    if _display is not None:
        _display.started(label)


def ended(label: str, seconds: float) -> None:
    if _display is not None:
        _display.ended(label, seconds)


@contextmanager
def shown(quiet: bool = False, force: bool | None = None) -> Iterator[bool]:
    """Show progress for the block when stderr is a terminal (or `force`), unless `quiet`; yields
    whether it is shown."""
    global _display
    from rich.console import Console

    console = Console(stderr=True, force_terminal=force, highlight=False)
    if quiet or not (console.is_terminal if force is None else force) or _display is not None:
        yield False
        return
    _display = _Display(console)
    try:
        yield True
    finally:
        _display.close()
        _display = None
