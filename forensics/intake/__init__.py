"""Evidence intake: find the bundle's files, hash them, read bundle.toml.

Reads: the bundle folder. Writes: nothing (returns plain records the ingest stage loads).
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from forensics.errors import InputError
from forensics.gateway_formats import GatewaySettings, gateway_settings
from forensics.intake.damage import Damage
from forensics.intake.disclosure import DISCLOSURE_KEYS, check_disclosure
from forensics.intake.shippers import recognise as recognise_shipper
from forensics.intake.times import parse_utc

ENGINE_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?(?:\.?(?:post|rc|dev)\d+)?")
GATEWAY_SUFFIXES = (".jsonl", ".jsonl.gz", ".csv", ".csv.gz", ".parquet")
# what other gateway formats are written as (docs/gateway-formats.md): JSON arrays (LiteLLM /spend/logs),
# JSON-lines .log files (Envoy access logs), and SMG's daily files smg.YYYY-MM-DD (sgl-router.YYYY-MM-DD)
GATEWAY_OTHER_SUFFIXES = (".json", ".json.gz", ".log", ".log.gz")
GATEWAY_ROTATED = re.compile(r"(smg|sgl-router)\.\d{4}-\d{2}-\d{2}(\.gz)?")
# engine logs, rotated ones too (server.log.1, server.log.1.gz, server.log.2.zst): read in place
ENGINE_LOG = re.compile(r".*\.log(?:\.\d+)?(?:\.gz|\.zst)?", re.I)
ENGINE_REQUESTS = re.compile(r".*\.jsonl(?:\.\d+)?(?:\.gz|\.zst)?", re.I)
PAGE_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz")
# what a log shipper's export of an engine log may be named (forensics.intake.shippers recognises it by content)
SHIPPED_SUFFIXES = (".log", ".jsonl", ".json", ".ndjson", ".csv", ".txt", ".log.gz", ".json.gz", ".jsonl.gz",
                    ".ndjson.gz", ".csv.gz", ".txt.gz")  # fmt: skip
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


@dataclass
class InputFile:
    """One evidence file and its row accounting (filled in by the loader that reads it)."""

    file_id: int
    source: str  # gateway | engine_log | engine_requests | pages | config
    path: Path
    rel: str
    node: str | None = None
    sha256: str = ""
    bytes: int = 0
    rows_read: int = 0
    rows_loaded: int = 0
    rows_rejected: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None  # not read at all: a partition outside --since/--until
    rows_outside_window: int = 0  # read, valid, but stamped outside --since/--until
    format: str | None = None  # a gateway file's format (forensics.gateway_formats), an engine log's shipper (shippers)
    damage: list[Damage] = field(default_factory=list)  # what its loader found lost (ingest stores input_damage)

    def manifest_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "path": self.rel,
            "source": self.source,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "rows_read": self.rows_read,
            "rows_loaded": self.rows_loaded,
            "rows_rejected": self.rows_rejected,
        }
        if self.node is not None:
            entry["node"] = self.node
        if self.format is not None:
            entry["format"] = self.format
        if self.skipped:
            entry["skipped"] = self.skipped
        if self.rows_outside_window:
            entry["rows_outside_window"] = self.rows_outside_window
        if self.error:
            entry["error"] = self.error
        if self.notes:
            entry["notes"] = list(self.notes)
        return entry


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


@dataclass(frozen=True)
class Window:
    """A historical replay window [since, until) over page events: partitions outside it are not read,
    rows stamped outside it are counted and set aside. Either end may be open."""

    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def parse(cls, since: str | None, until: str | None) -> Window:
        w = cls(_window_end(since, "--since"), _window_end(until, "--until"))
        if w.since and w.until and w.since >= w.until:
            raise InputError(f"--since {since} is not before --until {until}")
        return w

    @property
    def active(self) -> bool:
        return self.since is not None or self.until is not None

    def excludes_day(self, day: date) -> bool:
        """A partition date=DAY holds [DAY 00:00, DAY+1 00:00) UTC."""
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        return bool((self.until and start >= self.until) or (self.since and start + timedelta(days=1) <= self.since))

    def describe(self) -> dict[str, str | None]:
        return {
            "since": self.since.isoformat().replace("+00:00", "Z") if self.since else None,
            "until": self.until.isoformat().replace("+00:00", "Z") if self.until else None,
        }


def _window_end(value: str | None, where: str) -> datetime | None:
    if value is None:
        return None
    text = value.strip()
    if len(text) == 10:  # a plain date: midnight UTC
        text += "T00:00:00Z"
    return parse_utc(text, where)


def partition_date(rel: Path) -> date | None:
    """The day of a hive partition folder date=YYYY-MM-DD on the file's path, if any."""
    for part in rel.parts[:-1]:
        if part.startswith("date="):
            try:
                return date.fromisoformat(part[5:])
            except ValueError:
                return None
    return None


def sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _has_suffix(path: Path, suffixes: tuple[str, ...]) -> bool:
    name = path.name.lower()
    return any(name.endswith(s) for s in suffixes)


def discover(bundle: Path, window: Window | None = None, threads: int | None = None) -> list[InputFile]:
    """Every evidence file of the bundle, in a stable order, with its hash (in up to 4 of `threads`,
    default all cores). Page files in a hive partition date=YYYY-MM-DD outside the replay window are
    listed as skipped, not read. (Gateway logs are always read whole: they map rooms to requests and
    accounts on both sides of the window.)"""
    if not bundle.exists():
        raise InputError(f"{bundle}: no such bundle folder")
    if not bundle.is_dir():
        raise InputError(f"{bundle}: not a folder (expected an evidence bundle folder, see the spec)")
    found: list[tuple[str, Path, str | None]] = []
    for p in sorted((bundle / "gateway").rglob("*")) if (bundle / "gateway").is_dir() else []:
        if p.is_file() and (
            _has_suffix(p, GATEWAY_SUFFIXES + GATEWAY_OTHER_SUFFIXES) or GATEWAY_ROTATED.fullmatch(p.name)
        ):
            found.append(("gateway", p, None))
    engine = bundle / "engine"
    shipped: dict[Path, str] = {}
    if engine.is_dir():
        # a log shipper's export directly under engine/: its lines name their nodes by the shipper's labels
        for p in sorted(e for e in engine.iterdir() if e.is_file() and _has_suffix(e, SHIPPED_SUFFIXES)):
            if fmt := recognise_shipper(p):
                shipped[p] = fmt
                found.append(("engine_log", p, None))
        for node_dir in sorted(d for d in engine.iterdir() if d.is_dir()):
            for p in sorted(node_dir.rglob("*")):
                if not p.is_file():
                    continue
                if _has_suffix(p, SHIPPED_SUFFIXES) and (fmt := recognise_shipper(p)):  # by its fields or shape
                    shipped[p] = fmt
                    found.append(("engine_log", p, node_dir.name))
                elif ENGINE_LOG.fullmatch(p.name):
                    found.append(("engine_log", p, node_dir.name))
                elif ENGINE_REQUESTS.fullmatch(p.name):
                    found.append(("engine_requests", p, node_dir.name))
    pages = bundle / "pages"
    if pages.is_dir():
        for p in sorted(pages.rglob("*")):
            if p.is_file() and _has_suffix(p, PAGE_SUFFIXES):
                found.append(("pages", p, None))
    files = []
    for i, (source, path, node) in enumerate(found, start=1):
        # The database's views read the files in place: an absolute path keeps incident.duckdb
        # readable from any working directory (absolute(), not resolve(): a symlinked bundle stays as named).
        f = InputFile(i, source, path.absolute(), path.relative_to(bundle).as_posix(), node, format=shipped.get(path))
        day = partition_date(path.relative_to(bundle)) if source == "pages" else None
        if window is not None and day is not None and window.excludes_day(day):
            f.skipped = f"partition date={day.isoformat()} lies outside --since/--until"
        files.append(f)
    # hashed side by side (hashlib releases the GIL): 1.5 s -> 0.85 s for the 2 GB of the 100M bundle
    hashing = [f for f in files if not f.skipped]
    with ThreadPoolExecutor(max_workers=max(1, min(4, threads or os.cpu_count() or 1))) as pool:
        for f, (digest, size, error) in zip(hashing, pool.map(_hash, [f.path for f in hashing]), strict=True):
            f.sha256, f.bytes, f.error = digest, size, error
    return files


def _hash(path: Path) -> tuple[str, int, str | None]:
    try:
        return (*sha256_file(path), None)
    except OSError as err:
        return "", 0, f"cannot read file: {err.strerror or err}"


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
