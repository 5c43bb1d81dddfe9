"""One root error class. The CLI turns it into `Error: ...` and an exit code at a single boundary."""


class ForensicsError(Exception):
    """An error the user can act on: says which file, which row, what was expected."""

    exit_code = 2


class InputError(ForensicsError):
    """Evidence that cannot be used at all (missing bundle, no readable gateway log, bad config)."""

    exit_code = 2


class CapacityError(ForensicsError):
    """A size limit of the analysis that the user can work around (the message says how)."""

    exit_code = 2


class Interrupted(BaseException):
    """SIGTERM or SIGINT stopped the command. A BaseException, like KeyboardInterrupt: no `except
    Exception` on the way up swallows it, so every cleanup runs; the CLI's boundary reports it in one
    line and exits 128 + the signal's number, as a shell does."""

    def __init__(self, signum: int, detail: str = "") -> None:
        super().__init__(signum, detail)
        self.signum = signum
        self.detail = detail
        self.exit_code = 128 + signum

    def __str__(self) -> str:
        import signal

        name = signal.Signals(self.signum).name
        return f"interrupted by {name}" + (f": {self.detail}" if self.detail else "")


# the signals received since forensics.cli.app.stopped_by_signals started listening: DuckDB turns the
# exception a signal handler raises inside a query into RuntimeError('Query interrupted'), and a
# step that catches duckdb.Error could swallow it; this record survives both (check_interrupted)
SIGNALLED: list[int] = []


def check_interrupted() -> None:
    """Raise Interrupted if a signal came in: called between steps, where an interruption that a
    query turned into another error would otherwise be lost."""
    if SIGNALLED:
        raise Interrupted(SIGNALLED[0])
