"""Read a text file (plain or gzip) as one row per line, keeping line numbers, through DuckDB's reader.

A gzip file cut short is read up to the cut (what was written before it is still evidence) and the
cut is reported. Used for JSONL gateway logs and JSONL page events.
"""

from __future__ import annotations

import gzip
import tempfile
import zlib
from pathlib import Path

import duckdb

from forensics.bundle import InputFile
from forensics.paths import sql_literal

MAX_LINE = 64 << 20


def _load(con: duckdb.DuckDBPyConnection, path: Path, table: str) -> None:
    # One VARCHAR column, no quoting, a delimiter that text lines do not contain; a single reader thread
    # and insertion order kept, so rowid + 1 is the line number.
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT line FROM read_csv({sql_literal(path)}, "
        "columns = {'line': 'VARCHAR'}, delim = chr(30), quote = '', escape = '', header = false, "
        f"auto_detect = false, parallel = false, max_line_size = {MAX_LINE}, strict_mode = false, "
        "null_padding = true, new_line = '\\n')"
    )


def _salvage_gzip(path: Path, f: InputFile) -> Path | None:
    """Decompress what can be read of a damaged gzip file into a temp file; None if nothing."""
    out = tempfile.NamedTemporaryFile(prefix="kvf-salvage-", suffix=".txt", delete=False)
    got = 0
    try:
        with out:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            with path.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    try:
                        data = d.decompress(chunk)
                    except zlib.error:
                        break
                    out.write(data)
                    got += len(data)
        text = Path(out.name).read_bytes()
        # drop a last line cut mid-way: it is counted as a rejected row by the caller
        cut = text.rfind(b"\n")
        Path(out.name).write_bytes(text[: cut + 1] if cut >= 0 else b"")
        f.notes.append(f"gzip stream is damaged or cut short: read {got} bytes before the damage")
        return Path(out.name)
    except OSError:
        return None


def load_lines(con: duckdb.DuckDBPyConnection, f: InputFile, table: str = "raw_lines") -> bool:
    """Fill `table(line)` with the file's lines. False (and f.error set) if nothing could be read."""
    try:
        _load(con, f.path, table)
        return True
    except duckdb.Error as err:
        if not f.rel.lower().endswith(".gz"):
            f.error = f"cannot read as text lines: {str(err).splitlines()[0][:200]}"
            return False
    try:
        with gzip.open(f.path, "rb") as fh:
            fh.read(1)
    except (OSError, EOFError, zlib.error) as err:
        if "Not a gzipped file" in str(err) or "not a gzip" in str(err).lower():
            f.error = f"not a gzip file: {err}"
            return False
    salvaged = _salvage_gzip(f.path, f)
    if salvaged is None:
        f.error = "gzip stream unreadable"
        return False
    try:
        _load(con, salvaged, table)
        f.rows_read += 1  # the cut itself: a row we know of and could not use
        f.rows_rejected += 1
        con.execute("INSERT INTO rejected VALUES (?, NULL, ?)", [f.file_id, f.notes[-1]])
        return True
    except duckdb.Error as err:
        f.error = f"cannot read salvaged gzip content: {str(err).splitlines()[0][:200]}"
        return False
    finally:
        salvaged.unlink(missing_ok=True)
