# ruff: noqa: E501  (SQL text and its regexes: split lines would not read better)
"""Ingest stage, engine logs in bulk (issue #36): one SGLang log file at a time read by DuckDB's native
line reader, the line shapes every request writes typed by SQL regexes and JSON functions, and only
the other lines (start-up lines, failures, tracebacks, anything odd) given to the per-line Python reader
of forensics.ingest.engine, which stays the reference.

The SQL takes a line only when its strict pattern proves the Python reader would give the same rows:
  text logs: the `[ts rank] ` prefix; `Decode batch` / `Prefill batch` lines (printable ASCII) that the
  pattern of a template (batch_template: the kind and field names of a sample line) matches; `Req Time
  Stats(...)` lines whose durations are `name=number[ms]` pairs; `--log-requests` Receive and Finish
  lines whose values are plain literals (quotes, brackets and commas inside strings go to Python); any
  other line that holds none of the substrings some Python pattern or marker needs (engine_lines kind
  NULL);
  requests.jsonl: JSON objects without duplicate keys where they are read, a naive timestamp, simple
  finish reasons.
Everything else, and the rows of each file, keep the Python reader's order (file, line, row of line), so
engine_lines, engine_requests, batch_stats, node_config and rejected are the rows it gives
(tests/ingest/test_bulk_engine.py compares both on simulated, generated and real-line bundles).

Memory: one file's lines at a time (a temp table), never the run's. Plain files are read where they
lie; .gz and .zst rotated files are read in place by DuckDB's decompression (forensics.ingest.rawtext).
A plain file holding a carriage return, an ASCII record separator or a byte-order mark, or one that is
not UTF-8, is read whole by the Python reader (DuckDB's reader would split or trim those lines).
"""

from __future__ import annotations

import mmap
import os
import re
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from forensics.audit import SIEVE
from forensics.audit.sieved import kept_from, plain_bytes, sql_sieved
from forensics.db import sql_literal, timed
from forensics.engines.facts import EngineRows
from forensics.engines.sglang.reader import READER as LINES
from forensics.engines.sglang.rules import BATCH_FIELDS, BATCH_FLOATS, BATCH_REQUIRED
from forensics.engines.sglang.shapes import BULK_INT, BULK_SHAPES, DURATIONS, SHAPES, re_escape
from forensics.ingest import batch_lines, rawtext
from forensics.ingest.engine import LINE_SCHEMA, REQ_SCHEMA, parse_log, parse_requests_jsonl
from forensics.intake import InputFile

# KVF_ENGINE_READER=python reads every line with the per-line reader (the reference; the differential
# test and a user who suspects the bulk reader use it)
READER = os.environ.get("KVF_ENGINE_READER", "bulk")
COMPRESSED = (".gz", ".zst")


def _lit(s: str) -> str:
    return sql_literal(s)


# --- the patterns (RE2): each shape's bulk pattern (forensics.engines.sglang.shapes SHAPES) admits a
# subset of what its Python pattern reads, never more; the SQL reaches each through its macro
# (sglang_re_<shape>(), forensics.engines.sglang.shapes MACROS) ---
_INT = BULK_INT


def _json_int(j: str) -> str:
    """SQL for `j` holding a JSON integer that fits int64, as rows.json_int decides in Python.
    DuckDB types a non-negative JSON integer UBIGINT and a negative one BIGINT (a UBIGINT over int64's
    range fails the cast)."""
    return f"(json_type({j}) IN ('BIGINT', 'UBIGINT') AND try_cast({j} AS BIGINT) IS NOT NULL)"


JSON_TS_RE = r"^([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]{3}|\.[0-9]{6})?$"


def _dur(name: str) -> str:
    """A duration of the tail in seconds (its first pair, as DURATION's setdefault takes it), NULL if
    absent: the tail's pairs are split, not searched (a regex capture costs ~5x a split per line). The
    pair is the one sglang_re_<name>() would find (a pair of the tail followed by `,` or its end): eng_ts
    takes a line only where every pair after the first follows `, ` (else the Python reader's)."""
    at = f"list_position(pair_names, {_lit(name)})"
    value = f"split_part(pairs[{at}], '=', 2)"
    # try_cast: a line whose tail is not split into pairs (ok false) must not fail the query
    return (
        f"CASE WHEN {at} > 0 THEN CASE WHEN ends_with({value}, 'ms') THEN try_cast({value}[:-3] AS DOUBLE) / 1000 "
        f"ELSE try_cast({value} AS DOUBLE) END END"
    )


def _shape_case(name: str) -> str:
    """The CASE branch that takes a message as the shape `name`: a message starting with one of its
    literals is the shape's where its bulk pattern matches, else the per-line reader's (NULL). The
    literals start the bulk pattern's lines and no other shape's: the branches' order does not matter.
    A batch line is taken by its literal alone: its template's pattern (batch_template), a subset of the
    bulk pattern, is matched next, and a line no template matches goes to the per-line reader then."""
    shape = SHAPES[name]
    starts = " OR ".join(f"starts_with(msg, {_lit(lit)})" for lit in shape.literals)
    if name == "batch":
        return f"WHEN {starts} THEN {_lit(name)}"
    ascii_ = "regexp_matches(msg, '^[ -~]*$') AND " if shape.ascii else ""
    return f"WHEN {starts} THEN CASE WHEN {ascii_}regexp_matches(msg, sglang_re_{name}()) THEN {_lit(name)} END"


_SHAPE_CASES = "\n        ".join(_shape_case(name) for name in BULK_SHAPES)

# one row per line of eng_raw: the prefix read, the shape the SQL takes (NULL: the Python reader's)
TEXT_LINES = f"""
CREATE OR REPLACE TEMP TABLE eng_pre AS
WITH h AS (
    SELECT fidx, line, text, regexp_extract(text, sglang_re_prefix(), ['ts', 'ms', 'rank']) AS p FROM eng_raw
), r AS (
    SELECT *, p.ts <> '' AS has_p FROM h
), t AS (
    -- the prefix is ASCII: `[`, the time's 19 characters, ms, rank, `] `
    SELECT fidx, line, text, has_p, CASE WHEN has_p THEN substr(text, 23 + length(p.ms) + length(p.rank)) ELSE coalesce(text, '') END AS msg,
        CASE WHEN has_p THEN try_strptime(p.ts, '%Y-%m-%d %H:%M:%S') END AS t0, p
    FROM r
)
SELECT fidx, line, text, msg,
    CASE WHEN has_p THEN timezone('UTC', t0 + to_microseconds(
        CASE WHEN p.ms <> '' THEN rpad(substr(p.ms, 2), 6, '0')::BIGINT ELSE 0 END)) END AS ts,
    CASE WHEN has_p THEN CASE WHEN p.ms <> '' THEN 1 ELSE 1000 END END AS res,
    CASE WHEN has_p THEN nullif(trim(p.rank), '') END AS rank,
    CASE
        WHEN contains(coalesce(text, ''), chr(0)) THEN NULL
        WHEN has_p AND (t0 IS NULL OR strftime(t0, '%Y-%m-%d %H:%M:%S') <> p.ts OR starts_with(p.ts, '0000')) THEN NULL
        WHEN NOT has_p AND starts_with(text, '[') AND regexp_matches(text, '[^\\x01-\\x7f]') THEN NULL
        {_SHAPE_CASES}
        WHEN regexp_matches(msg, sglang_re_triggers()) THEN NULL
        ELSE 'plain'
    END AS shape
FROM t
"""


# --- the batch lines, read by template: a template is one line's kind and field names in order; its
# RE2 pattern (built in Python from a sample line, a constant of the query) reads all the lines of that
# template in one pass, where splitting every body into a list of pieces costs ~30 times more ---
_BATCH_INT = r"[0-9]+"
_BATCH_FLOAT = r"[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|nan|inf"
# a field the analysis does not read: a value of printable ASCII without commas, not empty, not padded
# with spaces (printable ASCII, as the bulk pattern's body: a template's lines are the bulk pattern's)
_BATCH_OTHER = r"[!-+\--~](?:[ -+\--~]*[!-+\--~])?"
_BATCH_HEAD = re.compile(SHAPES["batch"].bulk or "")  # a sampled line the bulk pattern does not match has no template
# the templates are found in rounds: each reads the lines left by the one before and takes its templates
# from a sample of them (commonest first); what is left after the last goes to the Python reader
BATCH_ROUNDS, BATCH_SAMPLE = 4, 1024
_BCOLS = [c for c in batch_lines.COLUMNS if c != "forward_ct"]


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


_BTYPES = {c: "DOUBLE" if c in BATCH_FLOATS else "BIGINT" for c in _BCOLS}
# eng_batch: the typed fields of a batch line, ok where the SQL vouches for them (else the Python reader
# reads the line)
_BATCH_NONE = (
    "NULL::VARCHAR AS bkind, NULL::BIGINT AS forward_ct, "
    + ", ".join(f"NULL::{_BTYPES[c]} AS {c}" for c in _BCOLS)
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
            *(f"{vals.get(c, f'NULL::{_BTYPES[c]}')} AS {c}" for c in _BCOLS),
            f"{f'g.g{graph}' if graph is not None else 'NULL'} = 'True' AS graph, {ok} AS ok",
        ]
    )
    # a match fills every group of a field the kind requires; no match leaves all groups ''
    return select, f"g.g{cols[BATCH_REQUIRED[kind][0]]} <> ''"


_FR_KEYS = r"(?:\{|, )'([^']*)': "
_FR_VALS = r"(?:\{|, )'[^']*': ('[^']*'|[^,}]*)"


def _jval(v: str) -> str:
    """A Python literal of a repr (string, int, None, True, False) as json.dumps writes it; NULL otherwise."""
    return (
        f"CASE WHEN starts_with({v}, '''') THEN '\"' || {v}[2:-2] || '\"' WHEN {v} = 'None' THEN 'null' "
        f"WHEN {v} = 'True' THEN 'true' WHEN {v} = 'False' THEN 'false' "
        f"WHEN regexp_full_match({v}, {_lit(_INT)}) THEN {v} END"
    )


def _meta_key(key: str) -> str:
    return rf"(?:\{{|, )'{key}': "


_ID_RE = _lit(_meta_key("id") + r"('[^']*'|None)(?:,|\})")
_PT_RE = _lit(_meta_key("prompt_tokens") + r"(0|[1-9][0-9]*)(?:,|\})")
_CT_RE = _lit(_meta_key("completion_tokens") + r"(" + _INT + r"|None)(?:,|\})")
_FR_RE = _lit(_meta_key("finish_reason") + r"(\{[^{}]*\}|[^,{}]*)(?:,|\})")
_DURS = ", ".join(f"{_dur(n)} AS {n}" for n in DURATIONS)

# the Receive and Finish lines' fields (names as the Python reader's). The line matched its whole pattern
# (eng_pre's shape), so its groups are sliced, not captured (a capture costs ~10x): obj is what the first
# `(` and the first `)` enclose (no value of it holds a parenthesis; a Receive line ends with its `)`),
# meta what follows the last `=` (that of `out=`: no key or value of the meta dict holds one) and
# `{'meta_info': ` up to the closing `}}`
TEXT_REQUESTS = f"""
CREATE OR REPLACE TEMP TABLE eng_req AS
WITH m AS (
    SELECT fidx, line, ts, shape,
        CASE shape WHEN 'received' THEN msg[instr(msg, '(') + 1:-2] ELSE msg[instr(msg, '(') + 1:instr(msg, ')') - 1] END AS obj,
        CASE WHEN shape = 'finished' THEN msg[length(msg) - instr(reverse(msg), '=') + 16:-2] END AS meta
    FROM eng_pre WHERE shape IN ('received', 'finished')
), f AS (
    SELECT *, regexp_extract_all(obj, '(?:^|, )rid=([^,]*)', 1) AS rids,
        regexp_extract_all(obj, '(?:^|, )bootstrap_room=([^,]*)', 1) AS rooms,
        regexp_replace(meta, '\\{{[^{{}}]*\\}}', '{{}}', 'g') AS flat
    FROM m
), v AS (
    SELECT *,
        CASE WHEN len(rids) = 1 AND starts_with(rids[1], '''') THEN rids[1][2:-2] END AS rid_s,
        CASE WHEN len(rooms) = 1 AND regexp_full_match(rooms[1], {_lit(_INT)}) THEN try_cast(rooms[1] AS BIGINT) END AS room_v,
        len(regexp_extract_all(meta, {_lit(_meta_key("id"))})) AS n_id,
        len(regexp_extract_all(flat, {_lit(_meta_key("id"))})) AS f_id,
        len(regexp_extract_all(meta, {_lit(_meta_key("prompt_tokens"))})) AS n_pt,
        len(regexp_extract_all(flat, {_lit(_meta_key("prompt_tokens"))})) AS f_pt,
        len(regexp_extract_all(meta, {_lit(_meta_key("completion_tokens"))})) AS n_ct,
        len(regexp_extract_all(flat, {_lit(_meta_key("completion_tokens"))})) AS f_ct,
        len(regexp_extract_all(meta, {_lit(_meta_key("finish_reason"))})) AS n_fr,
        len(regexp_extract_all(flat, {_lit(_meta_key("finish_reason"))})) AS f_fr,
        regexp_extract(flat, {_ID_RE}, 1) AS id_t,
        regexp_extract(flat, {_PT_RE}, 1) AS pt_t,
        regexp_extract(flat, {_CT_RE}, 1) AS ct_t,
        regexp_extract(meta, {_FR_RE}, 1) AS fr_t
    FROM f
), fr AS (
    SELECT *,
        CASE WHEN starts_with(fr_t, '{{') THEN regexp_extract_all(fr_t, {_lit(_FR_KEYS)}, 1) END AS fr_keys,
        CASE WHEN starts_with(fr_t, '{{') THEN list_transform(regexp_extract_all(fr_t, {_lit(_FR_VALS)}, 1), lambda x: {_jval("x")})
             ELSE [{_jval("fr_t")}] END AS fr_vals
    FROM v
)
SELECT fidx, line, ts, shape, room_v AS room, rid_s,
    CASE WHEN id_t LIKE '''%' THEN id_t[2:-2] END AS meta_id,
    try_cast(pt_t AS BIGINT) AS prompt, try_cast(ct_t AS BIGINT) AS compl,
    left(CASE WHEN fr_t = '' THEN 'null' WHEN fr_keys IS NULL THEN fr_vals[1]
         ELSE '{{' || array_to_string(list_transform(list_sort(list_zip(fr_keys, fr_vals)), lambda x: '"' || x[1] || '": ' || x[2]), ', ') || '}}' END, 500) AS detail,
    (len(rids) <= 1 AND (len(rids) = 0 OR rid_s IS NOT NULL OR (shape = 'finished' AND rids[1] = 'None'))
     AND (shape = 'finished' OR rid_s IS NOT NULL)
     AND len(rooms) <= 1 AND (len(rooms) = 0 OR rooms[1] = 'None' OR room_v IS NOT NULL)
     AND (shape = 'received' OR (
        n_id = f_id AND n_id <= 1 AND (n_id = 0 OR id_t <> '')
        AND n_pt = 1 AND f_pt = 1 AND try_cast(pt_t AS BIGINT) IS NOT NULL
        AND n_ct = f_ct AND n_ct <= 1 AND (n_ct = 0 OR ct_t = 'None' OR try_cast(ct_t AS BIGINT) IS NOT NULL)
        AND n_fr = f_fr AND n_fr <= 1
        AND (fr_t = '' OR (list_bool_and(list_transform(fr_vals, lambda x: x IS NOT NULL))
             AND (fr_keys IS NULL OR (len(fr_keys) = len(fr_vals) AND len(list_distinct(fr_keys)) = len(fr_keys)))))
     ))) AS ok
FROM fr
"""

# the Req Time Stats lines' fields: the line matched its whole pattern (eng_pre's shape), so the head's
# fields (between the first `(` and the first `)`, none of which holds a comma or a parenthesis) and the
# tail's `name=value` pairs are read by splitting, where a capture per field costs ~5x as much
TEXT_TIME_STATS = f"""
CREATE OR REPLACE TEMP TABLE eng_ts AS
WITH m AS (
    SELECT fidx, line, ts, instr(msg, '(') AS p, instr(msg, ')') AS q, msg
    FROM eng_pre WHERE shape = 'time_stats'
), h AS (
    SELECT fidx, line, ts, string_split(msg[p + 1:q - 1], ', ') AS head, msg[q + 1:] AS tail FROM m
), d AS (
    SELECT fidx, line, ts, tail, head, list_transform(head, lambda x: split_part(x, '=', 1)) AS head_names,
        CASE WHEN tail <> '' THEN string_split(tail[3:], ', ') ELSE [] END AS pairs
    FROM h
), e AS (
    SELECT *, list_transform(pairs, lambda x: split_part(x, '=', 1)) AS pair_names FROM d
), f AS (
    SELECT fidx, line, ts, tail, pairs, pair_names,
        head[1][5:] AS rid,
        CASE WHEN head_names[2] = 'bootstrap_room' THEN head[2][16:] ELSE '' END AS room,
        head[coalesce(nullif(list_position(head_names, 'input len'), 0), list_position(head_names, 'input_len'))][11:] AS inp,
        head[coalesce(nullif(list_position(head_names, 'output len'), 0), list_position(head_names, 'output_len'))][12:] AS out,
        head[-1][6:] AS type
    FROM e
), v AS (
    SELECT *, {_DURS},
        list_filter(pairs, lambda x: split_part(x, '=', 1) IN ('start_time', 'entry_time'))[1] AS st_pair
    FROM f
), w AS (
    SELECT *, CASE WHEN st_pair IS NOT NULL THEN try_cast(CASE WHEN ends_with(st_pair, 'ms') THEN split_part(st_pair, '=', 2)[:-3]
        ELSE split_part(st_pair, '=', 2) END AS DOUBLE) END AS st
    FROM v
)
SELECT fidx, line, ts, trim(rid, '''"') AS rid,
    CASE WHEN room IN ('', 'None') THEN NULL ELSE try_cast(room AS BIGINT) END AS room,
    try_cast(inp AS BIGINT) AS input_len, try_cast(out AS BIGINT) AS output_len, type AS detail,
    forward_duration AS forward_s,
    CASE WHEN st >= 1e9 THEN timezone('UTC', make_timestamp(
        trunc(st)::BIGINT * 1000000 + round_even((st - trunc(st)) * 1e6, 0)::BIGINT)) END AS start_time,
    CASE WHEN type = 'decode' THEN coalesce(prealloc_duration, prealloc_queue_duration, bootstrap_duration + alloc_wait_duration) END AS prealloc_s,
    CASE WHEN type = 'decode' THEN transfer_duration END AS transfer_s,
    queue_duration AS queue_s,
    CASE WHEN type = 'prefill' THEN coalesce(bootstrap_queue_duration, bootstrap_duration) END AS bootstrap_s,
    ((room IN ('', 'None') OR try_cast(room AS BIGINT) IS NOT NULL) AND try_cast(inp AS BIGINT) IS NOT NULL
     AND try_cast(out AS BIGINT) IS NOT NULL AND (st IS NULL OR st < 1e11) AND NOT contains(tail[3:], ': ')) AS ok
FROM w
"""

JSON_LINES = f"""
CREATE OR REPLACE TEMP TABLE eng_json AS
WITH r AS (
    SELECT fidx, line, text,
        coalesce(regexp_matches(text, '^[ -~]*$') AND json_valid(text), false) AS valid
    FROM eng_raw
), j AS (
    SELECT fidx, line, text, json_extract(text, ['$.timestamp', '$.event', '$.rid', '$.obj', '$.out', '$.headers',
        '$.obj.bootstrap_room', '$.obj.input_ids', '$.out.meta_info', '$.out.meta_info.prompt_tokens',
        '$.out.meta_info.completion_tokens', '$.out.meta_info.finish_reason', '$.out.meta_info.id']) AS x,
        json_keys(text) AS keys
    FROM r WHERE valid AND json_type(text) = 'OBJECT'
), t AS (
    SELECT fidx, line, text, keys, x[1] AS tsj, x[2] AS ev, x[3] AS rid, x[4] AS obj, x[5] AS out, x[6] AS headers,
        x[7] AS room, x[8] AS ids, x[9] AS meta, x[10] AS pt, x[11] AS ct, x[12] AS fr, x[13] AS mid,
        regexp_extract(x[1] ->> '$', {_lit(JSON_TS_RE)}, ['d', 't', 'f']) AS tsp
    FROM j
), h AS (
    SELECT *,
        CASE WHEN json_type(headers) = 'OBJECT' THEN json_keys(headers) END AS hkeys,
        try_strptime(tsp.d || ' ' || tsp.t, '%Y-%m-%d %H:%M:%S') AS t0
    FROM t
)
SELECT fidx, line, text,
    CASE WHEN json_type(ev) = 'VARCHAR' THEN ev ->> '$' END AS event,
    timezone('UTC', t0 + to_microseconds(CASE WHEN tsp.f <> '' THEN rpad(substr(tsp.f, 2), 6, '0')::BIGINT ELSE 0 END)) AS ts,
    CASE WHEN json_type(rid) = 'VARCHAR' THEN rid ->> '$' END AS rid_s, json_type(rid) AS rid_type,
    CASE WHEN {_json_int("room")} THEN room::BIGINT END AS room,
    CASE WHEN json_type(ids) = 'ARRAY' THEN json_array_length(ids) END AS n_ids,
    CASE WHEN json_type(ids) = 'ARRAY' THEN coalesce(list_bool_and(list_transform(json_extract(ids, '$[*]'), lambda e: {_json_int("e")})), true) END AS ids_int,
    json_type(ids) AS ids_type, json_type(obj) AS obj_type, json_type(out) AS out_type, json_type(meta) AS meta_type,
    json_type(room) AS room_type,
    CASE WHEN {_json_int("pt")} THEN pt::BIGINT END AS prompt,
    CASE WHEN {_json_int("ct")} THEN ct::BIGINT END AS compl, json_type(ct) AS ct_type,
    json_type(fr) AS fr_type, fr, json_type(mid) AS mid_type, CASE WHEN json_type(mid) = 'VARCHAR' THEN mid ->> '$' END AS mid_s,
    CASE WHEN json_type(fr) = 'OBJECT' THEN list_sort(json_keys(fr)) END AS fr_keys,
    hkeys, list_transform(hkeys, lambda k: lower(k)) AS hlow, headers,
    (len(list_distinct(keys)) = len(keys)
     AND (json_type(obj) IS DISTINCT FROM 'OBJECT' OR len(list_distinct(json_keys(obj))) = len(json_keys(obj)))
     AND (json_type(out) IS DISTINCT FROM 'OBJECT' OR len(list_distinct(json_keys(out))) = len(json_keys(out)))
     AND (json_type(meta) IS DISTINCT FROM 'OBJECT' OR len(list_distinct(json_keys(meta))) = len(json_keys(meta)))
     AND (hkeys IS NULL OR (len(list_distinct(list_transform(hkeys, lambda k: lower(k)))) = len(hkeys)
          AND NOT list_bool_or(list_transform(hkeys, lambda k: regexp_matches(k, '["\\\\]'))) IS TRUE))
     AND t0 IS NOT NULL AND strftime(t0, '%Y-%m-%d %H:%M:%S') = tsp.d || ' ' || tsp.t AND NOT starts_with(tsp.d, '0000')
     AND json_type(tsj) = 'VARCHAR') AS common_ok
FROM h
"""

# a finish reason's key is put into a JSON path only where it is plain (a quote in it fails the path: the
# AND of the ok test evaluates both sides, a CASE only the rows it selects)
JSON_REQUESTS = """
CREATE OR REPLACE TEMP TABLE eng_req AS
WITH k AS (
    SELECT *, hkeys[nullif(list_position(hlow, 'x-request-id'), 0)] AS k1,
        hkeys[nullif(list_position(hlow, 'x-correlation-id'), 0)] AS k2
    FROM eng_json WHERE event IN ('request.received', 'request.finished') AND common_ok
), e AS (
    SELECT *, coalesce(
        CASE WHEN json_type(headers, '$."' || k1 || '"') = 'VARCHAR' THEN nullif(headers ->> ('$."' || k1 || '"'), '') END,
        CASE WHEN json_type(headers, '$."' || k2 || '"') = 'VARCHAR' THEN nullif(headers ->> ('$."' || k2 || '"'), '') END
    ) AS fwd_raw
    FROM k
)
SELECT fidx, line, ts, event, rid_s, room, left(fwd_raw, 200) AS forwarded_id,
    CASE WHEN ids_int THEN n_ids END AS input_len, prompt, compl,
    left(CASE WHEN fr_type IS NULL OR fr_type = 'NULL' THEN 'null'
         WHEN fr_type IN ('VARCHAR', 'BIGINT', 'UBIGINT', 'BOOLEAN') THEN fr::VARCHAR
         ELSE '{' || array_to_string(list_transform(fr_keys, lambda k: '"' || k || '": ' || CASE WHEN regexp_matches(k, '^[A-Za-z0-9_ -]*$') THEN json_extract(fr, '$."' || k || '"')::VARCHAR END), ', ') || '}' END, 500) AS detail,
    coalesce(nullif(rid_s, ''), nullif(mid_s, ''), '') AS rid_fin,
    ((obj_type IS NULL OR obj_type IN ('OBJECT', 'NULL'))
     AND (room_type IS NULL OR room_type = 'NULL' OR room IS NOT NULL)
     AND (event = 'request.finished' OR rid_type = 'VARCHAR')
     AND (event = 'request.received' OR (
        (out_type = 'OBJECT') AND meta_type = 'OBJECT' AND prompt IS NOT NULL
        AND (ct_type IS NULL OR ct_type IN ('NULL', 'BIGINT', 'UBIGINT', 'VARCHAR', 'BOOLEAN', 'ARRAY', 'OBJECT'))
        AND (rid_type IS NULL OR rid_type IN ('NULL', 'VARCHAR')) AND (mid_type IS NULL OR mid_type IN ('NULL', 'VARCHAR'))
        AND NOT contains(coalesce(fr::VARCHAR, ''), '\\')
        AND (fr_type IS NULL OR fr_type IN ('NULL', 'VARCHAR', 'BIGINT', 'UBIGINT', 'BOOLEAN')
             OR (fr_type = 'OBJECT' AND len(list_distinct(fr_keys)) = len(fr_keys)
                 AND list_bool_and(list_transform(fr_keys, lambda k: regexp_matches(k, '^[A-Za-z0-9_ -]*$')
                     AND CASE WHEN regexp_matches(k, '^[A-Za-z0-9_ -]*$') THEN json_type(fr, '$."' || k || '"') END
                         IN ('NULL', 'VARCHAR', 'BIGINT', 'UBIGINT', 'BOOLEAN'))) IS NOT FALSE))))
    ) AS ok
FROM e
"""


def _scan(f: InputFile) -> tuple[bool, bool, bool | None]:
    """One pass over a plain file's bytes for what each reader must know of them: (the bulk reader may
    read it, it ends with a newline, the audit's sieve: forensics.audit.sieved.sql_sieved's answer, None
    where the audit reads the file itself). The bulk reader may read a file without a byte-order mark, a
    carriage return or a record separator, all of which the sieve's check finds among others."""
    size = f.path.stat().st_size
    if size == 0:
        return False, True, None
    with f.path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        plain = plain_bytes(mm)
        ok = plain is not None or (mm[:3] != b"\xef\xbb\xbf" and mm.find(b"\r") < 0 and mm.find(b"\x1e") < 0)
        ends_nl = mm[size - 1 : size] == b"\n"
    if not ok or plain is None:
        return ok, ends_nl, None
    try:
        return ok, ends_nl, sql_sieved(f.path, plain)
    except OSError:  # the audit names the file and the error
        return ok, ends_nl, None


BATCH_BYTES = 256 << 20  # the files read by one query: at most this many bytes (memory), or one file


def load_engine_files(con: duckdb.DuckDBPyConnection, files: list[InputFile], tz: ZoneInfo, rows: EngineRows) -> None:
    """The engine logs (text) and --log-requests JSONL files, in order, into engine_lines, engine_requests
    and batch_stats, a batch of files of one kind at a time; node_config and rejected rows go to `rows`
    (stored with the run's, by store)."""
    utc = str(tz) in ("UTC", "Etc/UTC")
    con.execute("CREATE OR REPLACE TEMP TABLE engine_read (file_id INTEGER, lines BIGINT)")  # lines read per file
    # text logs, then request logs: each kind in few batches (a query's cost is mostly per batch); the
    # Python reader's order of engine_requests (file, line, row of line) is restored after (_reorder)
    kinds = [[f for f in files if f.source == k] for k in ("engine_log", "engine_requests")]
    sieves: dict[int, bool | None] = {}  # the audit's sieve of each file read in bulk (_scan)
    for group in kinds:
        batch: list[tuple[InputFile, bool]] = []
        size = 0
        for f in group:
            text = f.source == "engine_log"
            compressed = f.rel.lower().endswith(COMPRESSED)
            ends_nl = True
            whole = READER == "python" or not utc
            if not whole and not compressed:
                ok, ends_nl, sieves[f.file_id] = _scan(f)
                whole = not ok
            if whole:
                _flush(con, batch, tz, rows, sieves)
                batch, size = [], 0
                if compressed:
                    _one_by_one(con, f, tz, rows)
                else:
                    _python_file(con, f, tz, rows, text)
                continue
            if batch and size + f.bytes > BATCH_BYTES:
                _flush(con, batch, tz, rows, sieves)
                batch, size = [], 0
            batch.append((f, ends_nl))
            size += f.bytes
        _flush(con, batch, tz, rows, sieves)
    if all(kinds):
        _reorder(con)
    _account(con, files, rows)


def _account(con: duckdb.DuckDBPyConnection, files: list[InputFile], rows: EngineRows) -> None:
    """Each file's rows read, rejected and loaded, in one query from what the readers kept: read, its
    lines (engine_read) and a gzip stream's cut (the rejected row without a line, rawtext); rejected, its
    rejected rows (the readers' in `rows`, the cut's in the table); loaded, the others (every line a reader
    does not reject gives rows or is read and kept out)."""
    ids = pa.table({"file_id": pa.array([f.file_id for f in files], pa.int32())})  # noqa: F841 (read by DuckDB)
    rej = pa.table(  # noqa: F841
        {
            "file_id": pa.array([r[0] for r in rows.rejected], pa.int32()),
            "row": pa.array([r[1] for r in rows.rejected], pa.int64()),
        }
    )
    got = con.execute(
        """WITH r AS (SELECT file_id, sum(lines) AS lines FROM engine_read GROUP BY file_id),
                j AS (SELECT file_id, count(*) AS n, count(*) FILTER (WHERE row IS NULL) AS cut FROM (
                        SELECT file_id, row FROM rej UNION ALL SELECT file_id, row FROM rejected) GROUP BY file_id)
           SELECT file_id, coalesce(lines, 0) + coalesce(cut, 0), coalesce(n, 0) FROM ids LEFT JOIN r USING (file_id)
           LEFT JOIN j USING (file_id)"""
    ).fetchall()
    by_id = {f.file_id: f for f in files}
    for fid, read, rejected in got:
        f = by_id[fid]
        f.rows_read, f.rows_rejected, f.rows_loaded = read, rejected, read - rejected
    con.execute("DROP TABLE engine_read")


def _reorder(con: duckdb.DuckDBPyConnection) -> None:
    """engine_requests in the order the Python reader adds its rows: by file (file_id is the files'
    order), line, then the order a line's rows were added (rowid)."""
    with timed("ingest/engine_requests_order"):
        con.execute(
            "CREATE OR REPLACE TEMP TABLE eng_req_sorted AS SELECT * FROM engine_requests ORDER BY file_id, line, rowid"
        )
        con.execute("DELETE FROM engine_requests")
        con.execute("INSERT INTO engine_requests SELECT * FROM eng_req_sorted")
        con.execute("DROP TABLE eng_req_sorted")


def _flush(
    con: duckdb.DuckDBPyConnection,
    batch: list[tuple[InputFile, bool]],
    tz: ZoneInfo,
    rows: EngineRows,
    sieves: dict[int, bool | None],
) -> None:
    if not batch:
        return
    paths = [str(f.path) for f, _ in batch]
    try:
        con.execute(
            "CREATE OR REPLACE TEMP TABLE eng_raw0 AS SELECT filename, line FROM read_csv($paths, "
            "columns = {'line': 'VARCHAR'}, delim = chr(30), quote = '', escape = '', header = false, "
            f"auto_detect = false, parallel = false, max_line_size = {rawtext.MAX_LINE}, strict_mode = false, "
            "null_padding = true, new_line = '\\n', filename = true)",
            {"paths": paths},
        )
    except duckdb.Error:
        con.execute("DROP TABLE IF EXISTS eng_raw0")
        for f, _ in batch:  # one file cannot be read in bulk: each on its own
            _one_by_one(con, f, tz, rows)
        return
    files = pa.table(
        {
            "fidx": pa.array(range(len(batch)), pa.int32()),
            "filename": pa.array(paths, pa.string()),
            "file_id": pa.array([f.file_id for f, _ in batch], pa.int32()),
            "node": pa.array([f.node for f, _ in batch], pa.string()),
        }
    )
    con.register("eng_files_arrow", files)
    con.execute("CREATE OR REPLACE TEMP TABLE eng_files AS SELECT * FROM eng_files_arrow")
    con.unregister("eng_files_arrow")
    con.execute("""CREATE OR REPLACE TEMP TABLE eng_raw AS
        WITH r AS (SELECT rowid AS r, filename, line FROM eng_raw0),
             s AS (SELECT filename, min(r) AS r0 FROM r GROUP BY filename)
        SELECT fidx, r - r0 + 1 AS line, line AS text FROM r JOIN s USING (filename) JOIN eng_files USING (filename)""")
    con.execute("DROP TABLE eng_raw0")
    with timed("ingest/engine_audit_lines"):
        _audit_lines(con, batch, sieves)
    _bulk(con, batch, tz, rows)


def _audit_lines(
    con: duckdb.DuckDBPyConnection, batch: list[tuple[InputFile, bool]], sieves: dict[int, bool | None]
) -> None:
    """The lines the config audit reads of the batch's files, kept from eng_raw (forensics.audit.sieved.
    kept_from) for ingest's audit (forensics.ingest.startup.store_audit), which then reads none of these
    files again. A file DuckDB may not sieve (its sieve None: _scan) the audit reads itself."""
    files = []
    for i, (f, _) in enumerate(batch):
        if (loose := sieves.get(f.file_id)) is not None:
            files.append((i, str(f.path), loose))
    if files:
        kept_from(con, "eng_raw", files, SIEVE)


def _one_by_one(con: duckdb.DuckDBPyConnection, f: InputFile, tz: ZoneInfo, rows: EngineRows) -> None:
    """One file on its own: a compressed one through rawtext (a damaged gzip stream is salvaged, lines
    not UTF-8 are marked), a plain one that DuckDB cannot read through the Python reader."""
    text = f.source == "engine_log"
    if not f.rel.lower().endswith(COMPRESSED):
        return _python_file(con, f, tz, rows, text)
    if not rawtext.load_lines(con, f, "eng_raw1"):
        return  # f.error says why
    con.execute(
        "CREATE OR REPLACE TEMP TABLE eng_files AS SELECT 0::INTEGER AS fidx, $fid::INTEGER AS file_id, $node AS node",
        {"fid": f.file_id, "node": f.node},
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE eng_raw AS SELECT 0::INTEGER AS fidx, rowid + 1 AS line, line AS text FROM eng_raw1"
    )
    con.execute("DROP TABLE eng_raw1")
    if str(tz) not in ("UTC", "Etc/UTC") or READER == "python":
        con.execute("CREATE OR REPLACE TEMP TABLE eng_pre AS SELECT fidx, line, text, NULL AS shape FROM eng_raw")
        counts = _counts(con, [(f, True)])
        loc = _python_lines(con, [(f, True)], counts, tz, rows)
        _store_rows(con, loc)
        _drop(con)
        return
    _bulk(con, [(f, True)], tz, rows)


def _counts(con: duckdb.DuckDBPyConnection, batch: list[tuple[InputFile, bool]]) -> dict[int, int]:
    got = dict(con.execute("SELECT fidx, count(*) FROM eng_raw GROUP BY fidx").fetchall())
    con.execute(
        "INSERT INTO engine_read SELECT file_id, count(*) FROM eng_raw JOIN eng_files USING (fidx) GROUP BY file_id"
    )
    return {i: got.get(i, 0) for i in range(len(batch))}


def _bulk(con: duckdb.DuckDBPyConnection, batch: list[tuple[InputFile, bool]], tz: ZoneInfo, rows: EngineRows) -> None:
    text = batch[0][0].source == "engine_log"
    counts = _counts(con, batch)
    with timed("ingest/engine_lines_sql"):
        con.execute(TEXT_LINES if text else JSON_LINES)
    if text:
        with timed("ingest/engine_batch_sql"):
            _batch(con)
        with timed("ingest/engine_time_stats_sql"):
            con.execute(TEXT_TIME_STATS)
        with timed("ingest/engine_requests_sql"):
            con.execute(TEXT_REQUESTS)
        # a taken line whose fields the SQL cannot vouch for goes back to the Python reader
        con.execute("""UPDATE eng_pre SET shape = NULL FROM (
            SELECT fidx, line FROM eng_batch WHERE NOT coalesce(ok, false) UNION ALL
            SELECT fidx, line FROM eng_ts WHERE NOT coalesce(ok, false) UNION ALL
            SELECT fidx, line FROM eng_req WHERE NOT coalesce(ok, false)) bad
            WHERE eng_pre.fidx = bad.fidx AND eng_pre.line = bad.line""")
    else:
        con.execute(JSON_REQUESTS)
        con.execute("""CREATE OR REPLACE TEMP TABLE eng_pre AS
            SELECT p.fidx, p.line, p.text, CASE WHEN coalesce(q.ok, false) OR (j.common_ok AND (j.event IS NULL
                OR j.event NOT IN ('request.received', 'request.finished'))) THEN 'json' END AS shape
            FROM eng_raw p LEFT JOIN eng_json j USING (fidx, line) LEFT JOIN eng_req q USING (fidx, line)""")
    with timed("ingest/engine_python_lines"):
        loc = _python_lines(con, batch, counts, tz, rows)
    with timed("ingest/engine_store"):
        _store_file(con, loc, text)
    _drop(con)


def _batch(con: duckdb.DuckDBPyConnection) -> None:
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


def _drop(con: duckdb.DuckDBPyConnection) -> None:
    for t in ("eng_raw", "eng_pre", "eng_json", "eng_batch", "eng_ts", "eng_req", "eng_files"):
        con.execute(f"DROP TABLE IF EXISTS {t}")


def _python_lines(
    con: duckdb.DuckDBPyConnection,
    batch: list[tuple[InputFile, bool]],
    counts: dict[int, int],
    tz: ZoneInfo,
    rows: EngineRows,
) -> EngineRows:
    """The lines of eng_pre the SQL did not take (shape NULL), through the Python reader; each row
    carries its file's index (fidx) for the store's order."""
    text = batch[0][0].source == "engine_log"
    loc = EngineRows()
    todo = con.execute("SELECT fidx, line, text FROM eng_pre WHERE shape IS NULL ORDER BY fidx, line").fetchall()
    parse = LINES.text if text else LINES.json
    marks = {"lines": 0, "requests": 0, "batches": 0}
    for fidx, lineno, line in todo:
        f, ends_nl = batch[fidx]
        assert f.node is not None
        if line is not None and line.startswith(rawtext.BAD_LINE):  # from the reader: not UTF-8, too long
            loc.rejected.append((f.file_id, lineno, line[1:]))
            continue
        raw = (line or "").encode() + (b"\n" if lineno < counts[fidx] or ends_nl else b"")
        parse(raw, f.node, f.file_id, lineno, tz, loc)  # a line it rejects is in loc.rejected
        for name in marks:
            got = getattr(loc, name)
            for r in got[marks[name] :]:
                r["fidx"] = fidx
            marks[name] = len(got)
    rows.config.extend(loc.config)
    rows.integrity.extend(loc.integrity)
    rows.rejected.extend(loc.rejected)
    return loc


def _python_file(con: duckdb.DuckDBPyConnection, f: InputFile, tz: ZoneInfo, rows: EngineRows, text: bool) -> None:
    """The whole file through the Python reader (as before #36), stored at once."""
    loc = EngineRows()
    (parse_log if text else parse_requests_jsonl)(f, tz, loc)
    con.execute("INSERT INTO engine_read VALUES ($fid, $lines)", {"fid": f.file_id, "lines": f.rows_read})
    rows.config.extend(loc.config)
    rows.integrity.extend(loc.integrity)
    rows.rejected.extend(loc.rejected)
    _store_rows(con, loc)


def _store_rows(con: duckdb.DuckDBPyConnection, loc: EngineRows) -> None:
    """Rows of the Python reader alone, in its order."""
    lines = pa.Table.from_pylist(loc.lines, schema=LINE_SCHEMA)  # noqa: F841 (read by DuckDB)
    reqs = pa.Table.from_pylist(loc.requests, schema=REQ_SCHEMA)  # noqa: F841
    batches = pa.Table.from_pylist(loc.batches, schema=batch_lines.SCHEMA)  # noqa: F841
    con.execute(
        "INSERT INTO engine_lines SELECT node, file_id, line, ts, ts_resolution_ms, rank, kind, message FROM lines"
    )
    con.execute(f"INSERT INTO engine_requests SELECT {', '.join(REQ_SCHEMA.names)} FROM reqs")
    con.execute(f"INSERT INTO batch_stats SELECT {', '.join(batch_lines.SCHEMA.names)} FROM batches")


def _store_file(con: duckdb.DuckDBPyConnection, loc: EngineRows, text: bool) -> None:
    """The SQL's rows and the Python reader's, in the Python reader's order (file, line, row of line)."""
    fidx = pa.field("fidx", pa.int32())
    lines = pa.Table.from_pylist(loc.lines, schema=LINE_SCHEMA.append(fidx))  # noqa: F841 (read by DuckDB)
    reqs = pa.Table.from_pylist(  # noqa: F841
        [r | {"sub": i} for i, r in enumerate(loc.requests)],
        schema=REQ_SCHEMA.append(fidx).append(pa.field("sub", pa.int64())),
    )
    batches = pa.Table.from_pylist(loc.batches, schema=batch_lines.SCHEMA.append(fidx))  # noqa: F841
    none = "NULL::DOUBLE"
    if text:
        con.execute(
            f"""INSERT INTO engine_lines SELECT {", ".join(LINE_SCHEMA.names)} FROM (
                SELECT node, file_id, line, ts, res AS ts_resolution_ms, rank,
                    CASE shape WHEN 'plain' THEN NULL WHEN 'batch' THEN lower(regexp_extract(msg, '^(Prefill|Decode)', 1)) || '_batch'
                        ELSE shape END AS kind, left(msg, 4000) AS message, fidx
                FROM eng_pre JOIN eng_files USING (fidx) WHERE shape IS NOT NULL
                UNION ALL SELECT * FROM lines) ORDER BY fidx, line"""
        )
        con.execute(
            f"""INSERT INTO batch_stats SELECT {", ".join(batch_lines.SCHEMA.names)} FROM (
                SELECT node, file_id, line, ts, bkind AS kind, forward_ct, {", ".join(_BCOLS)}, graph, fidx
                FROM eng_batch JOIN eng_files USING (fidx) WHERE ok
                UNION ALL SELECT * FROM batches) ORDER BY fidx, line"""
        )
        con.execute(
            f"""INSERT INTO engine_requests SELECT {", ".join(REQ_SCHEMA.names)} FROM (
                SELECT node, t.rid, t.room, 'time_stats' AS kind, input_len, output_len, NULL::BIGINT AS max_input_len,
                    detail, t.ts, file_id, t.line, forward_s, start_time, prealloc_s, transfer_s,
                    queue_s, bootstrap_s, {none} AS elapsed_s, NULL AS forwarded_id, t.fidx, 0 AS sub
                FROM eng_ts t JOIN eng_pre p ON p.fidx = t.fidx AND p.line = t.line AND p.shape = 'time_stats'
                JOIN eng_files f ON f.fidx = t.fidx
                UNION ALL
                SELECT node, CASE WHEN r.shape = 'received' THEN rid_s ELSE coalesce(nullif(rid_s, ''), nullif(meta_id, ''), '') END,
                    room, r.shape, CASE WHEN r.shape = 'finished' THEN prompt END,
                    CASE WHEN r.shape = 'finished' THEN compl END, NULL, CASE WHEN r.shape = 'finished' THEN detail END,
                    r.ts, file_id, r.line, {none}, NULL, {none}, {none}, {none}, {none}, {none}, NULL, r.fidx, 0
                FROM eng_req r JOIN eng_pre p ON p.fidx = r.fidx AND p.line = r.line AND p.shape IN ('received', 'finished')
                JOIN eng_files f ON f.fidx = r.fidx
                UNION ALL SELECT * FROM reqs) ORDER BY fidx, line, sub"""
        )
    else:
        con.execute(f"INSERT INTO engine_lines SELECT {', '.join(LINE_SCHEMA.names)} FROM lines ORDER BY fidx, line")
        con.execute(
            f"INSERT INTO batch_stats SELECT {', '.join(batch_lines.SCHEMA.names)} FROM batches ORDER BY fidx, line"
        )
        con.execute(
            f"""INSERT INTO engine_requests SELECT {", ".join(REQ_SCHEMA.names)} FROM (
                SELECT node, CASE WHEN event = 'request.received' THEN rid_s ELSE rid_fin END AS rid, room,
                    CASE WHEN event = 'request.received' THEN 'received' ELSE 'finished' END AS kind,
                    CASE WHEN event = 'request.received' THEN input_len ELSE prompt END AS input_len,
                    CASE WHEN event = 'request.finished' THEN compl END AS output_len, NULL::BIGINT AS max_input_len,
                    CASE WHEN event = 'request.finished' THEN detail END AS detail, q.ts, file_id, q.line,
                    {none} AS forward_s, NULL::TIMESTAMPTZ AS start_time, {none} AS prealloc_s, {none} AS transfer_s,
                    {none} AS queue_s, {none} AS bootstrap_s, {none} AS elapsed_s, forwarded_id, q.fidx, 0 AS sub
                FROM eng_req q JOIN eng_pre p ON p.fidx = q.fidx AND p.line = q.line AND p.shape = 'json'
                JOIN eng_files f ON f.fidx = q.fidx
                UNION ALL SELECT * FROM reqs) ORDER BY fidx, line, sub"""
        )
