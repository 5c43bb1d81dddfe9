"""Gateway and proxy log formats (docs/gateway-formats.md): each format as its writer writes it, and the
SQL that turns one of its records into the spec's gateway fields plus the tenant-layer ones.

A format is a Mapping: the fields that mark it, then for each of our fields the paths it may sit at
(the first that is set wins). The built-in formats below are Mappings written from their writers'
schemas (each cites its source); a bundle's own mapping file (`[gateway] mapping`) is read into the
same shape, so one compiler serves both. Records reach the compiler as JSON text (`rec`): a JSON line as
read, a CSV or Parquet row as DuckDB's to_json makes it, a span or a request as flattened by its reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from forensics.db import sql_literal
from forensics.errors import InputError

Key = tuple[str, ...]  # a path into a record: keys of nested objects

# the tenant-layer attributes a format may carry (gateway.attrs), with the cohort-rule key of each
ATTRS = ("team", "team_alias", "organization", "key_alias", "user", "end_user", "tags")
TIME_KINDS = ("rfc3339", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns")


@dataclass(frozen=True)
class Mapping:
    """One format: how its records give our fields."""

    name: str
    doc: str  # what writes it (the source the paths were read from)
    detect: tuple[str, ...]  # top-level fields that must all be present
    fields: dict[str, tuple[Key, ...]]  # our field -> candidate paths
    attrs: dict[str, tuple[Key, ...]] = field(default_factory=dict)  # tenant-layer attribute -> paths
    tenant: tuple[str | Key, ...] = ()  # default: the attributes (or paths) the account is taken from, in order
    time: str = "rfc3339"  # TIME_KINDS, or a strptime format
    zone: str | None = None  # the zone of values written without one, where the writer fixes it
    status_map: tuple[tuple[str, str], ...] = ()  # logged text -> HTTP status ('' : unknown)
    status_fallback: tuple[Key, ...] = ()  # where a mapped failure's HTTP code may sit
    duration_unit: float = 1.0  # the duration field's unit, in ms
    duration_from: tuple[Key, Key] | None = None  # (start, end) when no duration field: their difference
    header_prefix: str | None = None  # top-level fields with this prefix are request headers
    header_skip: tuple[str, ...] = ()  # prefixed fields that are not headers to match on
    headers_at: tuple[Key, ...] = ()  # where an object of request headers sits
    grouped: bool = False  # several lines per request (a reader groups them first)
    strict: bool = False  # the spec's contract: account_id and status required
    empty: tuple[str, ...] = ("",)  # logged values that mean "not logged"


def _p(*paths: str | Key) -> tuple[Key, ...]:
    """Paths written as 'a.b' (keys without dots), 'a|b.c' ('|' between keys that hold dots) or as a
    tuple of keys (a single key that holds dots: ("gen_ai.request.model",))."""
    return tuple(p if isinstance(p, tuple) else tuple(p.split("|")) if "|" in p else tuple(p.split(".")) for p in paths)


LITELLM_TENANT = ("team", "organization", "user", "key_alias", "end_user")
LITELLM_STATUS = (("success", "200"), ("failure", ""))

BUILTIN: tuple[Mapping, ...] = (
    Mapping(
        # LiteLLM_SpendLogs (BerriAI/litellm schema.prisma; rows written by
        # litellm/proxy/spend_tracking/spend_tracking_utils.py get_logging_payload): request_id is the
        # upstream response id; startTime is UTC (_ensure_datetime_utc), so a CSV of the Postgres
        # timestamp(3) column, which carries no zone, is read as UTC.
        name="litellm_spendlogs",
        doc="LiteLLM proxy LiteLLM_SpendLogs rows (CSV/JSON/Parquet export)",
        detect=("request_id", "call_type", "api_key", "startTime"),
        fields={
            "ts": _p("startTime"),
            "request_id": _p("request_id"),
            "api_token_id": _p("api_key", "metadata.user_api_key"),
            "client_ip": _p("requester_ip_address", "metadata.requester_ip_address"),
            "user_agent": _p("metadata.user_agent", "metadata.proxy_server_request.headers.user-agent"),
            "model": _p("model_group", "model"),
            "status": _p("status", "metadata.status"),
            "prompt_tokens": _p("prompt_tokens"),
            "completion_tokens": _p("completion_tokens"),
            "duration_ms": _p("request_duration_ms"),
            "trace_id": (),
            "engine_id": (),
        },
        attrs={
            "team": _p("team_id", "metadata.user_api_key_team_id"),
            "team_alias": _p("metadata.user_api_key_team_alias"),
            "organization": _p("organization_id", "metadata.user_api_key_org_id"),
            "key_alias": _p("metadata.user_api_key_alias"),
            "user": _p("user", "metadata.user_api_key_user_id"),
            "end_user": _p("end_user"),
            "tags": _p("request_tags"),
        },
        tenant=LITELLM_TENANT,
        zone="UTC",
        status_map=LITELLM_STATUS,
        status_fallback=_p("metadata.error_information.error_code", "metadata.status_code"),
        duration_from=(("startTime",), ("endTime",)),
    ),
    Mapping(
        # StandardLoggingPayload (litellm/types/utils.py; built by litellm_logging.py
        # get_standard_logging_object_payload): id is the response id, times are float epoch seconds.
        name="litellm_payload",
        doc="LiteLLM StandardLoggingPayload JSON lines (s3, gcs_bucket, generic_api callbacks)",
        detect=("id", "call_type", "startTime", "metadata"),
        fields={
            "ts": _p("startTime"),
            "request_id": _p("id"),
            "api_token_id": _p("metadata.user_api_key_hash"),
            "client_ip": _p("requester_ip_address", "metadata.requester_ip_address"),
            "user_agent": _p("user_agent", "metadata.user_agent"),
            "model": _p("model_group", "model"),
            "status": _p("status"),
            "prompt_tokens": _p("prompt_tokens"),
            "completion_tokens": _p("completion_tokens"),
            "trace_id": (),
            "engine_id": _p("hidden_params.response_id"),
        },
        attrs={
            "team": _p("metadata.user_api_key_team_id"),
            "team_alias": _p("metadata.user_api_key_team_alias"),
            "organization": _p("metadata.user_api_key_org_id"),
            "key_alias": _p("metadata.user_api_key_alias"),
            "user": _p("metadata.user_api_key_user_id"),
            "end_user": _p("end_user", "metadata.user_api_key_end_user_id"),
            "tags": _p("request_tags"),
        },
        tenant=LITELLM_TENANT,
        time="epoch_s",
        status_map=LITELLM_STATUS,
        status_fallback=_p("error_information.error_code"),
        duration_from=(("startTime",), ("endTime",)),
        duration_unit=1000.0,
        headers_at=_p("metadata.requester_custom_headers"),
    ),
    Mapping(
        # SGLang model gateway --log-json (sgl-model-gateway/src/observability/logging.rs: tracing
        # json().flatten_event(true), ChronoUtc "%Y-%m-%d %H:%M:%S[.%3f]"; middleware.rs: span
        # http_request with request_id, status_code, latency in microseconds). The reader groups a
        # request's lines into one record first (group_smg).
        name="smg",
        doc="SGLang model gateway (sgl-router / smg) --log-json lines",
        detect=("timestamp", "level", "target"),
        fields={
            "ts": _p("timestamp"),
            "request_id": _p("request_id"),
            "status": _p("status_code"),
            "duration_ms": _p("latency"),
            "model": _p("model"),
            "prompt_tokens": _p("prompt_tokens"),
            "completion_tokens": _p("completion_tokens"),
            "trace_id": (),
            "engine_id": (),
        },
        attrs={},
        zone="UTC",
        duration_unit=0.001,
        grouped=True,
    ),
    Mapping(
        # Envoy Gateway's default JSON access log (gateway.envoyproxy.io, proxy access logs) and the
        # Envoy AI Gateway's additions (envoyproxy/ai-gateway site/docs/capabilities/observability/
        # accesslogs.md: genai_* from dynamic metadata; the semconv-style keys of its newer example).
        # Tenants exist only where the operator logs one (%REQ(X-TENANT-ID)%, a JWT claim).
        name="envoy",
        doc="Envoy / Envoy Gateway / Envoy AI Gateway JSON access log",
        detect=("start_time", "response_code"),
        fields={
            "ts": _p("start_time"),
            "request_id": _p("x-request-id", "request_id"),
            "client_ip": _p("x-forwarded-for", "downstream_remote_address"),
            "user_agent": _p("user-agent"),
            "model": _p("genai_model_name", ("gen_ai.request.model",)),
            "status": _p("response_code"),
            "prompt_tokens": _p("genai_tokens_input", ("gen_ai.usage.input_tokens",)),
            "completion_tokens": _p("genai_tokens_output", ("gen_ai.usage.output_tokens",)),
            "duration_ms": _p("duration"),
            "trace_id": _p("trace_id"),
            "engine_id": (),
        },
        attrs={},
        tenant=("x-tenant-id", ("tenant.id",), "x-user-id"),
        header_prefix="x-",
        header_skip=("x-request-id", "x-forwarded-for", "x-envoy-"),  # "...-": every field it starts
        status_map=(("0", ""),),  # no response was started (the client went away: flag DC)
        empty=("", "-"),  # Envoy Gateway's default format writes "-" for an empty value
    ),
    Mapping(
        # OTLP/JSON traces (opentelemetry.io file exporter; opentelemetry-proto examples/trace.json),
        # flattened by forensics.ingest.otlp into one record per client-request span.
        name="otlp",
        doc="OpenTelemetry OTLP/JSON trace lines (resourceSpans)",
        detect=("resourceSpans",),
        fields={
            "ts": _p("start_ns"),
            "request_id": _p("attributes|http.request.header.x-request-id", "span_id"),
            "client_ip": _p("attributes|client.address"),
            "user_agent": _p("attributes|user_agent.original"),
            "model": _p("attributes|gen_ai.request.model", "attributes|gen_ai.response.model"),
            "status": _p("attributes|http.response.status_code"),
            "prompt_tokens": _p("attributes|gen_ai.usage.input_tokens", "attributes|gen_ai.usage.prompt_tokens"),
            "completion_tokens": _p(
                "attributes|gen_ai.usage.output_tokens", "attributes|gen_ai.usage.completion_tokens"
            ),
            "duration_ms": _p("duration_ns"),
            "trace_id": _p("trace_id"),
            "engine_id": _p("attributes|http.request.header.x-request-id", "attributes|gen_ai.response.id"),
        },
        attrs={
            "user": _p("attributes|user.id", "resource|user.id"),
            "end_user": _p("attributes|enduser.id"),
        },
        tenant=("attributes|tenant.id", "resource|tenant.id", "end_user", "user"),
        time="epoch_ns",
        duration_unit=1e-6,
    ),
)
FORMATS = {m.name: m for m in BUILTIN}
SPEC_FORMAT = "kvf"
SPEC_DETECT = ("ts", "request_id", "account_id", "status")  # the spec's gateway log (its own loader)
FORMAT_NAMES = (SPEC_FORMAT, *FORMATS, "mapping")


def detect(names: set[str], custom: Mapping | None = None) -> str | None:
    """The format whose marking fields a record (or a table's columns) has: the spec's first, then a
    bundle's own mapping, then the built-ins in order. None: no format matches."""
    if all(n in names for n in SPEC_DETECT):
        return SPEC_FORMAT
    candidates = ([custom] if custom is not None and custom.detect else []) + list(BUILTIN)
    for m in candidates:
        if all(n in names for n in m.detect):
            return "mapping" if m is custom else m.name
    return None


@dataclass(frozen=True)
class GatewaySettings:
    """[gateway] of bundle.toml."""

    format: str | None = None  # one of FORMAT_NAMES, else recognised per file
    tenant: tuple[str, ...] = ()  # attributes or field paths the account is taken from, in order
    timezone: str | None = None  # the zone of times written without one
    mapping: Mapping | None = None  # the bundle's own format

    def zone_for(self, m: Mapping) -> str | None:
        return m.zone or self.timezone


GATEWAY_KEYS = {"format", "tenant", "timezone", "mapping"}
MAPPING_SECTIONS = {"detect", "fields", "attrs", "time", "internal", "tenant", "status"}
MAPPABLE = (
    "ts", "request_id", "account_id", "api_token_id", "client_ip", "user_agent", "model", "status",
    "prompt_tokens", "completion_tokens", "duration_ms", "bootstrap_room", "prefill_node", "decode_node",
    "engine_id", "trace_id",
)  # fmt: skip


def gateway_settings(path: Path, data: dict[str, Any]) -> GatewaySettings:
    """[gateway] checked: a known format, a tenant string or list, a real zone, a readable mapping file."""
    where = f"{path}: [gateway]"
    fmt = data.get("format")
    if fmt is not None and fmt not in FORMAT_NAMES:
        raise InputError(f"{where} format {fmt!r} is not one of {', '.join(FORMAT_NAMES)}")
    tenant = data.get("tenant", ())
    if isinstance(tenant, str):
        tenant = (tenant,)
    if not (isinstance(tenant, list | tuple) and all(isinstance(t, str) and t for t in tenant)):
        raise InputError(f'{where} tenant must be a field name or a list of them, e.g. "team" or ["team", "user"]')
    zone = data.get("timezone")
    if zone is not None:
        _check_zone(zone, f"{where} timezone")
    mapping = None
    if "mapping" in data:
        mapping = load_mapping(path.parent / str(data["mapping"]))
    if fmt == "mapping" and mapping is None:
        raise InputError(f'{where} format "mapping" needs mapping = "<file>.toml" (see docs/gateway-formats.md)')
    return GatewaySettings(fmt, tuple(tenant), zone, mapping)


def _check_zone(zone: Any, where: str) -> None:
    try:
        ZoneInfo(str(zone))
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"{where} {zone!r} is not a known time zone (e.g. UTC, Europe/Berlin)") from None


def _paths(value: Any, where: str) -> tuple[Key, ...]:
    """A mapping's path or list of paths: 'a.b', or ['a', 'b.c'] for keys that hold dots."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise InputError(f'{where} must be a path like "usage.input" or a list of paths')
    out = []
    for item in items:
        if isinstance(item, str) and item:
            out.append(tuple(item.split(".")))
        elif isinstance(item, list) and item and all(isinstance(k, str) and k for k in item):
            out.append(tuple(item))
        else:
            raise InputError(f"{where}: {item!r} is not a path")
    return tuple(out)


def load_mapping(path: Path) -> Mapping:
    """A bundle's own format (docs/gateway-formats.md, Mapping files), checked key by key."""
    from forensics.intake import read_toml

    if not path.is_file():
        raise InputError(f"{path}: the gateway mapping file named in bundle.toml does not exist")
    data = read_toml(path)
    for section in data:
        if section not in MAPPING_SECTIONS:
            raise InputError(f"{path}: unknown section [{section}] (known: {', '.join(sorted(MAPPING_SECTIONS))})")
    fields_in = data.get("fields", {})
    for need in ("ts", "request_id"):
        if need not in fields_in:
            raise InputError(f"{path}: [fields] needs {need} (the path of the record's {need})")
    fields: dict[str, tuple[Key, ...]] = {}
    for k, v in fields_in.items():
        if k not in MAPPABLE:
            raise InputError(f"{path}: [fields] {k!r} is not a field (known: {', '.join(MAPPABLE)})")
        fields[k] = _paths(v, f"{path}: [fields] {k}")
    attrs = {}
    for k, v in data.get("attrs", {}).items():
        if k not in ATTRS:
            raise InputError(f"{path}: [attrs] {k!r} is not an attribute (known: {', '.join(ATTRS)})")
        attrs[k] = _paths(v, f"{path}: [attrs] {k}")
    time = data.get("time", {})
    kind = time.get("format", "rfc3339")
    if kind not in TIME_KINDS and "%" not in str(kind):
        raise InputError(f"{path}: [time] format {kind!r} is not one of {', '.join(TIME_KINDS)} or a strptime format")
    if "timezone" in time:
        _check_zone(time["timezone"], f"{path}: [time] timezone")
    detect_fields = data.get("detect", {}).get("fields", [])
    headers = data.get("internal", {}).get("headers", [])
    status = data.get("status", {})
    return Mapping(
        name="mapping",
        doc=f"the bundle's mapping {path.name}",
        detect=tuple(detect_fields),
        fields=fields,
        attrs=attrs,
        tenant=("account_id",) if "account_id" in fields else tuple(a for a in attrs if a != "tags"),
        time=str(kind),
        zone=time.get("timezone"),
        status_map=tuple((str(k), str(v)) for k, v in status.get("map", {}).items()),
        headers_at=tuple((h,) for h in headers),
        header_prefix=None,
    )


# ---- the SQL of one record ------------------------------------------------------------------------


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


def _ts(m: Mapping, zone: str | None) -> str:
    """The record's time as RFC 3339 text in UTC when it parses; else its text as logged (the validation
    then rejects the row and shows it)."""
    v = _first(m.fields.get("ts", ()))
    if m.time == "rfc3339":
        has_zone = f"regexp_matches({v}, '(Z|z|[+-][0-9]{{2}}(:?[0-9]{{2}})?)$')"
        zoned = f"CASE WHEN {has_zone} THEN TRY_CAST({v} AS TIMESTAMPTZ) END"
        parsed = (
            zoned if zone is None else f"coalesce({zoned}, timezone({sql_literal(zone)}, TRY_CAST({v} AS TIMESTAMP)))"
        )
    elif m.time.startswith("epoch_"):
        per_us = {"epoch_s": "* 1000000", "epoch_ms": "* 1000", "epoch_us": "", "epoch_ns": "/ 1000"}[m.time]
        num = f"TRY_CAST({v} AS HUGEINT)" if m.time == "epoch_ns" else f"TRY_CAST({v} AS DOUBLE)"
        parsed = f"make_timestamptz(TRY_CAST(round({num} {per_us}) AS BIGINT))"
    else:
        naive = f"TRY_STRPTIME({v}, {sql_literal(m.time)})"
        parsed = (
            naive if "%z" in m.time or "%Z" in m.time else f"timezone({sql_literal(zone or 'UTC')}, {naive}::TIMESTAMP)"
        )
    return f"coalesce(strftime(({parsed}) AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%fZ'), {v})"


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
    start, end = (_ts(Mapping("x", "", (), {"ts": (k,)}, time=m.time, zone="UTC"), "UTC") for k in m.duration_from)
    ms = "epoch_us(TRY_CAST({} AS TIMESTAMPTZ)) / 1000.0"
    diff = f"CAST(round({ms.format(end)} - {ms.format(start)}, 3) AS VARCHAR)"
    return f"coalesce({direct}, {diff})"


def _attrs(m: Mapping) -> dict[str, str]:
    out = {a: _first(paths) for a, paths in m.attrs.items() if a != "tags"}
    return out


def _tenant(m: Mapping, settings: GatewaySettings) -> str:
    """account_id: the configured tenant (an attribute, else a field path), else the format's default order."""
    order = settings.tenant or m.tenant
    attrs = _attrs(m)
    parts = [attrs[t] if t in attrs else _first(_p(t)) for t in order]
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
        pairs = (
            f"list_transform(list_filter(json_keys(rec), lambda k: starts_with(lower(k), {sql_literal(m.header_prefix)}) "
            f"AND lower(k) NOT IN ({exact}){prefixes}), "
            "lambda k: {'k': lower(k), 'v': json_extract_string(rec, '$.\"' || k || '\"')})"
        )
        parts.append(f"CASE WHEN len({pairs}) > 0 THEN to_json(map_from_entries({pairs})) END")
    for key in m.headers_at:
        if len(key) == 1 and m.name == "mapping":  # [internal] headers: single fields copied by name
            parts.append(
                f"CASE WHEN {_text(key)} IS NOT NULL THEN json_object({sql_literal(key[0].lower())}, {_text(key)}) END"
            )
        else:
            parts.append(f"CASE WHEN json_type({_json_value(key)}) = 'OBJECT' THEN {_json_value(key)} END")
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
    cols = {
        "ts": _ts(m, zone),
        "request_id": _first(f.get("request_id", ())),
        "account_id": _tenant(m, settings),
        "api_token_id": _first(f.get("api_token_id", ())),
        "client_ip": _first(f.get("client_ip", ())),
        "user_agent": _first(f.get("user_agent", ())),
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
    import re

    return sample_ts is not None and not re.search(r"(Z|z|[+-]\d{2}(:?\d{2})?)$", sample_ts.strip())
