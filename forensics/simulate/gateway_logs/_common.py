"""What the simulator's gateway writers share: id digests, log-file order, byte writers, the
formats' constants (the writers are the modules beside this one; the package's docstring says what each
leaves to join on)."""

from __future__ import annotations

import csv
import hashlib
import io
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from forensics.simulate.cluster import Node
from forensics.simulate.config import SimConfig
from forensics.simulate.request import Request
from forensics.simulate.texts import Text

FORWARDED = ("smg", "envoy", "kvf_noroom")  # formats whose join is the x-request-id the gateway forwards
ROUTE = "/v1/chat/completions"
API_BASE = "http://smg-router.inference.svc.cluster.local:30000/v1"  # LiteLLM's upstream: the SGLang router
UPSTREAM_HOST = "10.20.0.40:30000"  # Envoy's upstream: the same router, in front of the PD pair
IDS_FILE = "gateway_ids.csv"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def log_ts(us: int, ms: bool) -> str:
    """UTC 'YYYY-MM-DD HH:MM:SS[.mmm]' (ms truncated), as forensics.simulate.writer.log_ts (which imports
    this module, so it cannot be imported here)."""
    sec, frac = divmod(us, 1_000_000)
    text = (_EPOCH + timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{frac // 1000:03d}" if ms else text


def iso_ms_z(us: int) -> str:
    """RFC 3339 UTC with ms, as the spec's gateway ts (forensics.simulate.writer.iso_ms_z)."""
    return log_ts(us, True).replace(" ", "T") + "Z"


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@dataclass
class Rendered:
    files: dict[str, bytes] = field(default_factory=dict)  # name under gateway/ -> bytes
    ids: list[tuple[str, ...]] | None = None  # truth/gateway_ids.csv rows, header first (None: not written)


def digest(cfg: SimConfig, *parts: str) -> bytes:
    return hashlib.sha256("\x1f".join((str(cfg.seed), *parts)).encode()).digest()


def uuid4_of(cfg: SimConfig, *parts: str) -> str:
    return str(uuid.UUID(bytes=digest(cfg, *parts)[:16], version=4))


def hex_of(cfg: SimConfig, n: int, *parts: str) -> str:
    return digest(cfg, *parts).hex()[:n]


def succeeded(r: Request) -> bool:
    return 200 <= r.status < 300


def by_end(reqs: Iterable[Request]) -> list[Request]:
    """Loggers write when a request completes: the order of a log file."""
    return sorted(reqs, key=lambda r: (r.t_end, r.request_id))


def csv_bytes(rows: list[tuple[str, ...]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def engine_records(nodes: dict[str, Node]) -> dict[int, list[tuple[str, str, int, dict[str, Any]]]]:
    """room -> the engines' request-log records of it: (node, role, node-clock µs, record)."""
    out: dict[int, list[tuple[str, str, int, dict[str, Any]]]] = {}
    for name in sorted(nodes):
        node = nodes[name]
        for ts, j in node.jsonl:
            out.setdefault(int(j["room"]), []).append((name, node.spec.role, ts, j))  # type: ignore[call-overload]
    return out


def engine_headers(cfg: SimConfig, reqs: list[Request]) -> dict[int, dict[str, str]] | None:
    """room -> the headers the engines' --log-requests JSON records hold, for formats joined by a
    forwarded id. SGLang logs the whitelisted request headers (x-smg-routing-key, plus those named by
    SGLANG_LOG_REQUEST_HEADERS, here x-request-id) as `"headers": {name: value}` between "obj" and "out"
    (python/sglang/srt/utils/request_logger.py, _extract_whitelisted_headers and log_finished_request);
    SMG forwards a client's x-request-id (sgl-model-gateway/src/routers/header_utils.rs), Envoy its own."""
    if cfg.gateway_format not in FORWARDED:
        return None
    return {r.room: {"x-request-id": r.request_id} for r in reqs}


def gateway_toml(cfg: SimConfig) -> str:
    """bundle.toml's [gateway] for a format whose tenant only the operator's own field names."""
    if cfg.gateway_format == "envoy":
        return '\n[gateway]\ntenant = "x-tenant-id"\n'
    return ""


def text_of(r: Request) -> Text | None:
    t = r.extra.get("text")
    return t if isinstance(t, Text) else None
