"""bundle.toml, read and checked once per run: its sections and keys, the engine's time zone, release and
log year, the report's filing, the disclosure and gateway settings, the shipper's node labels.

Reads: bundle.toml. Writes: nothing (returns the frozen BundleConfig the run hands down).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from forensics.errors import InputError
from forensics.gateway_formats import GatewaySettings, gateway_settings
from forensics.intake.disclosure import DISCLOSURE_KEYS, check_disclosure
from forensics.intake.times import parse_utc

ENGINE_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:\.?(?:post|rc|dev)\d+)?")
SHIPPER_NODE_LABELS = ("pod", "host", "container")  # the labels that name a node, in order, unless [shipper] says

BUNDLE_KEYS: dict[str, set[str]] = {
    "incident": {"id", "title", "discovered_at", "contact"},
    "engine": {"log_timezone", "version", "log_year"},
    "gateway": {"format", "tenant", "timezone", "mapping"},  # forensics.gateway_formats.gateway_settings
    "report": {"version", "phase", "supersedes"},
    # files of a log shipper's export directly under engine/: which labels name the node, and renames
    "shipper": {"node_labels", "nodes"},
    "disclosure": DISCLOSURE_KEYS,  # forensics.intake.disclosure
    "remediation": None,  # type: ignore[dict-item]  # free-form: measures taken, shown on the report
}


# GDPR Art. 33(4): information may be provided in phases; each filing says which one it is
REPORT_PHASES = ("initial", "supplementary", "final")


@dataclass(frozen=True)
class ReportVersion:
    """[report] of bundle.toml: which filing this run's report is."""

    version: int = 1
    phase: str = "initial"
    supersedes: str | None = None  # the filing it replaces (its report version or reference)

    def describe(self) -> dict[str, object]:
        return {"version": self.version, "phase": self.phase, "supersedes": self.supersedes}


@dataclass(frozen=True)
class BundleConfig:
    """bundle.toml, read and checked once per run (load_bundle_config)."""

    incident: dict[str, Any]
    log_timezone: ZoneInfo
    remediation: dict[str, Any]
    discovered_at: datetime | None
    engine_version: str | None = None  # the SGLang release the nodes ran ([engine] version)
    report: ReportVersion = field(default_factory=ReportVersion)  # [report]: which filing this is
    disclosure: dict[str, Any] = field(default_factory=dict)  # [disclosure], checked by check_disclosure
    gateway: GatewaySettings = field(default_factory=GatewaySettings)  # [gateway] of bundle.toml
    shipper_node_labels: tuple[str, ...] = SHIPPER_NODE_LABELS  # [shipper] node_labels
    shipper_nodes: dict[str, str] = field(default_factory=dict)  # [shipper] nodes: label value -> node
    sha256: str | None = None  # of bundle.toml's bytes as read (None: the bundle has none)
    # [engine] log_year: the year of text logs whose times print none (vLLM's `MM-DD HH:MM:SS`); None:
    # those lines' times are unknown
    log_year: int | None = None


def read_toml(path: Path) -> dict[str, Any]:
    return read_toml_hashed(path)[0]


def read_toml_hashed(path: Path) -> tuple[dict[str, Any], str]:
    """A TOML file and the SHA-256 of the bytes it was parsed from (one read: the manifest's hash is of
    what the run used)."""
    try:
        raw = path.read_bytes()
        return tomllib.loads(raw.decode("utf-8")), hashlib.sha256(raw).hexdigest()
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not valid TOML: {err}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None


def load_bundle_config(bundle: Path) -> BundleConfig:
    path = bundle / "bundle.toml"
    data, digest = read_toml_hashed(path) if path.is_file() else ({}, None)
    for section, value in data.items():
        if section not in BUNDLE_KEYS:
            raise InputError(f"{path}: unknown section [{section}] (known: {', '.join(sorted(BUNDLE_KEYS))})")
        allowed = BUNDLE_KEYS[section]
        if not isinstance(value, dict):
            raise InputError(f"{path}: [{section}] must be a table")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise InputError(
                        f"{path}: unknown key {key!r} in [{section}] (known: {', '.join(sorted(allowed))})"
                    )
    incident = dict(data.get("incident", {}))
    tz_name = data.get("engine", {}).get("log_timezone", "UTC")
    try:
        tz = ZoneInfo(str(tz_name))
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(f"{path}: [engine] log_timezone {tz_name!r} is not a known time zone") from None
    discovered = incident.get("discovered_at")
    discovered_at = parse_utc(discovered, f"{path}: [incident] discovered_at") if discovered else None
    version = data.get("engine", {}).get("version")
    if version is not None and not (isinstance(version, str) and ENGINE_VERSION.fullmatch(version)):
        raise InputError(f'{path}: [engine] version {version!r} is not a release like "0.5.11" or "0.4.9.post2"')
    return BundleConfig(
        incident,
        tz,
        dict(data.get("remediation", {})),
        discovered_at,
        version,
        _report_version(path, data),
        check_disclosure(path, data.get("disclosure", {})),
        gateway_settings(path, data.get("gateway", {})),
        *_shipper(path, data.get("shipper", {})),
        sha256=digest,
        log_year=_log_year(path, data.get("engine", {}).get("log_year")),
    )


def _log_year(path: Path, year: Any) -> int | None:
    if year is None:
        return None
    if isinstance(year, bool) or not isinstance(year, int) or not 1970 <= year <= 9999:
        raise InputError(f"{path}: [engine] log_year {year!r} is not a year like 2026")
    return year


def _shipper(path: Path, d: dict[str, Any]) -> tuple[tuple[str, ...], dict[str, str]]:
    """[shipper]: node_labels (a label or a list, in order: pod, host, container, namespace) and nodes
    (a table: label value -> node name)."""
    labels = d.get("node_labels", list(SHIPPER_NODE_LABELS))
    labels = [labels] if isinstance(labels, str) else labels
    known = ("pod", "container", "host", "namespace")
    if not isinstance(labels, list) or not labels or any(x not in known for x in labels):
        raise InputError(f"{path}: [shipper] node_labels {labels!r} must name labels among {', '.join(known)}")
    nodes = d.get("nodes", {})
    if not isinstance(nodes, dict) or not all(isinstance(v, str) and v for v in nodes.values()):
        raise InputError(f'{path}: [shipper] nodes must be a table of label value = "node name"')
    return tuple(labels), {str(k): v for k, v in nodes.items()}


def _report_version(path: Path, data: dict[str, Any]) -> ReportVersion:
    rep = data.get("report", {})
    version, phase, supersedes = rep.get("version", 1), rep.get("phase", "initial"), rep.get("supersedes")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InputError(f"{path}: [report] version {version!r} must be a whole number from 1")
    if phase not in REPORT_PHASES:
        raise InputError(f"{path}: [report] phase {phase!r} must be one of {', '.join(REPORT_PHASES)}")
    if supersedes is not None and not isinstance(supersedes, str | int):
        raise InputError(f"{path}: [report] supersedes {supersedes!r} must name the filing it replaces")
    if version > 1 and supersedes is None:
        supersedes = str(version - 1)  # a later version replaces the one before unless it says otherwise
    return ReportVersion(version, phase, None if supersedes is None else str(supersedes))
