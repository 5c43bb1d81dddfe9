"""OpenTelemetry OTLP/JSON traces (the file exporter: one TracesData object per line,
https://opentelemetry.io/docs/specs/otel/protocol/file-exporter/; field names as opentelemetry-proto
examples/trace.json: lowerCamelCase, ids in hex, times as decimal strings), their reader and the
simulator's writer of them.

The reader (read_spans, the Mapping's reader) flattens each span (its attributes and its resource's into
objects of plain values) and sorts it:
- an SGLang root span (attributes `rid` and `bootstrap_room`, the room as `str(hex(room))`:
  python/sglang/srt/observability/trace.py) goes to engine_spans: trace id -> rid and room, which the
  gateway join uses;
- a vLLM `llm_request` span names a request id only: kept out, counted;
- a client request is a root SERVER or CLIENT span (no parent) that is neither: it becomes a gateway
  record, numbered by its place among the file's spans.
The join key: the trace id, which the SGLang root spans share. A client that went away (spec status 499)
leaves a gateway span without status code. truth/gateway_ids.csv maps each spec request_id to the
gateway span's id (the fallback request id of a span without one) and the trace id.

The package: spans.py the reader (read_spans), writer.py the simulator's writer (render_otlp), here the Mapping.
"""

from __future__ import annotations

from forensics.gateway_formats._mapping import Format, Mapping, paths_of
from forensics.gateway_formats.otlp.spans import read_spans
from forensics.gateway_formats.otlp.writer import render_otlp

__all__ = ["FORMAT", "OTLP", "read_spans", "render_otlp"]


OTLP = Mapping(
    # OTLP/JSON traces (opentelemetry.io file exporter; opentelemetry-proto examples/trace.json),
    # flattened by read_spans into one record per client-request span.
    name="otlp",
    doc="OpenTelemetry OTLP/JSON trace lines (resourceSpans)",
    detect=("resourceSpans",),
    fields={
        "ts": paths_of("start_ns"),
        "request_id": paths_of("attributes|http.request.header.x-request-id", "span_id"),
        "client_ip": paths_of("attributes|client.address"),
        "user_agent": paths_of("attributes|user_agent.original"),
        "model": paths_of("attributes|gen_ai.request.model", "attributes|gen_ai.response.model"),
        "status": paths_of("attributes|http.response.status_code"),
        "prompt_tokens": paths_of("attributes|gen_ai.usage.input_tokens", "attributes|gen_ai.usage.prompt_tokens"),
        "completion_tokens": paths_of(
            "attributes|gen_ai.usage.output_tokens", "attributes|gen_ai.usage.completion_tokens"
        ),
        "duration_ms": paths_of("duration_ns"),
        "trace_id": paths_of("trace_id"),
        "engine_id": paths_of("attributes|http.request.header.x-request-id", "attributes|gen_ai.response.id"),
        # gathered by the reader from the gen_ai content attributes and events (_content)
        "prompt_text": paths_of("content.prompt"),
        "response_text": paths_of("content.response"),
    },
    attrs={
        "user": paths_of("attributes|user.id", "resource|user.id"),
        "end_user": paths_of("attributes|enduser.id"),
    },
    tenant=("attributes|tenant.id", "resource|tenant.id", "end_user", "user"),
    time="epoch_ns",
    duration_unit=1e-6,
    headers_at=paths_of("headers"),
    reader=read_spans,
)

FORMAT = Format(OTLP, render_otlp)
