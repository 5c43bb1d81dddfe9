"""Gateway and proxy log formats (docs/gateway-formats.md): each format as its writer writes it, and the
[gateway] settings of bundle.toml. forensics.ingest.formats compiles a format into the SQL that turns
one of its records into the spec's gateway fields plus the tenant-layer ones.

A format is a Mapping: the fields that mark it, then for each of our fields the paths it may sit at
(the first that is set wins). The built-in formats below are Mappings written from their writers'
schemas (each cites its source); a bundle's own mapping file (`[gateway] mapping`) is read into the
same shape, so one compiler serves both. Records reach the compiler as JSON text (`rec`): a JSON line as
read, a CSV or Parquet row as DuckDB's to_json makes it, a span or a request as flattened by its reader.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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
    ua_from_tags: bool = False  # the user agent is in the tags ("User-Agent: <full UA>": LiteLLM)


def paths_of(*paths: str | Key) -> tuple[Key, ...]:
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
            "ts": paths_of("startTime"),
            "request_id": paths_of("request_id"),
            "api_token_id": paths_of("api_key", "metadata.user_api_key"),
            "client_ip": paths_of("requester_ip_address", "metadata.requester_ip_address"),
            "user_agent": paths_of("proxy_server_request.headers.user-agent"),  # stored prompts only; else tags
            "model": paths_of("model_group", "model"),
            "status": paths_of("status", "metadata.status"),
            "prompt_tokens": paths_of("prompt_tokens"),
            "completion_tokens": paths_of("completion_tokens"),
            "duration_ms": paths_of("request_duration_ms"),
            "trace_id": (),
            "engine_id": (),
            # with store_prompts_in_spend_logs only (else "{}"): get_logging_payload writes messages and
            # response as json.dumps of the payload's; newer proxies leave messages "{}" and keep the
            # request body (its messages) in proxy_server_request, a column and a metadata key
            "prompt_text": paths_of(
                "messages", "proxy_server_request.messages", "metadata.proxy_server_request.messages"
            ),
            "response_text": paths_of("response"),
        },
        attrs={
            "team": paths_of("team_id", "metadata.user_api_key_team_id"),
            "team_alias": paths_of("metadata.user_api_key_team_alias"),
            "organization": paths_of("organization_id", "metadata.user_api_key_org_id"),
            "key_alias": paths_of("metadata.user_api_key_alias"),
            "user": paths_of("user", "metadata.user_api_key_user_id"),
            "end_user": paths_of("end_user"),
            "tags": paths_of("request_tags"),
        },
        tenant=LITELLM_TENANT,
        zone="UTC",
        # LiteLLM adds "User-Agent: <product>" and "User-Agent: <full UA>" to request_tags unless
        # litellm.disable_add_user_agent_to_request_tags (SpendLogs has no user agent column)
        ua_from_tags=True,
        status_map=LITELLM_STATUS,
        status_fallback=paths_of("metadata.error_information.error_code", "metadata.status_code"),
        duration_from=(("startTime",), ("endTime",)),
    ),
    Mapping(
        # StandardLoggingPayload (litellm/types/utils.py; built by litellm_logging.py
        # get_standard_logging_object_payload): id is the response id, times are float epoch seconds.
        name="litellm_payload",
        doc="LiteLLM StandardLoggingPayload JSON lines (s3, gcs_bucket, generic_api callbacks)",
        detect=("id", "call_type", "startTime", "metadata"),
        fields={
            "ts": paths_of("startTime"),
            "request_id": paths_of("id"),
            "api_token_id": paths_of("metadata.user_api_key_hash"),
            "client_ip": paths_of("requester_ip_address", "metadata.requester_ip_address"),
            "user_agent": paths_of("user_agent", "metadata.user_agent"),
            "model": paths_of("model_group", "model"),
            "status": paths_of("status"),
            "prompt_tokens": paths_of("prompt_tokens"),
            "completion_tokens": paths_of("completion_tokens"),
            "trace_id": (),
            "engine_id": (),
            # the request's messages (list of {role, content}, content a string or a list of parts) and
            # the ModelResponse (choices[].message.content); "redacted-by-litellm" with
            # turn_off_message_logging
            "prompt_text": paths_of("messages"),
            "response_text": paths_of("response"),
        },
        attrs={
            "team": paths_of("metadata.user_api_key_team_id"),
            "team_alias": paths_of("metadata.user_api_key_team_alias"),
            "organization": paths_of("metadata.user_api_key_org_id"),
            "key_alias": paths_of("metadata.user_api_key_alias"),
            "user": paths_of("metadata.user_api_key_user_id"),
            "end_user": paths_of("end_user", "metadata.user_api_key_end_user_id"),
            "tags": paths_of("request_tags"),
        },
        tenant=LITELLM_TENANT,
        time="epoch_s",
        status_map=LITELLM_STATUS,
        status_fallback=paths_of("error_information.error_code"),
        duration_from=(("startTime",), ("endTime",)),
        duration_unit=1000.0,
        headers_at=paths_of("metadata.requester_custom_headers"),
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
            "ts": paths_of("timestamp"),
            "request_id": paths_of("request_id"),
            "status": paths_of("status_code"),
            "duration_ms": paths_of("latency"),
            "model": paths_of("model"),
            "prompt_tokens": paths_of("prompt_tokens"),
            "completion_tokens": paths_of("completion_tokens"),
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
            "ts": paths_of("start_time"),
            "request_id": paths_of("x-request-id", "request_id"),
            "client_ip": paths_of("x-forwarded-for", "downstream_remote_address"),
            "user_agent": paths_of("user-agent"),
            "model": paths_of("genai_model_name", ("gen_ai.request.model",)),
            "status": paths_of("response_code"),
            "prompt_tokens": paths_of("genai_tokens_input", ("gen_ai.usage.input_tokens",)),
            "completion_tokens": paths_of("genai_tokens_output", ("gen_ai.usage.output_tokens",)),
            "duration_ms": paths_of("duration"),
            "trace_id": paths_of("trace_id"),
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
            "ts": paths_of("start_ns"),
            "request_id": paths_of("attributes|http.request.header.x-request-id", "span_id"),
            "client_ip": paths_of("attributes|client.address"),
            "user_agent": paths_of("attributes|user_agent.original"),
            "model": paths_of("attributes|gen_ai.request.model", "attributes|gen_ai.response.model"),
            "status": paths_of("attributes|http.response.status_code"),
            "prompt_tokens": paths_of("attributes|gen_ai.usage.input_tokens", "attributes|gen_ai.usage.prompt_tokens"),
            "completion_tokens": paths_of(
                "attributes|gen_ai.usage.output_tokens", "attributes|gen_ai.usage.completion_tokens"
            ),
            "duration_ms": paths_of("duration_ns"),
            "trace_id": paths_of("trace_id"),
            "engine_id": paths_of("attributes|http.request.header.x-request-id", "attributes|gen_ai.response.id"),
            # gathered by the reader from the gen_ai content attributes and events (forensics.ingest.otlp)
            "prompt_text": paths_of("content.prompt"),
            "response_text": paths_of("content.response"),
        },
        attrs={
            "user": paths_of("attributes|user.id", "resource|user.id"),
            "end_user": paths_of("attributes|enduser.id"),
        },
        tenant=("attributes|tenant.id", "resource|tenant.id", "end_user", "user"),
        time="epoch_ns",
        duration_unit=1e-6,
        headers_at=paths_of("headers"),
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


MAPPING_SECTIONS = {"detect", "fields", "attrs", "time", "internal", "tenant", "status"}
MAPPABLE = (
    "ts", "request_id", "account_id", "api_token_id", "client_ip", "user_agent", "model", "status",
    "prompt_tokens", "completion_tokens", "duration_ms", "bootstrap_room", "prefill_node", "decode_node",
    "engine_id", "trace_id", "prompt_text", "response_text",
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
    if not path.is_file():
        raise InputError(f"{path}: the gateway mapping file named in bundle.toml does not exist")
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"{path}: not valid TOML: {err}") from None
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
