"""Writing findings files: CSV cells neutralized against formula injection, stable formatting, private modes;
every file written whole or not at all (a temporary file beside it, renamed over it), and a finished
output folder swapped in for the previous one (swap_in)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import duckdb

from forensics.db import ident, scalar, sql_literal
from forensics.errors import InputError

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralize(value: str) -> str:
    """A text cell a spreadsheet would run as a formula gets a leading apostrophe."""
    return "'" + value if value.startswith(FORMULA_START) else value


def fmt_ts(value: datetime) -> str:
    """UTC, millisecond precision (floored), Z suffix: 2026-08-29T10:40:10.012Z. Naive values are UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    elif value.utcoffset():
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return fmt_ts(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return neutralize(value)
    return value


def private_open(path: Path, mode: str = "w"):
    """Outputs hold customer identifiers: created readable by the owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.chmod(path, 0o600)
    return os.fdopen(fd, mode, encoding="utf-8", newline="")


# the scratch this tool keeps beside an output while it builds or swaps it: <name>.kvf-<kind>-<pid>
# (tmp: a file being written; staging: a folder being built; previous: the folder a swap replaces)
SCRATCH = re.compile(r"(?P<target>.+)\.kvf-(?P<kind>tmp|staging|previous)-(?P<pid>[0-9]+)")


def scratch_path(target: Path, kind: str) -> Path:
    """Where this process builds (or sets aside) `target`: beside it, so on its file system, and a rename
    away from its place."""
    return target.with_name(f"{target.name}.kvf-{kind}-{os.getpid()}")


def is_scratch(name: str) -> bool:
    return SCRATCH.fullmatch(name) is not None


@contextmanager
def atomic_open(path: Path) -> Iterator[IO[str]]:
    """A private text file written beside `path` and renamed over it once complete: a reader (or a run
    that stops half-way) sees the old file or the new one, never a part."""
    tmp = scratch_path(path, "tmp")
    try:
        with private_open(tmp) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def _replaced_atomically(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` for a library (DuckDB's COPY) to write, renamed over `path` after."""
    tmp = scratch_path(path, "tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


SWAP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def _signals_held() -> Iterator[list[int]]:
    """SIGTERM and SIGINT recorded, not acted on, for the few system calls of a swap: a handler that
    raised between them would leave neither the old folder nor the new one in place. (Only the main
    thread sets handlers; elsewhere the swap runs unguarded.)"""
    held: list[int] = []
    try:
        previous = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in SWAP_SIGNALS}
    except ValueError:  # not the main thread
        yield held
        return
    try:
        yield held
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def swap_in(staging: Path, target: Path) -> None:
    """Put the finished folder `staging` in the place of `target` (which may not exist): two renames on
    one file system, target to target.kvf-previous-<pid>, then staging to target; the previous folder
    is removed after. Between the two renames (microseconds, with SIGTERM and SIGINT held) `target` does
    not exist; a process killed outright there (SIGKILL, power loss) leaves the previous outputs whole
    under the previous name, and the next run puts them back (recover). A signal that arrives during the
    swap (held through the previous folder's removal) finds the work finished and is let go, as it would
    be a moment later when the process exits."""
    previous = scratch_path(target, "previous")
    with _signals_held():
        if target.exists() or target.is_symlink():
            os.rename(target, previous)
        try:
            os.rename(staging, target)
        except OSError:
            if previous.exists():
                os.rename(previous, target)
            raise
        shutil.rmtree(previous, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():  # this process's scratch from an earlier call that could not clean up
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def recover(target: Path) -> list[str]:
    """What an earlier run killed outright left beside `target`, settled before a new run starts: a
    folder or file it was still building is removed (it was never an output); the previous outputs a
    swap had set aside are put back if `target` is missing (killed between the two renames), else
    removed (the swap had finished). Scratch of a process still running is left alone. Returns one line
    per thing done, to tell the user."""
    done: list[str] = []
    if not target.parent.is_dir():
        return done
    for p in sorted(target.parent.iterdir()):
        m = SCRATCH.fullmatch(p.name)
        if m is None or m["target"] != target.name or _alive(int(m["pid"])):
            continue
        if m["kind"] == "previous" and not (target.exists() or target.is_symlink()):
            os.rename(p, target)
            done.append(f"{target}: restored from {p.name}, the outputs an interrupted run had set aside")
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
        what = "set aside by a finished run" if m["kind"] == "previous" else "left unfinished by a stopped run"
        done.append(f"{p}: removed ({what})")
    return done


def check_swappable(out: Path) -> None:
    """investigate's finished outputs replace --out by renaming a folder beside it: a mount point cannot be
    renamed, and the folder that holds --out must take new entries."""
    if out.is_dir() and os.path.ismount(out):
        raise InputError(f"--out {out}: is a mount point; choose a folder inside it")
    parent = next((p for p in out.parents if p.exists()), Path("."))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: the run builds its outputs beside it, and {parent} is not writable")


def carry_over(out: Path, staging: Path, ours: Callable[[str], bool]) -> None:
    """investigate --force into a folder holding entries that are not `ours`: they are kept, carried into
    the new folder as hard links (copies where the file system has none), so that the swap removes none
    of them and the manifest lists them as they are in --out."""
    if not out.is_dir():
        return
    for p in sorted(out.iterdir()):
        if ours(p.name) or is_scratch(p.name):
            continue
        dst = staging / p.name
        if p.is_symlink():
            os.symlink(os.readlink(p), dst)
        elif p.is_dir():
            shutil.copytree(p, dst, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(p, dst)


def link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def keep_mode(out: Path, staging: Path) -> None:
    """The new --out keeps the permissions the operator gave the folder it replaces (a new one is
    owner-only, as every output)."""
    if out.is_dir():
        os.chmod(staging, stat.S_IMODE(out.stat().st_mode))


@contextmanager
def private_files() -> Iterator[None]:
    """Files created meanwhile (the DuckDB database, its WAL and spill files) are private to the owner."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def make_private(path: Path) -> None:
    """An output that may pre-date this run (or was made by a library) is made owner-only."""
    if path.exists():
        os.chmod(path, 0o700 if path.is_dir() else 0o600)


def _formatted(name: str, dtype: str) -> str:
    """SQL that renders one result column as its CSV cell (the rules of `cell`, applied inside DuckDB)."""
    col = ident(name)
    if dtype.startswith("TIMESTAMP"):  # UTC (the session time zone), milliseconds floored, Z
        return f"strftime({col}, '%Y-%m-%dT%H:%M:%S.%g') || 'Z'"
    if dtype == "BOOLEAN":
        return f"CASE WHEN {col} THEN 'yes' WHEN NOT {col} THEN 'no' END"
    if dtype == "VARCHAR":
        starts = ", ".join(sql_literal(c) for c in FORMULA_START)
        return f"CASE WHEN left({col}, 1) IN ({starts}) THEN chr(39) || {col} ELSE nullif({col}, '') END"
    return col


def write_csv(
    con: duckdb.DuckDBPyConnection, query: str, path: Path, params: dict[str, Any] | list[Any] | None = None
) -> int:
    """Run `query` and write its rows as CSV; text, time and yes/no cells are formatted inside DuckDB."""
    # materialized first: DuckDB may drop an ORDER BY inside a subquery, a table's rowid keeps it
    con.execute(f"CREATE OR REPLACE TEMP TABLE csv_out AS {query}", params or [])
    described = con.execute("DESCRIBE csv_out").fetchall()
    n = int(scalar(con, "SELECT count(*) FROM csv_out"))
    header = ", ".join(f"{_formatted(c, str(t))} AS {ident(c)}" for c, t, *_ in described)
    # DuckDB creates the file: owner-only from the start, under its final name only when complete
    with private_files(), _replaced_atomically(path) as tmp:
        con.execute(
            f"COPY (SELECT {header} FROM csv_out ORDER BY rowid) TO {sql_literal(tmp)} (FORMAT csv, HEADER true)"
        )
    make_private(path)
    con.execute("DROP TABLE csv_out")
    return n


def write_parquet(con: duckdb.DuckDBPyConnection, table: str, path: Path) -> int:
    """A findings table as Parquet, typed (timestamps stay timestamps, counts stay integers): for the
    analyst who loads the large tables into another tool. Owner-only, like every output."""
    n = int(scalar(con, f"SELECT count(*) FROM {ident(table)}"))
    with private_files(), _replaced_atomically(path) as tmp:
        con.execute(f"COPY {ident(table)} TO {sql_literal(tmp)} (FORMAT parquet, COMPRESSION zstd)")
    make_private(path)
    return n


def write_json(obj: Any, path: Path) -> None:
    with atomic_open(path) as fh:
        fh.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
