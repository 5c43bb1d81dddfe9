# ruff: noqa: E501  (SQL text and its regexes: split lines would not read better)
"""The bulk reader's SQL over a batch of SGLang text logs (forensics.ingest.bulk): each line's record
prefix and the shape the SQL takes (TEXT_LINES, eng_pre), then the fields of the Req Time Stats lines
(TEXT_TIME_STATS, eng_ts) and of the --log-requests Receive and Finish lines (TEXT_REQUESTS, eng_req).
Each shape's bulk pattern (forensics.engines.sglang.shapes SHAPES) admits a subset of what its Python
pattern reads, never more; the SQL reaches each through its macro (sglang_re_<shape>(), the shapes'
MACROS)."""

from __future__ import annotations

from forensics.db import sql_literal as _lit
from forensics.engines.sglang.shapes import BULK_INT, BULK_SHAPES, DURATIONS, SHAPES

_INT = BULK_INT


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
