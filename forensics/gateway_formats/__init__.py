"""Gateway and proxy log formats (docs/gateway-formats.md), one module per format: its facts (a Mapping:
how a file of it is recognised and where each of our fields sits, with the reader hooks it needs), and
the simulator's writer of it, from the tool's own source, beside them. Here: the registry of the built-in
formats, the recognition of a file's format and the [gateway] settings of bundle.toml.

forensics.ingest.formats compiles a Mapping into the SQL that turns one of its records into the spec's
gateway fields plus the tenant-layer ones; forensics.ingest.other_formats reads the files
(Mapping.reader, Mapping.grouped); forensics.simulate.gateway_logs writes them (Format.write). The
package imports nothing of the analysis or of the simulator: both import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.errors import InputError
from forensics.gateway_formats import envoy, litellm, litellm_spendlogs, otlp, smg
from forensics.gateway_formats._mapping import (
    ATTRS,
    CUSTOM,
    TEXT_FIELDS,
    TIME_KINDS,
    FileRecords,
    Format,
    Key,
    Mapping,
    check_zone,
    load_mapping,
    paths_of,
)
from forensics.gateway_formats._writing import EngineRecords, Rendered

__all__ = [
    "ATTRS", "BUILTIN", "CUSTOM", "FORMATS", "FORMAT_NAMES", "REGISTRY", "SPEC_FORMAT", "TEXT_FIELDS", "TEXT_FORMATS",
    "TIME_KINDS", "EngineRecords", "FileRecords", "Format", "GatewaySettings", "Key", "Mapping", "Rendered",
    "detect", "gateway_settings", "load_mapping", "paths_of",
]  # fmt: skip

# the built-in formats in the order a record is tried against them (detect)
REGISTRY: dict[str, Format] = {
    f.name: f for f in (litellm_spendlogs.FORMAT, litellm.FORMAT, smg.FORMAT, envoy.FORMAT, otlp.FORMAT)
}
BUILTIN: tuple[Mapping, ...] = tuple(f.mapping for f in REGISTRY.values())
FORMATS = {m.name: m for m in BUILTIN}
SPEC_FORMAT = "kvf"
SPEC_DETECT = ("ts", "request_id", "account_id", "status")  # the spec's gateway log (its own loader)
FORMAT_NAMES = (SPEC_FORMAT, *FORMATS, CUSTOM)
TEXT_FORMATS = tuple(sorted(m.name for m in BUILTIN if m.carries_text))  # the built-ins that log prompt text


def detect(names: set[str], custom: Mapping | None = None) -> str | None:
    """The format whose marking fields a record (or a table's columns) has: the spec's first, then a
    bundle's own mapping, then the built-ins in order. None: no format matches."""
    if all(n in names for n in SPEC_DETECT):
        return SPEC_FORMAT
    candidates = ([custom] if custom is not None and custom.detect else []) + list(BUILTIN)
    for m in candidates:
        if all(n in names for n in m.detect):
            return CUSTOM if m is custom else m.name
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

    def mapping_of(self, fmt: str) -> Mapping:
        """The Mapping of a format name other than the spec's: a built-in's, or the bundle's own."""
        if fmt == CUSTOM:
            assert self.mapping is not None, "detect names the bundle's mapping only when there is one"
            return self.mapping
        return FORMATS[fmt]


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
        check_zone(zone, f"{where} timezone")
    mapping = None
    if "mapping" in data:
        mapping = load_mapping(path.parent / str(data["mapping"]))
    if fmt == CUSTOM and mapping is None:
        raise InputError(f'{where} format "mapping" needs mapping = "<file>.toml" (see docs/gateway-formats.md)')
    return GatewaySettings(fmt, tuple(tenant), zone, mapping)
