"""The audit's reads of whole files with DuckDB's sieve (forensics.audit.lines' rule, in SQL): DuckDB's
line reader reads the plain files of a server in one query and keeps the lines a parse may read
(kept_lines.sql), and Python makes logical lines of those alone. Ingest's bulk reader, which has read the
same files into its lines table, keeps them for the audit from there (kept_from), so that ingest's
audit reads no engine file a second time.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import NamedTuple

import duckdb

from forensics.audit.lines import (
    _NOT_PLAIN_BYTES,
    _OPENERS,
    _RECORD,
    SNIFF_LINES,
    _kept,
    _logical,
    _physical,
    _prefixed,
    read_log,
)
from forensics.engines.facts import LogLine
from forensics.intake import shippers
from forensics.paths import load_query


def _sql_escape(word: str) -> str:
    return "".join("\\" + c if c in r".^$*+?()[]{}|\\" else c for c in word)


COMPRESSED = (".gz", ".zst")  # DuckDB would decompress them; the Python reader reads their bytes
MAX_SQL_LINE = 64 << 20  # DuckDB's longest line: a longer one fails the read, and Python reads the file
_CHECK_BYTES = 64 << 20  # a file is searched for bytes DuckDB may not read this many at a time (memory)
# SGLang's record prefix as _SGLANG_PREFIX matches it (RE2's \d is ASCII too), without the group
_PREFIX_SQL = _RECORD[0].pattern.replace("(?P<rank>", "(?:")


def _sql_plain(path: Path) -> bool | None:
    """None when DuckDB's line reader may not give this file's lines byte for byte or a line of it may not
    be what clean leaves as it is: empty, compressed, or what plain_bytes finds. A file that is not UTF-8
    fails the read itself."""
    if path.name.lower().endswith(COMPRESSED):
        return None
    with path.open("rb") as fh:
        if not fh.seek(0, 2):
            return None
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return plain_bytes(mm)


def plain_bytes(mm: mmap.mmap) -> bool | None:
    """_sql_plain of a plain file's bytes (not empty): None for a byte-order mark (dropped) or one of the
    bytes a plain line may not hold (_NOT_PLAIN_BYTES: control characters, among them the carriage
    return, a line break to DuckDB, NUL and the record separator, its delimiter; a backslash, ^). Else
    whether no line holds the words that let a line join the next in any file (_OPENERS)."""
    if mm[:3] == b"\xef\xbb\xbf":
        return None
    for at in range(0, len(mm), _CHECK_BYTES):
        part = mm[at : at + _CHECK_BYTES]
        if len(part.translate(None, _NOT_PLAIN_BYTES)) < len(part):
            return None
    return all(mm.find(w.encode()) < 0 for w in _OPENERS)


class Sieved(NamedTuple):
    """What DuckDB's sieve of a file needs to know of it. `loose`: every line of the file but a blank one
    is a logical line of its own: no line can join the next (`joinless`, _sql_plain) and the head finds
    no record prefixes, so none wraps. `prefixed`: _logical's sniff of the head (_prefixed), where it was
    made (a joinless file), else None: with it, the head need not be kept for _logical to sniff again."""

    loose: bool
    prefixed: bool | None


def _loose(path: Path, joinless: bool) -> Sieved:
    """The file's Sieved: its head sniffed where it is joinless."""
    if not joinless:
        return Sieved(False, None)
    with path.open("rb") as fh:
        prefixed = _prefixed(list(_physical(enumerate(islice(fh, SNIFF_LINES), start=1))))
    return Sieved(not prefixed, prefixed)


# a file's kept lines (numbered physical lines) with its Sieved's sniff of the head (None: not made, and
# the head is kept for _logical to make it)
Kept = tuple[bool | None, list[tuple[int, bytes]]]


def _sieved_sql(
    con: duckdb.DuckDBPyConnection, files: list[tuple[Path, Sieved]], words: tuple[str, ...]
) -> dict[str, Kept] | None:
    """_sieved by DuckDB, for files _sql_plain passes, each with its Sieved, in one query: per
    file, the numbered lines kept (kept_lines); None when DuckDB cannot read one of them (not UTF-8, a
    line too long)."""
    names = [str(f) for f, _ in files]
    try:
        con.execute(load_query("audit", "audit_raw0"), {"names": names, "max_line": MAX_SQL_LINE})
    except duckdb.Error:
        con.execute("DROP TABLE IF EXISTS audit_raw0")
        return None
    try:
        con.execute(load_query("audit", "audit_raw"), {"names": names, "fidx": list(range(1, len(names) + 1))})
        got = kept_lines(con, "audit_raw", [(i + 1, name, sieved) for i, (name, (_, sieved)) in
                                            enumerate(zip(names, files, strict=True))], words)  # fmt: skip
    finally:
        con.execute("DROP TABLE IF EXISTS audit_raw0")
        con.execute("DROP TABLE IF EXISTS audit_raw")
    return got


def sql_sieved(path: Path, plain: bool | None = None) -> Sieved | None:
    """Whether DuckDB may sieve the file (_sql_plain passes it and no log shipper wrote it): None if not,
    else its Sieved. `plain`: _sql_plain's answer where the caller has read the bytes already
    (plain_bytes)."""
    if shippers.recognise(path) or (joinless := _sql_plain(path) if plain is None else plain) is None:
        return None
    return _loose(path, joinless)


@contextmanager
def _sieve_lines(con: duckdb.DuckDBPyConnection, table: str) -> Iterator[str]:
    """The sieve's query (audit/queries/kept_lines.sql) over `table` (fidx, line from 1, text), which it
    reads as the view sieve_lines."""
    con.execute(f"CREATE OR REPLACE TEMP VIEW sieve_lines AS SELECT fidx, line, text FROM {table}")
    try:
        yield load_query("audit", "kept_lines")
    finally:
        con.execute("DROP VIEW IF EXISTS sieve_lines")


def _sieve_params(files: list[tuple[int, str, Sieved]], words: tuple[str, ...]) -> dict[str, object]:
    """kept_lines.sql's parameters: the files and the patterns (SGLang's record prefix, the words)."""
    return {
        "fidx": [i for i, _, _ in files],
        "loose": [s.loose for _, _, s in files],
        "sniffed": [s.prefixed is not None for _, _, s in files],
        "prefix": _PREFIX_SQL,
        "hit_pattern": "|".join(_sql_escape(w) for w in words),
        "sniff_lines": SNIFF_LINES,
    }


def kept_lines(
    con: duckdb.DuckDBPyConnection, table: str, files: list[tuple[int, str, Sieved]], words: tuple[str, ...]
) -> dict[str, Kept]:
    """kept_lines.sql's lines per file (fidx, name, its Sieved) of `files`."""
    with _sieve_lines(con, table) as kept:
        rows = con.execute(f"SELECT * FROM ({kept}) ORDER BY fidx, line", _sieve_params(files, words)).fetchall()
    names = {i: name for i, name, _ in files}
    out: dict[str, Kept] = {name: (s.prefixed, []) for _, name, s in files}
    for i, n, text in rows:
        out[names[i]][1].append((n, text.encode()))
    return out


KEPT = "audit_kept"  # the kept lines of files read already (kept_from), on the connection the audit gets


def kept_from(
    con: duckdb.DuckDBPyConnection, table: str, files: list[tuple[int, str, Sieved]], words: tuple[str, ...]
) -> None:
    """kept_lines.sql's lines of files another reader (ingest's bulk reader) has read whole into `table`,
    stored on `con` for read_logs with the same words (the files named as read_logs is given them), so
    the audit reads no file a second time."""
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {KEPT} (filename VARCHAR, n BIGINT, text VARCHAR)")
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {KEPT}_files (filename VARCHAR, words VARCHAR[], prefixed BOOLEAN)")
    names = [name for _, name, _ in files]
    con.execute(
        f"INSERT INTO {KEPT}_files SELECT unnest($names), $words, unnest($prefixed)",
        {"names": names, "words": list(words), "prefixed": [s.prefixed for _, _, s in files]},
    )
    with _sieve_lines(con, table) as kept:
        con.execute(
            f"""INSERT INTO {KEPT} SELECT n.filename, k.line, k.text FROM ({kept}) k
                JOIN (SELECT unnest($fidx) AS fidx, unnest($names) AS filename) n USING (fidx)""",
            _sieve_params(files, words) | {"names": names},
        )


def drop_kept(con: duckdb.DuckDBPyConnection) -> None:
    """The lines kept_from stored, once the audit has read them."""
    con.execute(f"DROP TABLE IF EXISTS {KEPT}")
    con.execute(f"DROP TABLE IF EXISTS {KEPT}_files")


def _kept_before(con: duckdb.DuckDBPyConnection, names: list[str], words: tuple[str, ...]) -> dict[str, Kept]:
    """The files of `names` whose kept lines kept_from stored for these words, and those lines."""
    stored = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = $t", {"t": f"{KEPT}_files"}
    ).fetchall()
    if not stored[0][0]:
        return {}
    have = dict(
        con.execute(
            f"""SELECT filename, any_value(prefixed) FROM {KEPT}_files
                WHERE filename IN (SELECT unnest($names)) AND words = $words GROUP BY filename""",
            {"names": names, "words": list(words)},
        ).fetchall()
    )
    out: dict[str, Kept] = {name: (prefixed, []) for name, prefixed in have.items()}
    for name, n, text in con.execute(
        f"SELECT filename, n, text FROM {KEPT} WHERE filename IN (SELECT unnest($names)) ORDER BY filename, n",
        {"names": list(have)},
    ).fetchall():
        out[name][1].append((n, text.encode()))
    return out


def read_logs(
    paths: Sequence[Path],
    keep: Callable[[str], bool],
    head: int,
    sieve: tuple[str, ...] | None,
    con: duckdb.DuckDBPyConnection | None,
) -> list[list[LogLine]]:
    """read_log of each file; with `sieve` and `con`, DuckDB sieves the plain files it reads as is in
    one query (_sieved_sql: the lines _sieved keeps, or fewer that no parse reads either, so that Python
    reads only those), the other files as read_log does (all of them when DuckDB cannot read one)."""
    got: dict[str, Kept] = {}
    if sieve is not None and con is not None:
        got = _kept_before(con, [str(p) for p in paths], sieve)
        plain = []
        for path in paths:
            if str(path) in got:
                continue
            try:
                if (sieved := sql_sieved(path)) is not None:
                    plain.append((path, sieved))
            except OSError:  # read_log names the file and the error
                continue
        if plain:
            got |= _sieved_sql(con, plain, sieve) or {}
    out = []
    for path in paths:
        if str(path) in got:
            prefixed, kept = got[str(path)]
            # every line not kept was left out: those before the i-th kept line, its number less 1 less i
            before = {n: n - 1 - i for i, (n, _) in enumerate(kept)}
            out.append(_kept(_logical(str(path), kept, prefixed), before.__getitem__, keep, head))
        else:
            out.append(read_log(path, keep, head, sieve))
    return out
