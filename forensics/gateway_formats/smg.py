"""SGLang model gateway (sgl-router / smg) --log-json lines, and the simulator's writer of them.

SMG logs a request's lines inside its http_request span; ingest groups them into one record per request
first (Mapping.grouped: ingest/queries/gateway_smg_group/). It logs no tenant and no token counts. The
join key: the spec request_id, which SMG forwards as x-request-id (sgl-model-gateway/src/routers/
header_utils.rs) and the engines' request logs record. A client that went away (spec status 499) leaves
only the "started" line: the response future is dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from forensics.gateway_formats._mapping import Format, Mapping, paths_of
from forensics.gateway_formats._writing import ROUTE, EngineRecords, Rendered, SimRequest, SimSettings, log_ts

SMG = Mapping(
    # SGLang model gateway --log-json (sgl-model-gateway/src/observability/logging.rs: tracing
    # json().flatten_event(true), ChronoUtc "%Y-%m-%d %H:%M:%S[.%3f]"; middleware.rs: span
    # http_request with request_id, status_code, latency in microseconds)
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
)

# --- the simulator's writer -----------------------------------------------------------------------------
# sgl-model-gateway/src/observability/logging.rs: tracing-subscriber fmt().json().flatten_event(true),
# with_file, with_line_number, ChronoUtc "%Y-%m-%d %H:%M:%S%.3f" (SGLANG_LOG_MS=1), a daily file smg.DATE.
# Keys in the order tracing-subscriber's JSON formatter writes them: timestamp, level, the event's fields,
# target, filename, line_number, span, spans; a span's fields sorted (JsonFields keeps a BTreeMap), then
# its name. middleware.rs: span http_request (method, uri, version, request_id, status_code, latency in µs,
# error, module); "started processing request" (smg::request) on the request, and on the response
# "finished processing request" (INFO), "request failed with client error" (WARN, 4xx) or "request failed
# with server error" (ERROR, 5xx). A client that disconnects drops the response future: no second line.
SMG_FILE = "src/middleware.rs"
SMG_LINES = {"smg::request": 270, "ERROR": 305, "WARN": 310, "INFO": 315}  # line_number: illustrative


def _smg_span(r: SimRequest, done: bool) -> dict[str, object]:
    fields: dict[str, object] = {"method": "POST", "module": "smg", "request_id": r.request_id, "uri": ROUTE,
                                 "version": "HTTP/1.1"}  # fmt: skip
    if done:
        fields["latency"] = r.t_end - r.t0
        fields["status_code"] = r.status
    return {**dict(sorted(fields.items())), "name": "http_request"}


def _smg_line(
    ts: int, level: str, message: str, target: str, line: int, span: dict[str, object] | None, file: str = SMG_FILE
) -> str:
    rec: dict[str, object] = {"timestamp": log_ts(ts, True), "level": level, "message": message, "target": target,
                              "filename": file, "line_number": line}  # fmt: skip
    if span is not None:
        rec["span"] = span
        rec["spans"] = [span]
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def render_smg(cfg: SimSettings, reqs: Sequence[SimRequest], engine: EngineRecords) -> Rendered:
    t_boot = cfg.start_us - 600_000_000
    lines: list[tuple[int, int, str]] = [
        (t_boot, 0, _smg_line(t_boot, "INFO", "Starting router on 0.0.0.0:30000 | mode: PD disaggregated",
                              "smg::server", 118, None, "src/server.rs")),
    ]  # fmt: skip
    for r in reqs:
        start = _smg_span(r, False)
        lines.append((r.t0, r.idx * 2, _smg_line(r.t0, "INFO", "started processing request", "smg::request",
                                                 SMG_LINES["smg::request"], start)))  # fmt: skip
        if r.status == 499:  # the client went away: tower-http never sees a response
            continue
        if r.status >= 500:
            level, msg = "ERROR", "request failed with server error"
        elif r.status >= 400:
            level, msg = "WARN", "request failed with client error"
        else:
            level, msg = "INFO", "finished processing request"
        lines.append((r.t_end, r.idx * 2 + 1, _smg_line(r.t_end, level, msg, "smg::response", SMG_LINES[level],
                                                        _smg_span(r, True))))  # fmt: skip
    files: dict[str, list[str]] = {}
    for ts, _seq, text in sorted(lines):
        files.setdefault(f"smg.{log_ts(ts, False)[:10]}", []).append(text)
    return Rendered({name: ("\n".join(v) + "\n").encode() for name, v in files.items()})


FORMAT = Format(SMG, render_smg, forwards_request_id=True)
