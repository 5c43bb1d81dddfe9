"""The simulated gateway log in the formats real tools write (docs/gateway-formats.md), instead of the
spec's: each format's writer is in its module of forensics.gateway_formats, beside its reader; here the
simulator hands it the run (the engines' request-log records by room) and writes what it gives back.

truth/gateway_ids.csv maps each spec request_id to the id the format logs, where the two differ (each
format's module says which key it leaves the analyzer to join on).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from forensics.gateway_formats import REGISTRY, EngineRecords, Rendered
from forensics.simulate.cluster import Node
from forensics.simulate.config import SimConfig
from forensics.simulate.request import Request

IDS_FILE = "gateway_ids.csv"
# the formats whose join is the x-request-id the gateway forwards (kvf_noroom: the spec's log without rooms)
FORWARDED = (*(name for name, f in REGISTRY.items() if f.forwards_request_id), "kvf_noroom")


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def csv_bytes(rows: list[tuple[str, ...]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def engine_records(nodes: dict[str, Node]) -> EngineRecords:
    """room -> the engines' request-log records of it: (node, role, node-clock µs, record)."""
    out: EngineRecords = {}
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
    f = REGISTRY.get(cfg.gateway_format)
    if f is not None and f.bundle_tenant:
        return f'\n[gateway]\ntenant = "{f.bundle_tenant}"\n'
    return ""


def render(cfg: SimConfig, reqs: list[Request], nodes: dict[str, Node]) -> Rendered:
    """The gateway files (and id map) of cfg.gateway_format (any but kvf)."""
    f = REGISTRY.get(cfg.gateway_format)
    if f is None:
        raise ValueError(f"no writer for gateway format {cfg.gateway_format!r}")
    return f.write(cfg, reqs, engine_records(nodes))


def write_ids(root: Path, ids: list[tuple[str, ...]] | None) -> None:
    """truth/gateway_ids.csv beside the bundle (root is OUT/bundle); removed when the ids are the spec's."""
    path = root.parent / "truth" / IDS_FILE
    if ids is None:
        path.unlink(missing_ok=True)
    else:
        write_bytes(path, csv_bytes(ids))


def write_gateway_format(root: Path, cfg: SimConfig, reqs: list[Request], nodes: dict[str, Node]) -> None:
    out = render(cfg, reqs, nodes)
    for name, data in out.files.items():
        write_bytes(root / "gateway" / name, data)
    write_ids(root, out.ids)
