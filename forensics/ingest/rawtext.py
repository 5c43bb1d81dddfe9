"""Read a text file (plain or gzip) as one row per line, keeping line numbers, through DuckDB's reader.

A gzip file cut short is read up to the cut (what was written before it is still evidence) and the
cut is reported. A line that is not UTF-8 (or longer than MAX_LINE) does not make the file
unreadable: it becomes a marker line (BAD_LINE + reason) that the staging queries reject with that
reason. Used for JSONL gateway logs and JSONL page events; `salvaged` gives the other gateway
readers (CSV, JSON arrays, a format's own reader) the same reading of a cut gzip file.
"""

from __future__ import annotations

import gzip
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import IO

import duckdb

from forensics.intake import InputFile
from forensics.intake.damage import Damage
from forensics.paths import load_query

MAX_LINE = 64 << 20
BAD_LINE = "\x1f"  # starts a marker line (never valid JSON): the rest says why the line was unusable


def open_bytes(f: InputFile) -> IO[bytes]:
    """A file of the bundle opened for reading, decompressed when its name ends in .gz."""
    return gzip.open(f.path, "rb") if f.rel.lower().endswith(".gz") else f.path.open("rb")  # type: ignore[return-value]


def _load(con: duckdb.DuckDBPyConnection, path: Path, table: str) -> None:
    lines = load_query("ingest", "text_lines")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {lines}", {"path": str(path), "max_line": MAX_LINE})


def readable_chunks(f: InputFile, size: int = 1 << 20) -> Iterator[bytes]:
    """The decompressed bytes of a file in chunks, up to where a cut or damaged stream breaks: a look at
    its head or a count of its lines must not stop the run (the loader records the break as damage)."""
    try:
        with open_bytes(f) as fh:
            while chunk := fh.read(size):
                yield chunk
    except (EOFError, OSError, zlib.error):  # gzip.BadGzipFile is an OSError
        return


CHUNK = 1 << 16  # compressed bytes fed at a time: a break is placed within this many bytes


def _salvage_gzip(path: Path, f: InputFile) -> tuple[Path, bool] | None:
    """Decompress what can be read of a gzip file (every member) into a temp file: (path, damaged);
    None if the file cannot be opened. A damaged or cut stream keeps the whole lines before the damage,
    and the break is recorded on `f` (a stream_cut Damage: where it breaks, what was read before it)."""
    out = tempfile.NamedTemporaryFile(prefix="kvf-salvage-", suffix=".txt", delete=False)
    got = 0
    fed = 0  # compressed bytes handed to the decompressor
    broke_at: int | None = None  # compressed offset of the chunk the decompressor failed in
    try:
        with out:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            with path.open("rb") as fh:
                while chunk := fh.read(CHUNK):
                    start = fed
                    fed += len(chunk)
                    while chunk:
                        try:
                            data = d.decompress(chunk)
                        except zlib.error:
                            broke_at = start
                            break
                        out.write(data)
                        got += len(data)
                        chunk = b""
                        if d.eof:  # the next gzip member, if any, starts in unused_data
                            chunk = d.unused_data
                            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    if broke_at is not None:
                        break
            damaged = broke_at is not None or not d.eof and (got > 0 or bool(d.unconsumed_tail))
            if not damaged:
                return Path(out.name), False
        text = Path(out.name).read_bytes()
        # drop a last line cut mid-way: it is counted as a rejected row by the caller
        cut = text.rfind(b"\n")
        kept = text[: cut + 1] if cut >= 0 else b""
        Path(out.name).write_bytes(kept)
        size = path.stat().st_size
        lines = kept.count(b"\n")
        at = broke_at if broke_at is not None else size
        f.notes.append(f"gzip stream is damaged or cut short: read {got} bytes before the damage")
        where = (
            f"the gzip stream breaks within compressed bytes {at:,} to {min(at + CHUNK, size):,} of {size:,}"
            if broke_at is not None
            else f"the gzip stream is cut short: the file ends at byte {size:,} before the stream does"
        )
        f.damage.append(
            Damage(
                "stream_cut",
                f"{where}; {got:,} bytes ({lines:,} whole lines) were read before it",
                at_byte=at,
                bytes_after=max(size - at - (CHUNK if broke_at is not None else 0), 0),
                bytes_read=got,
                records_read=lines,
            )
        )
        return Path(out.name), True
    except OSError:
        return None


def _gzip_magic(path: Path) -> bool:
    """The file starts as a gzip stream does: one that does not is no cut stream but another file."""
    try:
        with path.open("rb") as fh:
            return fh.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def _reject_cut(con: duckdb.DuckDBPyConnection, f: InputFile) -> None:
    """The cut itself: a row we know of and could not use (its reason the note _salvage_gzip wrote)."""
    f.rows_read += 1
    f.rows_rejected += 1
    con.execute("INSERT INTO rejected VALUES (?, NULL, ?)", [f.file_id, f.notes[-1]])


@contextmanager
def salvaged(con: duckdb.DuckDBPyConnection, f: InputFile) -> Iterator[bool]:
    """For a reader that cannot read a cut or damaged gzip file (DuckDB's CSV reader, json.load, a
    format's own reader): while in this block, f.path is a whole gzip file of what the damaged one
    holds up to its break, and the break is recorded as on the JSONL path (a stream_cut Damage, the cut
    as one rejected row). Yields False, f untouched, when the file's stream is whole, is no gzip stream
    or cannot be opened."""
    got = _salvage_gzip(f.path, f) if f.rel.lower().endswith(".gz") and _gzip_magic(f.path) else None
    if got is None or not got[1]:
        if got is not None:
            got[0].unlink(missing_ok=True)
        yield False
        return
    plain, _ = got
    packed = Path(tempfile.NamedTemporaryFile(prefix="kvf-salvage-", suffix=".gz", delete=False).name)
    original = f.path
    try:
        with plain.open("rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        if ".csv" in f.rel.lower() and f.damage[-1].records_read:  # the header line is no record
            f.damage[-1] = replace(f.damage[-1], records_read=f.damage[-1].records_read - 1)
        _reject_cut(con, f)
        f.path = packed
        yield True
    finally:
        f.path = original
        plain.unlink(missing_ok=True)
        packed.unlink(missing_ok=True)


def _sanitize(path: Path) -> Path:
    """A copy of a text file where each line not UTF-8 or too long is a marker line (same numbering)."""
    out = tempfile.NamedTemporaryFile(prefix="kvf-clean-", suffix=".txt", delete=False)
    with out, path.open("rb") as fh:
        for raw in fh:
            body = raw[:-1] if raw.endswith(b"\n") else raw
            reason = None
            if len(body) > MAX_LINE:
                reason = f"line longer than {MAX_LINE >> 20} MiB"
            else:
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as err:
                    shown = body[:60].decode("utf-8", errors="backslashreplace")
                    reason = f"not valid UTF-8 (byte {err.start + 1}): {shown}"
            out.write((BAD_LINE + reason).encode() + b"\n" if reason else body + b"\n")
    return Path(out.name)


def _load_sanitized(con: duckdb.DuckDBPyConnection, path: Path, table: str) -> None:
    clean = _sanitize(path)
    try:
        _load(con, clean, table)
    finally:
        clean.unlink(missing_ok=True)


def load_lines(con: duckdb.DuckDBPyConnection, f: InputFile, table: str = "raw_lines") -> bool:
    """Fill `table(line)` with the file's lines. False (and f.error set) if nothing could be read."""
    try:
        _load(con, f.path, table)
        return True
    except duckdb.Error as err:
        if not f.rel.lower().endswith(".gz"):
            try:  # invalid UTF-8 or an overlong line: reject those lines, keep the others
                _load_sanitized(con, f.path, table)
                return True
            except (duckdb.Error, OSError):
                pass
            f.error = f"cannot read as text lines: {str(err).splitlines()[0][:200]}"
            return False
    try:
        with gzip.open(f.path, "rb") as fh:
            fh.read(1)
    except (OSError, EOFError, zlib.error) as err:
        if "Not a gzipped file" in str(err) or "not a gzip" in str(err).lower():
            f.error = f"not a gzip file: {err}"
            return False
    got = _salvage_gzip(f.path, f)
    if got is None:
        f.error = "gzip stream unreadable"
        return False
    salvaged, damaged = got
    try:
        try:
            _load(con, salvaged, table)
        except duckdb.Error:
            _load_sanitized(con, salvaged, table)
        if damaged:
            _reject_cut(con, f)
        return True
    except duckdb.Error as err:
        f.error = f"cannot read salvaged gzip content: {str(err).splitlines()[0][:200]}"
        return False
    finally:
        salvaged.unlink(missing_ok=True)


def load_json_lines(con: duckdb.DuckDBPyConnection, f: InputFile) -> bool:
    """load_lines, then the view json_lines over raw_lines (line, ok, parse_error: ingest/queries/
    json_lines.sql), which the JSON-lines readers stage from; end with drop_json_lines."""
    if not load_lines(con, f):
        return False
    con.execute(load_query("ingest", "json_lines"))
    return True


def drop_json_lines(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("DROP VIEW json_lines")
    con.execute("DROP TABLE raw_lines")
