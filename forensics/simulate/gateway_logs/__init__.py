"""The simulated gateway log in the formats real tools write (docs/gateway-formats.md), instead of the spec's.

Each writer writes what its tool would have written for the same client requests, and nothing it could
not know: none logs bootstrap_room, prefill_node or decode_node. Field sets, names, order and value shapes
follow the sources cited at each writer (the code index's copies; check them against the version you
target). The join key each format leaves for the analyzer:

- litellm_spendlogs, litellm_payload: the upstream response id (SGLang's decode rid) of a success; a
  failure has no response, so LiteLLM records its own litellm_call_id (a UUID that names no engine record);
- smg, envoy: the spec request_id, which the gateway forwards as x-request-id; the engines' request logs
  then carry it under "headers" (see engine_headers);
- otlp: the trace id, which the SGLang root spans (rid, bootstrap_room as hex) share.

A request whose client went away (spec status 499) is logged as each tool logs it: LiteLLM a failure
with error_code "499"; SMG only its "started" line (the response future is dropped); Envoy response_code
0 with flag DC; the OTLP gateway span no status code. LiteLLM logs no tokens for a failure.

truth/gateway_ids.csv maps each spec request_id to the id the format logs, where the two differ (for
otlp: the gateway span's id, the fallback request id of a span without one, and the trace id).
"""

from __future__ import annotations

from pathlib import Path

from forensics.simulate.cluster import Node
from forensics.simulate.config import SimConfig
from forensics.simulate.gateway_logs._common import (
    FORWARDED,
    IDS_FILE,
    Rendered,
    csv_bytes,
    engine_headers,
    gateway_toml,
    write_bytes,
)
from forensics.simulate.gateway_logs.envoy import render_envoy
from forensics.simulate.gateway_logs.litellm import render_payload, render_spendlogs
from forensics.simulate.gateway_logs.otlp import render_otlp
from forensics.simulate.gateway_logs.smg import render_smg
from forensics.simulate.request import Request

__all__ = ["FORWARDED", "engine_headers", "gateway_toml", "render", "write_gateway_format", "write_ids"]


def render(cfg: SimConfig, reqs: list[Request], nodes: dict[str, Node]) -> Rendered:
    """The gateway files (and id map) of cfg.gateway_format (any but kvf)."""
    fmt = cfg.gateway_format
    if fmt == "litellm_spendlogs":
        return render_spendlogs(cfg, reqs)
    if fmt == "litellm_payload":
        return render_payload(cfg, reqs)
    if fmt == "smg":
        return render_smg(cfg, reqs)
    if fmt == "envoy":
        return render_envoy(cfg, reqs)
    if fmt == "otlp":
        return render_otlp(cfg, reqs, nodes)
    raise ValueError(f"no writer for gateway format {fmt!r}")


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
