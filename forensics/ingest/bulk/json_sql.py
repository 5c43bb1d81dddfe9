# ruff: noqa: E501  (SQL text and its regexes: split lines would not read better)
"""The bulk reader's SQL over a batch of --log-requests JSON files (forensics.ingest.bulk): each record's
fields and whether the SQL vouches for them (JSON_LINES, eng_json), then the request rows of the
request.received and request.finished records (JSON_REQUESTS, eng_req)."""

from __future__ import annotations

from forensics.db import sql_literal as _lit


def _json_int(j: str) -> str:
    """SQL for `j` holding a JSON integer that fits int64, as rows.json_int decides in Python.
    DuckDB types a non-negative JSON integer UBIGINT and a negative one BIGINT (a UBIGINT over int64's
    range fails the cast)."""
    return f"(json_type({j}) IN ('BIGINT', 'UBIGINT') AND try_cast({j} AS BIGINT) IS NOT NULL)"


JSON_TS_RE = r"^([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2}:[0-9]{2})(\.[0-9]{3}|\.[0-9]{6})?$"


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
