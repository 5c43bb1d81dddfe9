"""A gateway format's facts as one value, the Mapping: the fields that mark it, then for each of our
fields the paths it may sit at (the first that is set wins), and how its times, statuses, durations and
headers are written. The built-in formats (the modules beside this one) are Mappings written from their
writers' schemas; a bundle's own mapping file (`[gateway] mapping`, docs/gateway-formats.md) is read into
the same shape (load_mapping), so one compiler (forensics.ingest.formats) serves both.

Records reach the compiler as JSON text (`rec`): a JSON line as read, a Parquet row as DuckDB's
to_json makes it, an element of a JSON array file, or what a format's own reader makes of its file
(Mapping.reader: OTLP's spans, flattened); a CSV row as its columns, each a field of text.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from forensics.errors import InputError
from forensics.gateway_formats._writing import Writer

Key = tuple[str, ...]  # a path into a record: keys of nested objects

# the tenant-layer attributes a format may carry (gateway.attrs), with the cohort-rule key of each
ATTRS = ("team", "team_alias", "organization", "key_alias", "user", "end_user", "tags")
TIME_KINDS = ("rfc3339", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns")
TEXT_FIELDS = {"prompt": "prompt_text", "response": "response_text"}  # side -> the field its text sits at
CUSTOM = "mapping"  # the format name of a bundle's own mapping file


@dataclass
class FileRecords:
    """What a format's own reader makes of one file. rows, errors, recs: one per record, its number (its
    place in the file), its parse error or None, its JSON text or None; engine_spans: the rows of
    engine_spans the file names (trace_id, rid, room, role, service, file_id, line); kept_out: the items
    read that are no gateway record (counted as read and loaded); note: what the manifest says of it."""

    rows: list[int]
    errors: list[str | None]
    recs: list[str | None]
    engine_spans: list[tuple[Any, ...]]
    kept_out: int
    note: str


# a format's own reader: the file's lines (bytes, as read) and its file id -> its records
Reader = Callable[[Iterable[bytes], int], FileRecords]


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
    header_fields: tuple[str, ...] = ()  # single fields copied into the headers under their own name
    grouped: bool = False  # several lines per request: ingest groups them first (ingest/queries/gateway_smg_group/)
    reader: Reader | None = None  # its own reader of a file; None: JSON lines, a JSON array, CSV or Parquet rows
    strict: bool = False  # the spec's contract: account_id and status required
    empty: tuple[str, ...] = ("",)  # logged values that mean "not logged"
    ua_from_tags: bool = False  # the user agent is in the tags ("User-Agent: <full UA>": LiteLLM)
    # paths the writer puts in every record, null when unset: one in no record of a file was dropped or
    # renamed on the way (a tenant attribute read from it is then lost, not empty)
    always: tuple[Key, ...] = ()

    @property
    def carries_text(self) -> bool:
        """Its records hold prompt or response text (fingerprinted by forensics.ingest.content)."""
        return any(self.fields.get(f) for f in TEXT_FIELDS.values())


@dataclass(frozen=True)
class Format:
    """A built-in format of the registry: how a file of it is read (its Mapping, with the reader hooks
    it needs) and how the simulator writes one."""

    mapping: Mapping
    write: Writer  # the simulator's writer: the files under gateway/ and the truth's id map
    forwards_request_id: bool = False  # the gateway forwards x-request-id, which the engines' request logs record
    bundle_tenant: str | None = None  # [gateway] tenant of a simulated bundle: where only the operator's field has it

    @property
    def name(self) -> str:
        return self.mapping.name


def paths_of(*paths: str | Key) -> tuple[Key, ...]:
    """Paths written as 'a.b' (keys without dots), 'a|b.c' ('|' between keys that hold dots) or as a
    tuple of keys (a single key that holds dots: ("gen_ai.request.model",))."""
    return tuple(p if isinstance(p, tuple) else tuple(p.split("|")) if "|" in p else tuple(p.split(".")) for p in paths)


MAPPING_SECTIONS = {"detect", "fields", "attrs", "time", "internal", "tenant", "status"}
MAPPABLE = (
    "ts", "request_id", "account_id", "api_token_id", "client_ip", "user_agent", "model", "status",
    "prompt_tokens", "completion_tokens", "duration_ms", "bootstrap_room", "prefill_node", "decode_node",
    "engine_id", "trace_id", "prompt_text", "response_text",
)  # fmt: skip


def check_zone(zone: Any, where: str) -> None:
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
        check_zone(time["timezone"], f"{path}: [time] timezone")
    detect_fields = data.get("detect", {}).get("fields", [])
    headers = data.get("internal", {}).get("headers", [])
    status = data.get("status", {})
    return Mapping(
        name=CUSTOM,
        doc=f"the bundle's mapping {path.name}",
        detect=tuple(detect_fields),
        fields=fields,
        attrs=attrs,
        tenant=("account_id",) if "account_id" in fields else tuple(a for a in attrs if a != "tags"),
        time=str(kind),
        zone=time.get("timezone"),
        status_map=tuple((str(k), str(v)) for k, v in status.get("map", {}).items()),
        header_fields=tuple(headers),
        header_prefix=None,
    )
