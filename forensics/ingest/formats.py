"""Gateway formats compiled to SQL: the select list that stages one record of a format (JSON text
`rec`) as the spec's gateway fields plus engine_id, trace_id and attrs (forensics.gateway_formats
holds the formats themselves)."""

from __future__ import annotations

import re

from forensics.db import sql_literal
from forensics.gateway_formats import GatewaySettings, Key, Mapping, paths_of


def _json_path(key: Key) -> str:
    return "$" + "".join('."' + k.replace("\\", "\\\\").replace('"', '\\"') + '"' for k in key)


def _text(key: Key) -> str:
    """The text at a path; a CSV or Parquet JSON column is text holding JSON, so a path into it is
    followed into the parsed text as well. Arrays of one value (OTLP header attributes) give the value."""
    full = f"json_extract_string(rec, {sql_literal(_json_path(key))})"
    if len(key) == 1:
        return f"nullif(trim({full}), '')"
    head, tail = sql_literal(_json_path(key[:1])), sql_literal(_json_path(key[1:]))
    inner = f"json_extract_string(json_extract_string(rec, {head}), {tail})"
    return f"nullif(trim(coalesce({full}, {inner})), '')"


def _first(paths: tuple[Key, ...]) -> str:
    if not paths:
        return "NULL::VARCHAR"
    parts = [_text(k) for k in paths]
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def _json_value(key: Key) -> str:
    """The JSON at a path (a JSON column held as text is parsed)."""
    j = f"json_extract(rec, {sql_literal(_json_path(key))})"
    if len(key) > 1:
        head, tail = sql_literal(_json_path(key[:1])), sql_literal(_json_path(key[1:]))
        j = f"coalesce({j}, json_extract(json_extract_string(rec, {head}), {tail}))"
    return f"""CASE WHEN json_type({j}) = 'VARCHAR' AND json_valid({j} ->> '$') THEN ({j} ->> '$')::JSON
                    WHEN json_type({j}) IN ('OBJECT', 'ARRAY') THEN {j} END"""


def _parsed_time(v: str, kind: str, zone: str | None) -> str:
    """The TIMESTAMPTZ of time text `v` written as `kind` (TIME_KINDS or a strptime format); NULL when it
    does not parse. `zone`: the zone of values written without one (None: such values do not parse)."""
    if kind == "rfc3339":
        has_zone = f"regexp_matches({v}, '(Z|z|[+-][0-9]{{2}}(:?[0-9]{{2}})?)$')"
        zoned = f"CASE WHEN {has_zone} THEN TRY_CAST({v} AS TIMESTAMPTZ) END"
        return (
            zoned if zone is None else f"coalesce({zoned}, timezone({sql_literal(zone)}, TRY_CAST({v} AS TIMESTAMP)))"
        )
    if kind.startswith("epoch_"):
        per_us = {"epoch_s": "* 1000000", "epoch_ms": "* 1000", "epoch_us": "", "epoch_ns": "/ 1000"}[kind]
        num = f"TRY_CAST({v} AS HUGEINT)" if kind == "epoch_ns" else f"TRY_CAST({v} AS DOUBLE)"
        return f"make_timestamptz(TRY_CAST(round({num} {per_us}) AS BIGINT))"
    naive = f"TRY_STRPTIME({v}, {sql_literal(kind)})"
    return naive if "%z" in kind or "%Z" in kind else f"timezone({sql_literal(zone or 'UTC')}, {naive}::TIMESTAMP)"


def _ts(m: Mapping, zone: str | None) -> str:
    """The record's time as RFC 3339 text in UTC when it parses; else its text as logged (the validation
    then rejects the row and shows it)."""
    v = _first(m.fields.get("ts", ()))
    return f"coalesce(strftime(({_parsed_time(v, m.time, zone)}) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'), {v})"


def _status(m: Mapping) -> str:
    v = _first(m.fields.get("status", ()))
    if not m.status_map:
        return v
    code = _first(m.status_fallback)
    whens = " ".join(
        f"WHEN lower({v}) = {sql_literal(k)} THEN "
        + (sql_literal(s) if s else f"CASE WHEN regexp_matches({code}, '^[0-9]{{3}}$') THEN {code} END")
        for k, s in m.status_map
    )
    return f"CASE {whens} ELSE {v} END"


def _duration(m: Mapping) -> str:
    v = _first(m.fields.get("duration_ms", ()))
    scaled = f"CAST(TRY_CAST({v} AS DOUBLE) * {m.duration_unit!r} AS VARCHAR)"
    direct = (
        f"CASE WHEN TRY_CAST({v} AS DOUBLE) IS NOT NULL THEN {scaled} ELSE {v} END" if m.duration_unit != 1.0 else v
    )
    if m.duration_from is None:
        return direct
    start, end = (f"epoch_us({_parsed_time(_first((k,)), m.time, 'UTC')}) / 1000.0" for k in m.duration_from)
    diff = f"CAST(round({end} - {start}, 3) AS VARCHAR)"
    return f"coalesce({direct}, {diff})"


def _attrs(m: Mapping) -> dict[str, str]:
    return {a: _first(paths) for a, paths in m.attrs.items() if a != "tags"}


def _tenant(m: Mapping, settings: GatewaySettings) -> str:
    """account_id: the configured tenant (an attribute, else a field path), else the format's default order."""
    order = settings.tenant or m.tenant
    attrs = _attrs(m)
    parts = [attrs[t] if t in attrs else _first(paths_of(t)) for t in order]
    if "account_id" in m.fields:
        parts.insert(0, _first(m.fields["account_id"]))
    return "NULL::VARCHAR" if not parts else parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def _headers(m: Mapping) -> str:
    parts = []
    if m.header_prefix:
        exact = ", ".join(sql_literal(s) for s in m.header_skip if not s.endswith("-")) or "''"
        prefixes = "".join(
            f" AND NOT starts_with(lower(k), {sql_literal(s)})" for s in m.header_skip if s.endswith("-")
        )
        prefix = sql_literal(m.header_prefix)
        pairs = (
            f"list_transform(list_filter(json_keys(rec), lambda k: starts_with(lower(k), {prefix}) "
            f"AND lower(k) NOT IN ({exact}){prefixes}), "
            "lambda k: {'k': lower(k), 'v': json_extract_string(rec, '$.\"' || k || '\"')})"
        )
        parts.append(f"CASE WHEN len({pairs}) > 0 THEN to_json(map_from_entries({pairs})) END")
    for key in m.headers_at:
        parts.append(f"CASE WHEN json_type({_json_value(key)}) = 'OBJECT' THEN {_json_value(key)} END")
    for name in m.header_fields:  # a mapping's [internal] headers: single fields copied by name
        key = (name,)
        parts.append(
            f"CASE WHEN {_text(key)} IS NOT NULL THEN json_object({sql_literal(name.lower())}, {_text(key)}) END"
        )
    if not parts:
        return "NULL::VARCHAR"
    merged = (
        parts[0]
        if len(parts) == 1
        else f"json_merge_patch({', '.join(f'coalesce({p}, {chr(39)}{{}}{chr(39)})' for p in parts)})"
    )
    return f"CASE WHEN CAST({merged} AS VARCHAR) IN ('{{}}', 'null') THEN NULL ELSE CAST({merged} AS VARCHAR) END"


def project(m: Mapping, settings: GatewaySettings) -> str:
    """The select list over (row, parse_error, rec) that stages one record as the spec's text columns
    plus engine_id, trace_id and attrs (a JSON object without empty keys)."""
    zone = settings.zone_for(m)
    f = m.fields
    attr_sql = _attrs(m)
    tags = f"{_json_value(m.attrs['tags'][0])}" if "tags" in m.attrs else "NULL::JSON"
    attr_pairs = ", ".join(f"{sql_literal(a)}, {e}" for a, e in attr_sql.items())
    pairs = f"{attr_pairs}{', ' if attr_pairs else ''}'tags', {tags}, 'format', {sql_literal(m.name)}"
    attrs = f"json_merge_patch('{{}}', json_object({pairs}))"
    user_agent = _first(f.get("user_agent", ()))
    if m.ua_from_tags and "tags" in m.attrs:
        t = _json_value(m.attrs["tags"][0])
        # of "User-Agent: OpenAI" and "User-Agent: OpenAI/Python 1.51.0" the full one sorts last
        tagged = (
            f"CASE WHEN json_type({t}) = 'ARRAY' THEN substr(list_max(list_filter(CAST({t} AS VARCHAR[]), "
            "lambda x: starts_with(x, 'User-Agent: '))), 13) END"
        )
        user_agent = f"coalesce({user_agent}, nullif({tagged}, ''))"
    cols = {
        "ts": _ts(m, zone),
        "request_id": _first(f.get("request_id", ())),
        "account_id": _tenant(m, settings),
        "api_token_id": _first(f.get("api_token_id", ())),
        "client_ip": _first(f.get("client_ip", ())),
        "user_agent": user_agent,
        "model": _first(f.get("model", ())),
        "status": _status(m),
        "prompt_tokens": _first(f.get("prompt_tokens", ())),
        "completion_tokens": _first(f.get("completion_tokens", ())),
        "duration_ms": _duration(m),
        "bootstrap_room": _first(f.get("bootstrap_room", ())),
        "prefill_node": _first(f.get("prefill_node", ())),
        "decode_node": _first(f.get("decode_node", ())),
        "headers": _headers(m),
        "engine_id": _first(f.get("engine_id", ())),
        "trace_id": f"lower({_first(f.get('trace_id', ()))})",
        "attrs": f"CAST({attrs} AS VARCHAR)",
    }
    blanks = ", ".join(sql_literal(b) for b in m.empty if b)
    if blanks:  # values the format writes for "not logged"
        cols = {c: e if c in ("headers", "attrs") else f"CASE WHEN ({e}) IN ({blanks}) THEN NULL ELSE ({e}) END"
                for c, e in cols.items()}  # fmt: skip
    body = ",\n".join(f"CASE WHEN parse_error IS NULL THEN {e} END AS {c}" for c, e in cols.items())
    return f"row, parse_error,\n{body}"


def needs_zone(m: Mapping, settings: GatewaySettings, sample_ts: str | None) -> bool:
    """True when a format's times are written without zone and neither the format nor bundle.toml says
    which zone they are in: reading them would be a guess."""
    if settings.zone_for(m) is not None or m.time.startswith("epoch_"):
        return False
    if m.time != "rfc3339":
        return "%z" not in m.time and "%Z" not in m.time
    return sample_ts is not None and not re.search(r"(Z|z|[+-]\d{2}(:?\d{2})?)$", sample_ts.strip())
