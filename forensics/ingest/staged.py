"""Validation of one staged input file, shared by the gateway and page-event loaders.

The staged rows (a view over a Parquet file, or a table of parsed text) go through a validation
query: bad rows into `rejected`, and good rows copied into their table unless they are read in place. Staging through a view means the file is
read while validating, so a file that fails part way through its row groups is caught here: its rows
are taken back out and the file is marked unreadable.
"""

from __future__ import annotations

import duckdb

from forensics.bundle import InputFile
from forensics.db import run_query, scalar


def validate_staged(
    con: duckdb.DuckDBPyConnection,
    f: InputFile,
    query: str,
    stage: str,
    target: str,
    drop: str,
    error: str,
    keep: str | None = None,
) -> None:
    """Run queries/ingest/<query>.sql over `stage` (bad rows into `rejected`), then `keep` if given (copies
    the good rows into `target`; its parameter is the file id), count the rows on `f`, and run `drop`
    (removes the staging objects). error: how a read failure is named in `f.error`."""
    before = scalar(con, "SELECT count(*) FROM rejected WHERE file_id = ?", [f.file_id])
    try:
        run_query(con, "ingest", query, file_id=f.file_id)
        if keep:
            con.execute(keep, [f.file_id])
        read = scalar(con, f"SELECT count(*) FROM {stage}")
    except duckdb.Error as err:  # a Parquet file can fail part way through its row groups
        con.execute("DELETE FROM rejected WHERE file_id = ?", [f.file_id])
        con.execute(f"DELETE FROM {target} WHERE file_id = ?", [f.file_id])
        f.error = f"{error}: {str(err).splitlines()[0].replace(str(f.path), f.rel)[:200]}"
        con.execute(drop)
        return
    rej = scalar(con, "SELECT count(*) FROM rejected WHERE file_id = ?", [f.file_id]) - before
    f.rows_read += read
    f.rows_rejected += rej
    f.rows_loaded += read - rej
    con.execute(drop)
