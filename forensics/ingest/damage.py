"""Ingest stage, what an input file lost, found where it is read: a gateway file skipped because it
matches no format (which fields it lacks, by name), and the records a skipped file held; then every
InputFile's damage (and every file unreadable for another reason) into `input_damage`.

Reads: the files. Writes: input_damage (forensics/ingest/queries/schema/16_input_damage.sql).
"""

from __future__ import annotations

import difflib
import json
import zlib

import duckdb

from forensics.db import sql_literal
from forensics.gateway_formats import BUILTIN, SPEC_DETECT, SPEC_FORMAT, GatewaySettings, Mapping, paths_of
from forensics.ingest.rawtext import open_bytes
from forensics.intake import InputFile
from forensics.intake.damage import Damage


def _closest(names: set[str], settings: GatewaySettings) -> tuple[str, tuple[str, ...]]:
    """The format whose marking fields the file has most of (ties: the first tried, as detect tries
    them): its name and the fields it marks by."""
    formats: list[tuple[str, tuple[str, ...]]] = [(SPEC_FORMAT, SPEC_DETECT)]
    if settings.mapping is not None and settings.mapping.detect:
        formats.append((settings.mapping.name, settings.mapping.detect))
    formats += [(m.name, m.detect) for m in BUILTIN]
    return max(formats, key=lambda f: (sum(n in names for n in f[1]), -len(f[1])))


def _fields(items: list[str], one: str, many: str) -> str:
    return f"{one} {items[0]}" if len(items) == 1 else f"{many} {', '.join(items[:-1])} and {items[-1]}"


def no_format(con: duckdb.DuckDBPyConnection, f: InputFile, names: set[str], settings: GatewaySettings) -> None:
    """A gateway file that matches no known format: skipped whole. Names the fields the closest format
    needs and the file lacks, a field of the file each may have been renamed to, and the records lost."""
    fmt, marks = _closest(names, settings)
    missing = [m for m in marks if m not in names]
    word = "column" if f.rel.lower().endswith((".csv", ".csv.gz", ".parquet")) else "field"
    renamed = []
    spare = sorted(names - set(marks))
    for m in missing:
        like = difflib.get_close_matches(m, spare, n=1, cutoff=0.5)
        if like:
            renamed.append(f"{like[0]} may be {m} renamed")
    present = len(marks) - len(missing)
    if present:
        what = (
            f"skipped whole, {_fields(missing, word, word + 's')} missing: the closest format ({fmt}) "
            f"needs {', '.join(marks)}" + (f"; {'; '.join(renamed)}" if renamed else "")
        )
    else:
        what = "skipped whole, no field of any known gateway format (its fields: " + ", ".join(sorted(names)[:12]) + ")"
    count = count_records(con, f)
    f.damage.append(Damage("skipped_file", what, count, "counted" if count is not None else "unknown"))


def field_missing(f: InputFile, field: str, names: set[str], records: int | None, where: str) -> None:
    """A file of a known format none of whose records carries a field the format cannot do without (an
    export that renamed or dropped it): skipped whole, the field named, a field of the file it may have
    been renamed to, and the records lost. `where`: what was looked at ("its 1,182 lines of 600 requests")."""
    like = difflib.get_close_matches(field, sorted(names - {field}), n=1, cutoff=0.5)
    hint = f"; {like[0]} may be {field} renamed" if like else ""
    f.error = f"field {field} missing: not one of {where} has it, so no record can be told apart{hint}"
    f.damage.append(Damage("skipped_file", f"skipped whole, {f.error}", records,
                           "counted" if records is not None else "unknown"))  # fmt: skip


def _json_path(key: tuple[str, ...]) -> str:
    return "$" + "".join('."' + k.replace('"', '\\"') + '"' for k in key)


def _present(con: duckdb.DuckDBPyConnection, key: tuple[str, ...], table: dict[str, str] | None) -> bool:
    """Whether any record of the staged file (gw_records) has the path as a key, null or not; a path
    into a top-level field that holds JSON as text (a CSV or Parquet export's metadata column) is
    looked for in that text, as the projection reads it (forensics.ingest.format_reads.Reads.json)."""
    if table is not None:  # a CSV file: its header names the top-level fields
        if key[0] not in table:
            return False
        if len(key) == 1:
            return True
        col = table[key[0]]
        cond, params = f"CASE WHEN json_valid({col}) THEN json_exists({col}::JSON, ?) ELSE false END", [key[1:]]
    else:
        cond, params = "json_exists(rec, ?)", [key]
        if len(key) > 1:  # or inside a top-level field holding the rest as JSON text
            cond += " OR CASE WHEN json_valid(rec ->> ?) THEN json_exists((rec ->> ?)::JSON, ?) ELSE false END"
            params += [key[:1], key[:1], key[1:]]
    # the first record that has it settles it: no count over the whole file
    row = con.execute(
        f"SELECT EXISTS (SELECT 1 FROM gw_records WHERE parse_error IS NULL AND ({cond}))",
        [_json_path(k) for k in params],
    ).fetchone()
    return bool(row and row[0])


def _renamed_hint(
    con: duckdb.DuckDBPyConnection, m: Mapping, key: tuple[str, ...], table: dict[str, str] | None
) -> str:
    """A key beside where `key` should be, in the first record, that may be it renamed ('' if none): a
    close name the format reads nowhere."""
    if table is not None:
        names = set(table)
    else:
        row = con.execute(
            "SELECT json_keys(rec, ?) FROM gw_records WHERE parse_error IS NULL AND json_exists(rec, ?) LIMIT 1",
            [_json_path(key[:-1]), _json_path(key[:-1])],
        ).fetchone()
        names = set(row[0] or ()) if row else set()
    known = {p[-1] for paths in (*m.fields.values(), *m.attrs.values(), m.always) for p in paths if p[:-1] == key[:-1]}
    like = difflib.get_close_matches(key[-1], sorted(names - known), n=1, cutoff=0.8)
    return f"; {'.'.join((*key[:-1], like[0]))} may be it renamed" if like else ""


def lost_tenant(
    con: duckdb.DuckDBPyConnection, m: Mapping, order: tuple[str | tuple[str, ...], ...], table: dict[str, str] | None
) -> tuple[frozenset[str], list[str]]:
    """The tenant attributes of `order` whose fields the staged file lost: every path an attribute is
    read from is in no record, and the format's writer puts one of them in every record (Mapping.always).
    Returns the attributes and a sentence for each (what is missing, and a likely rename)."""
    lost, said = set(), []
    for t in order:
        name = t if isinstance(t, str) else ".".join(t)
        paths = m.attrs.get(name, ()) if isinstance(t, str) and t in m.attrs else paths_of(t)
        if not any(p in m.always for p in paths) or any(_present(con, p, table) for p in paths):
            continue
        lost.add(name)
        key = next(p for p in paths if p in m.always)
        said.append(f"{'.'.join(key)} (the {name} the account is taken from){_renamed_hint(con, m, key, table)}")
    return frozenset(lost), said


def lost_accounts(con: duckdb.DuckDBPyConnection, f: InputFile, said: list[str]) -> None:
    """A tenant field the format writes in every record is in none of this file's: its records read,
    the accounts it would have given unknown (the records no earlier field gives one)."""
    kept, unknown = con.execute(
        "SELECT count(*), count(*) - count(account_id) FROM gateway_text WHERE file_id = ?", [f.file_id]
    ).fetchone() or (0, 0)
    f.damage.append(
        Damage(
            "missing_field",
            f"{'; '.join(said)}: in none of its {kept:,} records, though its writer puts it in every record "
            f"(null when unset): dropped or renamed on the way; {unknown:,} records read without their "
            "accounts (no field before it names one)",
            unknown,
            "counted",
        )
    )


def no_account(con: duckdb.DuckDBPyConnection, f: InputFile, tenant: tuple[str | tuple[str, ...], ...]) -> None:
    """A file of a format that names accounts (`tenant`: where it takes them from) none of whose records
    names one: the field was dropped or renamed on the way (or never logged), and every account of the
    file is unknown. Said as damage: the records are read, their accounts are lost."""
    kept, named = con.execute(
        "SELECT count(*), count(account_id) FROM gateway_text WHERE file_id = ?", [f.file_id]
    ).fetchone() or (0, 0)
    if not tenant or not kept or named:
        return
    where = ", ".join(t if isinstance(t, str) else ".".join(t) for t in tenant)
    f.damage.append(
        Damage(
            "missing_field",
            f"no record names its account: the fields the account is taken from ({where}) are in none of its "
            f"{kept:,} records, read without their accounts (the field may have been renamed or dropped on the way)",
            kept,
            "counted",
        )
    )


def count_records(con: duckdb.DuckDBPyConnection, f: InputFile) -> int | None:
    """The records a gateway file holds, counted without reading them as any format: a table's rows, a
    JSON array's elements, a text file's non-blank lines. None when even that fails."""
    name = f.rel.lower()
    path = sql_literal(f.path)
    try:
        if name.endswith(".parquet"):
            row = con.execute(f"SELECT sum(num_rows) FROM parquet_file_metadata({path})").fetchone()
        elif name.endswith((".csv", ".csv.gz")):
            row = con.execute(
                f"""SELECT count(*) FROM read_csv({path}, header = true, all_varchar = true, parallel = false,
                    quote = '"', escape = '"', strict_mode = false, null_padding = true, max_line_size = 67108864)"""
            ).fetchone()
        else:
            with open_bytes(f) as fh:
                head = fh.read(4096).lstrip()
            if head.startswith(b"["):
                with open_bytes(f) as fh:
                    data = json.load(fh)
                return len(data) if isinstance(data, list) else None
            with open_bytes(f) as fh:
                return sum(1 for line in fh if line.strip())
    except (duckdb.Error, OSError, EOFError, zlib.error, ValueError):
        return None
    return int(row[0]) if row and row[0] is not None else None


def store_input_damage(con: duckdb.DuckDBPyConnection, files: list[InputFile]) -> None:
    """input_damage: every Damage its loader recorded, and an `unreadable` row for a file read not at
    all for a reason no loader described (its error). A file skipped by --since/--until is the
    operator's choice, not damage."""
    rows = []
    for f in files:
        damage = list(f.damage)
        if f.error and not any(d.kind in ("skipped_file", "page_file_cut", "unreadable") for d in damage):
            damage.append(Damage("unreadable", f"not read: {f.error}"))
        rows += [
            (f.file_id, d.kind, d.detail, d.records_lost, d.lost_basis, d.at_byte, d.bytes_after, d.bytes_read,
             d.records_read)
            for d in damage
        ]  # fmt: skip
    if rows:
        con.executemany("INSERT INTO input_damage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
