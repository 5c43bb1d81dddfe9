"""OTLP/JSON spans read: each span flattened (its attributes and its resource's into objects of plain
values) and sorted into a gateway record, an SGLang root span (engine_spans) or a span left out and
counted (forensics.gateway_formats.otlp says which is which); the gen_ai content the semantic
conventions' versions carry gathered into prompt and response text."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import Any

from forensics.gateway_formats._mapping import FileRecords

HEADER = "http.request.header."
REQUEST_KINDS = (2, 3)  # SpanKind (opentelemetry-proto trace.proto): 1 INTERNAL, 2 SERVER, 3 CLIENT


def any_value(v: Any) -> Any:
    """An OTLP AnyValue as a plain value (intValue is a decimal string in JSON; arrays of one value
    give the value, as header attributes are string arrays)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        values = [any_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
        return values[0] if len(values) == 1 else values
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attributes(items: Any) -> dict[str, Any]:
    return {a["key"]: any_value(a.get("value")) for a in items or [] if isinstance(a, dict) and "key" in a}


def hex_id(v: Any, width: int) -> str | None:
    """A trace or span id as lowercase hex; some backends write base64 (told apart by its length)."""
    if not isinstance(v, str) or not v:
        return None
    if len(v) == width:
        return v.lower()
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        return v.lower()
    return raw.hex() if len(raw) * 2 == width else v.lower()


def room_of(v: Any) -> int | None:
    """SGLang writes the room as str(hex(room)); a number or decimal text is taken too."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        try:
            return int(v, 16) if v.lower().startswith("0x") else int(v)
        except ValueError:
            return None
    return None


def read_spans(lines: Iterable[bytes], file_id: int) -> FileRecords:
    """A file's client-request spans as records (numbered by their place among the file's spans), its
    SGLang spans as engine_spans rows; a line that is no TracesData object is a record of its own, rejected."""
    rows: list[int] = []
    errors: list[str | None] = []
    recs: list[str | None] = []
    engine: list[tuple] = []
    spans_seen = other = 0
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or not isinstance(data.get("resourceSpans"), list):
                raise ValueError("no resourceSpans array")
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            spans_seen += 1
            rows.append(spans_seen)
            errors.append(f"line {lineno}: not an OTLP/JSON traces object: {str(err)[:80]}")
            recs.append(None)
            continue
        for rs in data["resourceSpans"]:
            resource = attributes(((rs or {}).get("resource") or {}).get("attributes"))
            for ss in (rs or {}).get("scopeSpans") or []:
                for span in (ss or {}).get("spans") or []:
                    spans_seen += 1
                    kind = _classify(span, resource, lineno, file_id, engine)
                    if kind is None:
                        other += 1
                        continue
                    rows.append(spans_seen)
                    errors.append(None)
                    recs.append(json.dumps(kind))
    # spans that are no client request (engine spans, child spans): read and kept out of the gateway
    note = f"{spans_seen} spans: {len(rows)} client requests, {len(engine)} SGLang request spans, {other} others"
    return FileRecords(rows, errors, recs, engine, other, note)


def _classify(span: Any, resource: dict[str, Any], lineno: int, file_id: int, engine: list[tuple]) -> dict | None:
    """The flattened record of a client-request span, else None (an SGLang span is noted in `engine`)."""
    if not isinstance(span, dict):
        return None
    attrs = attributes(span.get("attributes"))
    trace = hex_id(span.get("traceId"), 32)
    if "rid" in attrs and "bootstrap_room" in attrs:
        name = str(span.get("name") or "")
        role = name.split(" ", 1)[0].lower() if name else None
        engine.append(
            (trace, str(attrs["rid"]), room_of(attrs["bootstrap_room"]), role, resource.get("service.name"),
             file_id, lineno)
        )  # fmt: skip
        return None
    # a gateway's span of the request: SERVER where it serves the client, CLIENT where it calls upstream
    # (Envoy AI Gateway's "chat <model>" span); vLLM's llm_request is the engine's own
    if span.get("parentSpanId") or span.get("kind") not in REQUEST_KINDS or span.get("name") == "llm_request":
        return None
    start, end = _nanos(span.get("startTimeUnixNano")), _nanos(span.get("endTimeUnixNano"))
    return {
        "trace_id": trace,
        "span_id": hex_id(span.get("spanId"), 16),
        "name": span.get("name"),
        "start_ns": str(start) if start is not None else span.get("startTimeUnixNano"),
        "duration_ns": end - start if start is not None and end is not None else None,
        "status_code": (span.get("status") or {}).get("code"),
        "attributes": attrs,
        # request headers the gateway recorded (semconv http.request.header.<name>, a string array)
        "headers": {k[len(HEADER) :]: v for k, v in attrs.items() if k.startswith(HEADER) and isinstance(v, str)},
        "resource": resource,
        "content": _content(attrs, span.get("events")),
        "line": lineno,
    }


# gen_ai content as the semantic conventions' versions in use carry it, prompt side then response side:
# v1.37+ (and semantic-conventions-genai) opt-in attributes gen_ai.system_instructions, gen_ai.input.messages,
# gen_ai.output.messages (JSON: messages of role and parts, a text part {"type": "text", "content": ...}),
# also on the event gen_ai.client.inference.operation.details; v1.28 to v1.36 events gen_ai.system.message,
# gen_ai.user.message, gen_ai.assistant.message, gen_ai.tool.message (content) and gen_ai.choice
# (message.content); v1.26/1.27 events gen_ai.content.prompt (gen_ai.prompt) and gen_ai.content.completion
# (gen_ai.completion); OpenLLMetry's flattened gen_ai.prompt.<i>.content and gen_ai.completion.<i>.content.
PROMPT_ATTRS = ("gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.prompt")
RESPONSE_ATTRS = ("gen_ai.output.messages", "gen_ai.completion")
PROMPT_EVENTS = ("gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message")


def _indexed(attrs: dict[str, Any], prefix: str) -> list[Any]:
    """OpenLLMetry's <prefix>.<i>.content values in index order."""
    found = []
    for k, v in attrs.items():
        if k.startswith(prefix) and k.endswith(".content"):
            i = k[len(prefix) : -len(".content")]
            if i.isdigit():
                found.append((int(i), v))
    return [v for _, v in sorted(found)]


def _content(attrs: dict[str, Any], events: Any) -> dict[str, list[Any]]:
    """The span's prompt and response content (as logged: text or message JSON), for
    forensics.ingest.content to fingerprint; the text goes no further than the staged record."""
    prompt = [attrs[k] for k in PROMPT_ATTRS if k in attrs] + _indexed(attrs, "gen_ai.prompt.")
    response = [attrs[k] for k in RESPONSE_ATTRS if k in attrs] + _indexed(attrs, "gen_ai.completion.")
    for ev in events if isinstance(events, list) else []:
        if not isinstance(ev, dict):
            continue
        name, ea = ev.get("name"), attributes(ev.get("attributes"))
        if name == "gen_ai.client.inference.operation.details":
            prompt += [ea[k] for k in PROMPT_ATTRS if k in ea]
            response += [ea[k] for k in RESPONSE_ATTRS if k in ea]
        elif name == "gen_ai.content.prompt" and "gen_ai.prompt" in ea:
            prompt.append(ea["gen_ai.prompt"])
        elif name == "gen_ai.content.completion" and "gen_ai.completion" in ea:
            response.append(ea["gen_ai.completion"])
        elif name in PROMPT_EVENTS:
            prompt.append(ea.get("content"))
        elif name == "gen_ai.choice":
            response.append(ea.get("message", ea.get("content")))
    return {"prompt": [p for p in prompt if p is not None], "response": [r for r in response if r is not None]}


def _nanos(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
