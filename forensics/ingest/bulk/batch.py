# ruff: noqa: E501  (SQL text and its regexes: split lines would not read better)
"""The bulk reader's batch lines (forensics.ingest.bulk), read by template: a template is one line's kind
and field names in order; its RE2 pattern (built in Python from a sample line, a constant of the query)
reads all the lines of that template in one pass, where splitting every body into a list of pieces costs
~30 times more."""

from __future__ import annotations

import re

import duckdb

from forensics.db import sql_literal as _lit
from forensics.engines.sglang.rules import BATCH_FIELDS, BATCH_FLOATS, BATCH_REQUIRED
from forensics.engines.sglang.shapes import SHAPES, re_escape
from forensics.ingest import batch_lines

_BATCH_INT = r"[0-9]+"
_BATCH_FLOAT = r"[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|nan|inf"
# a field the analysis does not read: a value of printable ASCII without commas, not empty, not padded
# with spaces (printable ASCII, as the bulk pattern's body: a template's lines are the bulk pattern's)
_BATCH_OTHER = r"[!-+\--~](?:[ -+\--~]*[!-+\--~])?"
_BATCH_HEAD = re.compile(SHAPES["batch"].bulk or "")  # a sampled line the bulk pattern does not match has no template
# the templates are found in rounds: each reads the lines left by the one before and takes its templates
# from a sample of them (commonest first); what is left after the last goes to the Python reader
BATCH_ROUNDS, BATCH_SAMPLE = 4, 1024
BCOLS = [c for c in batch_lines.COLUMNS if c != "forward_ct"]


def batch_template(msg: str) -> tuple[str, str, dict[str, int], int | None] | None:
    """(the RE2 pattern, the kind, column -> capture group, the graph's group) of the template of the
    batch line `msg`, or None where the Python reader must read its lines (a piece without `: `, a
    padded or empty piece, a column given twice, a required one missing). Group 1 is the forward count.
    A line the pattern matches splits into the sample's fields under batch_lines._fields: every value is
    free of commas and of spaces at its ends, and what follows the last one is the `, ` that rstrip removes."""
    m = _BATCH_HEAD.match(msg)
    if m is None:
        return None
    kind = m[1].lower()
    fields = []
    for piece in m[3].rstrip(", ").split(", "):
        name, sep, _ = piece.partition(": ")
        if not sep or piece != piece.strip():
            return None
        fields.append(name)
    graphs = [i for i, n in enumerate(fields) if n.endswith(" graph")]
    parts, cols, graph, group = [], {}, None, 1
    for i, name in enumerate(fields):
        col = BATCH_FIELDS[kind].get(name)
        if graphs and i == graphs[-1]:  # the last graph field is the one read
            group += 1
            value, graph = "(True|False)", group
        elif i in graphs:
            value = "(?:True|False)"
        elif col is None:
            value = _BATCH_OTHER
        elif col in cols:
            return None
        else:
            group += 1
            value, cols[col] = f"({_BATCH_FLOAT if col in BATCH_FLOATS else _BATCH_INT})", group
        parts.append(f"{re_escape(name)}: {value}")
    if any(c not in cols for c in BATCH_REQUIRED[kind]):
        return None
    return rf"^{m[1]} batch(?: \[([0-9]+)\])?[.,] " + ", ".join(parts) + "[, ]*$", kind, cols, graph


_BTYPES = {c: "DOUBLE" if c in BATCH_FLOATS else "BIGINT" for c in BCOLS}
# eng_batch: the typed fields of a batch line, ok where the SQL vouches for them (else the Python reader
# reads the line)
_BATCH_NONE = (
    "NULL::VARCHAR AS bkind, NULL::BIGINT AS forward_ct, "
    + ", ".join(f"NULL::{_BTYPES[c]} AS {c}" for c in BCOLS)
    + ", NULL::BOOLEAN AS graph, false AS ok"
)


def _template_sql(template: tuple[str, str, dict[str, int], int | None]) -> tuple[str, str]:
    """(the select list of eng_batch's columns from the groups g of the template's pattern, the
    condition that the pattern matched)."""
    _, kind, cols, graph = template
    vals = {c: f"try_cast(g.g{i} AS {_BTYPES[c]})" for c, i in cols.items()}
    ok = " AND ".join(
        ["(g.g1 = '' OR try_cast(g.g1 AS BIGINT) IS NOT NULL)", *(f"{v} IS NOT NULL" for v in vals.values())]
    )
    select = ", ".join(
        [
            f"{_lit(kind)} AS bkind, try_cast(nullif(g.g1, '') AS BIGINT) AS forward_ct",
            *(f"{vals.get(c, f'NULL::{_BTYPES[c]}')} AS {c}" for c in BCOLS),
            f"{f'g.g{graph}' if graph is not None else 'NULL'} = 'True' AS graph, {ok} AS ok",
        ]
    )
    # a match fills every group of a field the kind requires; no match leaves all groups ''
    return select, f"g.g{cols[BATCH_REQUIRED[kind][0]]} <> ''"


def read_batches(con: duckdb.DuckDBPyConnection) -> None:
    """eng_batch from the batch lines of eng_pre, one pass of its pattern over the lines left per template."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE eng_brest AS SELECT fidx, line, ts, msg FROM eng_pre WHERE shape = 'batch'"
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE eng_batch AS SELECT fidx, line, ts, {_BATCH_NONE} FROM eng_brest LIMIT 0"
    )
    tried: set[str] = set()
    for _ in range(BATCH_ROUNDS):
        sample = con.execute(
            f"SELECT msg FROM eng_brest USING SAMPLE reservoir({BATCH_SAMPLE} ROWS) REPEATABLE (1)"
        ).fetchall()
        found: dict[str, tuple[int, tuple[str, str, dict[str, int], int | None]]] = {}
        for (msg,) in sample:
            t = batch_template(msg)
            if t is not None and t[0] not in tried:
                found[t[0]] = (found.get(t[0], (0, t))[0] + 1, t)
        if not found:
            break
        for _, t in sorted(found.values(), key=lambda x: -x[0]):
            tried.add(t[0])
            names = ", ".join(_lit(f"g{i}") for i in range(1, 2 + len(t[2]) + (t[3] is not None)))
            con.execute(
                "CREATE OR REPLACE TEMP TABLE eng_bx AS SELECT fidx, line, ts, msg, "
                f"regexp_extract(msg, {_lit(t[0])}, [{names}]) AS g FROM eng_brest"
            )
            select, matched = _template_sql(t)
            con.execute(f"INSERT INTO eng_batch SELECT fidx, line, ts, {select} FROM eng_bx WHERE {matched}")
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE eng_brest AS SELECT fidx, line, ts, msg FROM eng_bx WHERE NOT ({matched})"
            )
    con.execute(f"INSERT INTO eng_batch SELECT fidx, line, ts, {_BATCH_NONE} FROM eng_brest")
    for table in ("eng_brest", "eng_bx"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
