"""The paths one gateway format's projection reads (forensics.ingest.formats), and the query that reads
them (gw_values over gw_records): each JSON record parsed once for every path, a CSV row's columns as
they are, JSON held as text parsed once more for the paths into it, and the first field holding
malformed JSON named."""

from __future__ import annotations

import json

from forensics.db import sql_literal
from forensics.gateway_formats import Key


def _json_path(key: Key) -> str:
    return "$" + "".join('."' + k.replace("\\", "\\\\").replace('"', '\\"') + '"' for k in key)


_ROOT = "'$'"
BACKSLASH_U = "\\u"  # the start of a JSON escape that can spell any character of a key


def _opens_json(text: str) -> str:
    return f"regexp_matches({text}, '^\\s*[{{\\[]')"


class Reads:
    """The paths one projection reads, in the order first asked for. Records as JSON text (rec): `v`
    (gw_values) holds the JSON at each full path of the record. A CSV file's rows (`table`: its header,
    name -> the row's column in gw_records) are read from their columns, every value text. Either way
    `n_<i>` holds the JSON at each path into the i-th head (a top-level field) when the head is text,
    parsed (NULL where it does not parse)."""

    def __init__(self, table: dict[str, str] | None = None) -> None:
        self.table = table
        self.full: dict[Key, int] = {}
        self.inner: dict[str, dict[Key, int]] = {}
        self.parsed: dict[Key, tuple[str, str]] = {}  # path -> (its parsed JSON, when it is malformed), as SQL
        self.columns: dict[str, str] = {}  # further columns of gw_values, over rec (the header fields' pairs)

    def _full(self, key: Key) -> str:
        return f"v[{self.full.setdefault(key, len(self.full) + 1)}]"

    def _head(self, h: str) -> tuple[str, str]:
        """(its text, whether it is text) of a top-level field, as SQL."""
        if self.table is not None:
            col = self.table.get(h, "NULL::VARCHAR")
            return col, f"{col} IS NOT NULL"
        v = self._full((h,))
        return f"{v} ->> {_ROOT}", f"json_type({v}) = 'VARCHAR'"

    def json(self, key: Key) -> str:
        """The JSON at a path; a JSON string on the way (a CSV or Parquet JSON column) is followed into."""
        if self.table is not None and len(key) == 1:
            return f"to_json({self.table[key[0]]})" if key[0] in self.table else "NULL::JSON"
        if len(key) == 1:
            return self._full(key)
        self._head(key[0])
        tails = self.inner.setdefault(key[0], {})
        inner = f"n_{list(self.inner).index(key[0])}[{tails.setdefault(key[1:], len(tails) + 1)}]"
        # a CSV column is text: a path into it is only found by parsing it
        return inner if self.table is not None else f"coalesce({self._full(key)}, {inner})"

    def text(self, key: Key) -> str:
        """The text at a path, trimmed, NULL when empty."""
        if self.table is not None and len(key) == 1:
            return f"nullif(trim({self.table[key[0]]}), '')" if key[0] in self.table else "NULL::VARCHAR"
        return f"nullif(trim(({self.json(key)}) ->> '$'), '')"

    def parsed_json(self, key: Key) -> str:
        """The JSON object or array at a path, where JSON text there is parsed; a column of gw_values."""
        if key not in self.parsed:
            if self.table is not None and len(key) == 1:
                col = self.table.get(key[0], "NULL::VARCHAR")
                text, is_text = col, f"{col} IS NOT NULL"
                value = f"CASE WHEN json_valid({col}) THEN {col}::JSON END"
            else:
                j = self.json(key)
                text, is_text = f"({j}) ->> {_ROOT}", f"json_type({j}) = 'VARCHAR'"
                value = f"""CASE WHEN {is_text} AND json_valid({text}) THEN ({text})::JSON
                                 WHEN json_type({j}) IN ('OBJECT', 'ARRAY') THEN {j} END"""
            self.parsed[key] = (value, f"{is_text} AND NOT json_valid({text}) AND {_opens_json(text)}")
        return f"p_{list(self.parsed).index(key)}"

    def aliased(self, key: Key) -> list[str]:
        """Where the JSON holding a path may name one of its keys twice, or through an escape (DuckDB's
        reader takes a repeated key's first value, Python's json its last; `\\u0065` spells `e`): the
        text (the record's, a CSV row's column's) holds a key's quoted name twice, or any `\\u`."""
        if self.table is None:
            text, names = "rec", key
        elif len(key) > 1:
            text, names = self.table.get(key[0], "NULL::VARCHAR"), key[1:]
        else:
            return []  # a CSV column: one per header name, read by content as the SQL reads it
        conds = [f"contains({text}, {sql_literal(BACKSLASH_U)})"]
        for name in names:
            q = sql_literal(json.dumps(name, ensure_ascii=False))
            conds.append(f"length({text}) - length(replace({text}, {q}, '')) >= 2 * length({q})")
        return [f"coalesce({c}, false)" for c in conds]

    def record(self) -> str:
        """A CSV row as one JSON object (what forensics.ingest.content and the header fields read)."""
        assert self.table is not None
        return f"json_object({', '.join(f'{sql_literal(n)}, {c}' for n, c in self.table.items())})"

    def values(self) -> str:
        """The query making gw_values over gw_records: row, parse_error, v (JSON records) or the columns
        (a CSV file), n_<i>, the further columns, and `error`: the parse error, else the first field
        that holds malformed JSON."""
        heads, broken = [], []
        for i, (h, tails) in enumerate(self.inner.items()):
            text, is_text = self._head(h)
            tail_paths = ", ".join(sql_literal(_json_path(t)) for t in tails)
            heads.append(f"CASE WHEN {is_text} THEN try(json_extract({text}, [{tail_paths}])) END AS n_{i}")
            broken.append((f"{is_text} AND n_{i} IS NULL AND {_opens_json(text)}", h))
        broken += [(bad, ".".join(key)) for key, (_, bad) in self.parsed.items()]
        whens = " ".join(f"WHEN {cond} THEN {sql_literal(f'malformed JSON in field {name}')}" for cond, name in broken)
        error = f"coalesce(parse_error, CASE {whens} END)" if whens else "parse_error"
        if self.table is not None:
            inner = f"SELECT *, {self.record()} AS rec FROM gw_records" if self.columns else "SELECT * FROM gw_records"
        else:
            paths = ", ".join(sql_literal(_json_path(k)) for k in self.full) or _ROOT
            inner = (
                f"SELECT row, parse_error, rec, CASE WHEN parse_error IS NULL THEN json_extract(rec, [{paths}]) END "
                "AS v FROM gw_records"
            )
        more = heads + [f"{e} AS {c}" for c, e in self.columns.items()]
        if more:
            inner = f"SELECT *, {', '.join(more)} FROM ({inner})"
        parsed = "".join(f", {value} AS p_{i}" for i, (value, _) in enumerate(self.parsed.values()))
        return f"SELECT *, {error} AS error{parsed} FROM ({inner})"
