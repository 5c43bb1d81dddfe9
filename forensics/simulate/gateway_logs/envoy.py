"""Envoy Gateway / Envoy AI Gateway JSON access logs of the simulated requests."""

from __future__ import annotations

import json

from forensics.simulate.config import SimConfig
from forensics.simulate.gateway_logs._common import ROUTE, UPSTREAM_HOST, Rendered, by_end, digest, iso_ms_z, succeeded
from forensics.simulate.request import Request

# --- Envoy Gateway / Envoy AI Gateway -----------------------------------------------------------------
# Envoy Gateway's default JSON access log (gateway.envoyproxy.io "Proxy Access Logs": start_time, method,
# x-envoy-origin-path, protocol, response_code, response_flags, response_code_details, ...); the AI
# Gateway's genai_* from dynamic metadata (envoyproxy/ai-gateway site/docs/capabilities/observability/
# accesslogs.md); x-tenant-id and the internal-test header as the operator adds them (%REQ(X-TENANT-ID)%).
# Envoy prints the JSON object with its keys sorted and unavailable values as null. A client that
# disconnects before the response: response_code 0, flag DC, downstream_remote_disconnect.
ENVOY_FILE = "access.jsonl"


def _envoy_record(cfg: SimConfig, r: Request, header_names: list[str]) -> dict[str, object]:
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


def render_envoy(cfg: SimConfig, reqs: list[Request]) -> Rendered:
    header_names = sorted({h for r in reqs for h in (r.headers or {})} - {"x-request-id", "x-tenant-id"})
    data = "".join(
        json.dumps(_envoy_record(cfg, r, header_names), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        + "\n"
        for r in by_end(reqs)
    )
    return Rendered({ENVOY_FILE: data.encode()})
