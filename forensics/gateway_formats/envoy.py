"""Envoy / Envoy Gateway / Envoy AI Gateway JSON access logs, and the simulator's writer of them.

Tenants exist only where the operator logs one (%REQ(X-TENANT-ID)%, a JWT claim): a simulated bundle
names its field with [gateway] tenant. The join key: the spec request_id, which Envoy forwards as
x-request-id and the engines' request logs record. A client that went away (spec status 499) is logged
with response_code 0 and flag DC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from forensics.gateway_formats._mapping import Format, Mapping, paths_of
from forensics.gateway_formats._writing import (
    ROUTE,
    EngineRecords,
    Rendered,
    SimRequest,
    SimSettings,
    by_end,
    digest,
    iso_ms_z,
    succeeded,
)

ENVOY = Mapping(
    # Envoy Gateway's default JSON access log (gateway.envoyproxy.io, proxy access logs) and the
    # Envoy AI Gateway's additions (envoyproxy/ai-gateway site/docs/capabilities/observability/
    # accesslogs.md: genai_* from dynamic metadata; the semconv-style keys of its newer example).
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
)

# --- the simulator's writer -----------------------------------------------------------------------------
# Envoy Gateway's default JSON access log (gateway.envoyproxy.io "Proxy Access Logs": start_time, method,
# x-envoy-origin-path, protocol, response_code, response_flags, response_code_details, ...); the AI
# Gateway's genai_* from dynamic metadata (envoyproxy/ai-gateway site/docs/capabilities/observability/
# accesslogs.md); x-tenant-id and the internal-test header as the operator adds them (%REQ(X-TENANT-ID)%).
# Envoy prints the JSON object with its keys sorted and unavailable values as null. A client that
# disconnects before the response: response_code 0, flag DC, downstream_remote_disconnect.
ENVOY_FILE = "access.jsonl"
UPSTREAM_HOST = "10.20.0.40:30000"  # Envoy's upstream: the SGLang router, in front of the PD pair


def _envoy_record(cfg: SimSettings, r: SimRequest, header_names: list[str]) -> dict[str, object]:
    dc = r.status == 499
    ok = succeeded(r)
    dur = (r.t_end - r.t0) // 1000
    port = 1024 + int.from_bytes(digest(cfg, "port", r.request_id)[:2], "big") % 60000
    rec: dict[str, object] = {
        ":authority": "api.example.com",
        "bytes_received": 4 * r.L + 180,
        "bytes_sent": 0 if dc else (4 * r.completion + 420 if ok else 160),
        "connection_termination_details": None,
        "downstream_local_address": "10.10.0.21:10443",
        "downstream_remote_address": f"10.10.0.5:{port}",  # the load balancer in front
        "duration": dur,
        "genai_backend_name": "inference/sglang-pd/route/glm/rule/0/ref/0",
        "genai_model_name": cfg.model,
        "genai_model_name_override": None,
        "genai_tokens_input": r.L if ok else None,
        "genai_tokens_output": r.completion if ok else None,
        "genai_tokens_total": r.L + r.completion if ok else None,
        "method": "POST",
        "protocol": "HTTP/1.1",
        "requested_server_name": "api.example.com",
        "response_code": 0 if dc else r.status,
        "response_code_details": "downstream_remote_disconnect" if dc else "via_upstream",
        "response_flags": "DC" if dc else "-",
        "route_name": "httproute/inference/glm/rule/0/match/0/api_example_com",
        "start_time": iso_ms_z(r.t0),
        "upstream_cluster": "httproute/inference/glm/rule/0",
        "upstream_host": UPSTREAM_HOST,
        "upstream_local_address": f"10.10.0.21:{(port * 7) % 60000 + 1024}",
        "upstream_transport_failure_reason": None,
        "user-agent": r.ua,
        "x-envoy-origin-path": ROUTE,
        "x-envoy-upstream-service-time": None if dc else str(max(0, dur - 1)),
        "x-forwarded-for": r.ip,
        "x-request-id": r.request_id,
        "x-tenant-id": r.account,
    }
    for h in header_names:
        rec[h] = (r.headers or {}).get(h)
    return rec


def render_envoy(cfg: SimSettings, reqs: Sequence[SimRequest], engine: EngineRecords) -> Rendered:
    header_names = sorted({h for r in reqs for h in (r.headers or {})} - {"x-request-id", "x-tenant-id"})
    data = "".join(
        json.dumps(_envoy_record(cfg, r, header_names), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        + "\n"
        for r in by_end(reqs)
    )
    return Rendered({ENVOY_FILE: data.encode()})


FORMAT = Format(ENVOY, render_envoy, forwards_request_id=True, bundle_tenant="x-tenant-id")
