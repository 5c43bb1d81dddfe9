"""Gateway formats compiled to SQL: the queries that stage the records of a format (JSON text `rec`,
or a CSV file's columns) as the spec's gateway fields plus engine_id, trace_id and attrs
(forensics.gateway_formats holds the formats themselves).

Each JSON record is parsed once for every path the projection reads (one list-valued json_extract), a
CSV row not at all (its columns are the top-level fields), and JSON held as text (a CSV column, a JSON
string) once more for the paths into it; a json_extract per path and use would parse the record again
for each (101 of them in a LiteLLM SpendLogs row's projection, 46 in Envoy's). Text that opens like
JSON (`{` or `[`) but does not parse, where a path goes into it, rejects the record with its field named.
The paths a projection reads and the query reading them are format_reads.py's (Reads).
"""

from __future__ import annotations

import re

from forensics.db import sql_literal
from forensics.gateway_formats import TEXT_FIELDS, GatewaySettings, Key, Mapping, paths_of
from forensics.ingest.format_reads import Reads

# JSON text of a value that holds no text to fingerprint (forensics.ingest.content: text_of gives "")
NO_TEXT = ("null", "{}", "[]", '""', '"{}"', '"[]"')


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


def _first(r: Reads, paths: tuple[Key, ...]) -> str:
    if not paths:
        return "NULL::VARCHAR"
    parts = [r.text(k) for k in paths]
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def _ts(r: Reads, m: Mapping, zone: str | None) -> str:
    """The record's time as RFC 3339 text in UTC when it parses; else its text as logged (the validation
    then rejects the row and shows it)."""
    v = _first(r, m.fields.get("ts", ()))
    return f"coalesce(strftime(({_parsed_time(v, m.time, zone)}) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'), {v})"


def _status(r: Reads, m: Mapping) -> str:
    v = _first(r, m.fields.get("status", ()))
    if not m.status_map:
        return v
    code = _first(r, m.status_fallback)
    whens = " ".join(
        f"WHEN lower({v}) = {sql_literal(k)} THEN "
        + (sql_literal(s) if s else f"CASE WHEN regexp_matches({code}, '^[0-9]{{3}}$') THEN {code} END")
        for k, s in m.status_map
    )
    return f"CASE {whens} ELSE {v} END"


def _duration(r: Reads, m: Mapping) -> str:
    v = _first(r, m.fields.get("duration_ms", ()))
    scaled = f"CAST(TRY_CAST({v} AS DOUBLE) * {m.duration_unit!r} AS VARCHAR)"
    direct = (
        f"CASE WHEN TRY_CAST({v} AS DOUBLE) IS NOT NULL THEN {scaled} ELSE {v} END" if m.duration_unit != 1.0 else v
    )
    if m.duration_from is None:
        return direct
    start, end = (f"epoch_us({_parsed_time(_first(r, (k,)), m.time, 'UTC')}) / 1000.0" for k in m.duration_from)
    diff = f"CAST(round({end} - {start}, 3) AS VARCHAR)"
    return f"coalesce({direct}, {diff})"


def _attrs(r: Reads, m: Mapping) -> dict[str, str]:
    return {a: _first(r, paths) for a, paths in m.attrs.items() if a != "tags"}


def _tenant(r: Reads, m: Mapping, settings: GatewaySettings, lost: frozenset[str]) -> str:
    """account_id: the configured tenant (an attribute, else a field path), else the format's default order.
    The order stops before the first attribute `lost` (its field dropped or renamed in the file): a record
    that the earlier ones give no account would have taken it from the lost one, so its account is unknown
    (NULL), not the next attribute's value."""
    order = settings.tenant or m.tenant
    attrs = _attrs(r, m)
    named = [t if isinstance(t, str) else ".".join(t) for t in order]
    if lost & set(named):
        order = order[: min(named.index(t) for t in lost if t in named)]
    parts = [attrs[t] if t in attrs else _first(r, paths_of(t)) for t in order]
    if "account_id" in m.fields:
        parts.insert(0, _first(r, m.fields["account_id"]))
    return "NULL::VARCHAR" if not parts else parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def _headers(r: Reads, m: Mapping) -> str:
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
        r.columns["header_pairs"] = pairs  # one column: the pairs are read once, not once per use
        parts.append("CASE WHEN len(header_pairs) > 0 THEN to_json(map_from_entries(header_pairs)) END")
    for key in m.headers_at:
        parts.append(f"CASE WHEN json_type({r.parsed_json(key)}) = 'OBJECT' THEN {r.parsed_json(key)} END")
    for name in m.header_fields:  # a mapping's [internal] headers: single fields copied by name
        key = (name,)
        parts.append(
            f"CASE WHEN {r.text(key)} IS NOT NULL THEN json_object({sql_literal(name.lower())}, {r.text(key)}) END"
        )
    if not parts:
        return "NULL::VARCHAR"
    merged = (
        parts[0]
        if len(parts) == 1
        else f"json_merge_patch({', '.join(f'coalesce({p}, {chr(39)}{{}}{chr(39)})' for p in parts)})"
    )
    return f"CASE WHEN CAST({merged} AS VARCHAR) IN ('{{}}', 'null') THEN NULL ELSE CAST({merged} AS VARCHAR) END"


def _may_hold_text(r: Reads, key: Key) -> str:
    """False only where the record surely holds no text at a path (forensics.ingest.content then gives
    it none): nothing there or an empty object, array or string, no JSON string on the way that
    content would parse and this did not, and no key of the path that Python's json may read otherwise."""
    on_the_way = [f"json_type({r.json(key[:n])}) = 'VARCHAR'" for n in range(2, len(key))]
    empty = ", ".join(sql_literal(t) for t in NO_TEXT)
    return " OR ".join(
        [f"coalesce(CAST({r.json(key)} AS VARCHAR) NOT IN ({empty}), false)", *on_the_way, *r.aliased(key)]
    )


def project(
    m: Mapping, settings: GatewaySettings, table: dict[str, str] | None = None, lost: frozenset[str] = frozenset()
) -> tuple[str, str]:
    """(values, stage): the query making gw_values from gw_records (row, parse_error, rec; see Reads)
    with `may_text` (the record may hold prompt or response text), and the one making the staged text
    columns from gw_values: the spec's fields plus engine_id, trace_id and attrs (a JSON object without
    empty keys). `table`: a CSV file's header, name -> its column in gw_records (else records are rec).
    gw_values holds rec (the record as JSON text) where may_text, for forensics.ingest.content. `lost`:
    the tenant attributes whose fields the file lost (forensics.ingest.damage.lost_tenant)."""
    r = Reads(table)
    zone = settings.zone_for(m)
    f = m.fields
    attr_sql = _attrs(r, m)
    tags = f"{r.parsed_json(m.attrs['tags'][0])}" if "tags" in m.attrs else "NULL::JSON"
    attr_pairs = ", ".join(f"{sql_literal(a)}, {e}" for a, e in attr_sql.items())
    pairs = f"{attr_pairs}{', ' if attr_pairs else ''}'tags', {tags}, 'format', {sql_literal(m.name)}"
    attrs = f"json_merge_patch('{{}}', json_object({pairs}))"
    user_agent = _first(r, f.get("user_agent", ()))
    if m.ua_from_tags and "tags" in m.attrs:
        t = r.parsed_json(m.attrs["tags"][0])
        # of "User-Agent: OpenAI" and "User-Agent: OpenAI/Python 1.51.0" the full one sorts last
        tagged = (
            f"CASE WHEN json_type({t}) = 'ARRAY' THEN substr(list_max(list_filter(CAST({t} AS VARCHAR[]), "
            "lambda x: starts_with(x, 'User-Agent: '))), 13) END"
        )
        user_agent = f"coalesce({user_agent}, nullif({tagged}, ''))"
    cols = {
        "ts": _ts(r, m, zone),
        "request_id": _first(r, f.get("request_id", ())),
        "account_id": _tenant(r, m, settings, lost),
        "api_token_id": _first(r, f.get("api_token_id", ())),
        "client_ip": _first(r, f.get("client_ip", ())),
        "user_agent": user_agent,
        "model": _first(r, f.get("model", ())),
        "status": _status(r, m),
        "prompt_tokens": _first(r, f.get("prompt_tokens", ())),
        "completion_tokens": _first(r, f.get("completion_tokens", ())),
        "duration_ms": _duration(r, m),
        "bootstrap_room": _first(r, f.get("bootstrap_room", ())),
        "prefill_node": _first(r, f.get("prefill_node", ())),
        "decode_node": _first(r, f.get("decode_node", ())),
        "headers": _headers(r, m),
        "engine_id": _first(r, f.get("engine_id", ())),
        "trace_id": f"lower({_first(r, f.get('trace_id', ()))})",
        "attrs": f"CAST({attrs} AS VARCHAR)",
    }
    blanks = ", ".join(sql_literal(b) for b in m.empty if b)
    if blanks:  # values the format writes for "not logged"
        cols = {c: e if c in ("headers", "attrs") else f"CASE WHEN ({e}) IN ({blanks}) THEN NULL ELSE ({e}) END"
                for c, e in cols.items()}  # fmt: skip
    body = ",\n".join(f"CASE WHEN error IS NULL THEN {e} END AS {c}" for c, e in cols.items())
    texts = [_may_hold_text(r, k) for side in TEXT_FIELDS.values() for k in f.get(side, ())]
    may_text = " OR ".join(f"({t})" for t in texts) or "false"
    values = f"SELECT *, parse_error IS NULL AND ({may_text}) AS may_text FROM ({r.values()})"
    if table is not None and not r.columns:
        values = f"SELECT *, CASE WHEN may_text THEN {r.record()} END AS rec FROM ({values})"
    return values, f"SELECT row, error AS parse_error,\n{body}\nFROM gw_values"


def needs_zone(m: Mapping, settings: GatewaySettings, sample_ts: str | None) -> bool:
    """True when a format's times are written without zone and neither the format nor bundle.toml says
    which zone they are in: reading them would be a guess."""
    if settings.zone_for(m) is not None or m.time.startswith("epoch_"):
        return False
    if m.time != "rfc3339":
        return "%z" not in m.time and "%Z" not in m.time
    return sample_ts is not None and not re.search(r"(Z|z|[+-]\d{2}(:?\d{2})?)$", sample_ts.strip())
