"""Validation of one staged input file, shared by the gateway and page-event loaders.

The staged rows (a view over a Parquet file, or a table of parsed text) go through a validation
query: bad rows into `rejected`, and good rows copied into their table unless they are read in place
(InPlace: views over the files). Staging through a view means the file is read while validating, so
a file that fails part way through its row groups is caught here: its rows are taken back out and
the file is marked unreadable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from forensics.db import run_query, scalar, sql_literal, timed
from forensics.intake import InputFile
from forensics.paths import load_query


@dataclass
class InPlace:
    """Parquet files whose valid rows a view reads where they lie, grouped by column layout: each
    group is one read_parquet over its files, typed by one select list (rows numbered from 1)."""

    groups: dict[tuple, list[InputFile]] = field(default_factory=dict)
    columns: dict[tuple, str] = field(default_factory=dict)  # layout -> typed select list

    def add(self, f: InputFile, layout: tuple, columns: str) -> None:
        self.groups.setdefault(layout, []).append(f)
        self.columns[layout] = columns

    def union(self, con: duckdb.DuckDBPyConnection, text: str, cols: str, outer: str) -> str:
        """SQL of all valid rows: table `text` (rows copied from text files) and every readable file of
        the groups, `outer` selecting the view's columns (then `cols`) from the typed select list, less
        the rows `rejected` names (an anti join only for files that have rejected rows)."""
        rejected = {r[0] for r in con.execute("SELECT DISTINCT file_id FROM rejected").fetchall()}
        parts = [f"SELECT {cols} FROM {text}"]
        if rejected and scalar(con, f"SELECT count(*) FROM {text}"):
            parts[0] += " ANTI JOIN rejected USING (file_id, row)"
        for layout in sorted(self.groups):
            files = [f for f in self.groups[layout] if not f.error]
            for has_rejects in (False, True):
                group = [f for f in files if (f.file_id in rejected) == has_rejects]
                if not group:
                    continue
                paths = ", ".join(sql_literal(f.path) for f in group)
                ids = ", ".join(str(f.file_id) for f in group)
                file_id = str(group[0].file_id) if len(group) == 1 else f"[{ids}][file_index::BIGINT + 1]"
                part = f"""SELECT {cols} FROM (SELECT {outer}, ({file_id})::INTEGER AS file_id, row FROM (
                    SELECT file_index, file_row_number + 1 AS row, {self.columns[layout]}
                    FROM read_parquet([{paths}], file_row_number = true)))"""
                parts.append(part + (" ANTI JOIN rejected USING (file_id, row)" if has_rejects else ""))
        return "\nUNION ALL\n".join(parts)


def validate_staged(
    con: duckdb.DuckDBPyConnection,
    f: InputFile,
    query: str,
    stage: str,
    target: str,
    drop: str,
    error: str,
    keep: str | None = None,
    clean: str | None = None,
    params: dict[str, object] | None = None,
) -> None:
    """Run ingest/queries/<query>.sql over `stage` (bad rows into `rejected`), then `keep` if given (ingest/queries/
    <keep>.sql: copies the good rows into `target`; its parameter is $file_id), count the rows on `f`, and run `drop`
    (removes the staging objects). error: how a read failure is named in `f.error`. clean: a query
    (ingest/queries/<clean>.sql) counting the rows that might be bad, by a cheaper test that never
    misses one: when it counts none, the validation query is skipped. params: the validation query's
    own, beside the file id."""
    before = scalar(con, "SELECT count(*) FROM rejected WHERE file_id = ?", [f.file_id])
    try:
        if clean is None or _suspect(con, clean):
            run_query(con, "ingest", query, file_id=f.file_id, **(params or {}))
        if keep:
            con.execute(load_query("ingest", keep), {"file_id": f.file_id})
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


def _suspect(con: duckdb.DuckDBPyConnection, clean: str) -> int:
    """Rows ingest/queries/<clean>.sql counts as possibly bad (see validate_staged)."""
    with timed(f"ingest/{clean}"):
        return int(scalar(con, load_query("ingest", clean)))
