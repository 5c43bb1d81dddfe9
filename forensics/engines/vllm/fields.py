"""The rows a vLLM request line gives, as the shapes' row builders (forensics.engines.vllm.shapes) make
them: an engine_requests row per request line, and an engine_request_links row where a request names the
KV transfer it takes part in (its kv_transfer_params). A line whose fields do not read raises ValueError,
with the reason the reader stores beside the file and line.

What maps and what stays NULL (docs/vllm-lines.md cites each source):
- rid: the request id vLLM logs, the API server's (`cmpl-<X-Request-Id or uuid>-<i>`, `chatcmpl-<..>`);
  room: NULL, vLLM has no bootstrap room.
- input_len, output_len: NULL. The lines print the prompt's and the output's token ids (0.10.x) cut to
  --max-log-len without a mark, so a list's length is only a lower bound; 0.2x's INFO lines print no
  token ids at all.
- detail of a `finished` row: the finish_reason as logged, as JSON (`"stop"`, `"length"`; 0.10.x logs
  `"streaming_complete"` for a stream's end).
- the link: SamplingParams.extra_args['kv_transfer_params'] as the proxy passed it: on a decode request
  (do_remote_prefill) the prefill engine's id, its request id (0.2x: remote_request_id), host, port and
  the block ids it read; on a prefill request (do_remote_decode) the flags only.
"""

from __future__ import annotations

import json
import re
from typing import Any

from forensics.engines.facts import EngineRows
from forensics.engines.sglang.rows import Row, request, to_int
from forensics.engines.sglang_reprs import py_value, read_fields, value_end

# `label: value` items of a request line's body (`prompt_embeds shape: ..` has a space in its label)
_LABEL = re.compile(r"(?P<label>[a-z_]+(?: [a-z_]+)?): ")
_SAMPLING = "SamplingParams("


def labelled(body: str) -> dict[str, str]:
    """The `label: value` items of a request line's body, each value's text (a repr: a prompt's quotes
    and commas stay inside its string literal); ValueError where an item does not read."""
    out: dict[str, str] = {}
    i = 0
    while i < len(body):
        m = _LABEL.match(body, i)
        if m is None:
            raise ValueError(f"expected `label: value` at: {body[i : i + 30]}")
        v = m.end()
        i = value_end(body, v)
        out[m["label"]] = body[v:i]
        if body.startswith(", ", i):
            i += 2
        elif i < len(body):
            raise ValueError("items are not separated by ', '")
    return out


def _transfer_params(params: str | None) -> dict[str, Any] | None:
    """kv_transfer_params from a SamplingParams repr's extra_args, if it has them."""
    if params is None or not params.startswith(_SAMPLING):
        return None  # None, BeamSearchParams(..), PoolingParams(..): no extra_args
    fields, end = read_fields(params, len(_SAMPLING))
    if params[end:] != ")":
        raise ValueError("SamplingParams(..) does not end where it closes")
    extra = py_value(fields["extra_args"]) if "extra_args" in fields else None
    kv = extra.get("kv_transfer_params") if isinstance(extra, dict) else None
    if kv is not None and not isinstance(kv, dict):
        raise ValueError(f"kv_transfer_params is not a dict: {str(kv)[:40]}")
    return kv


def _text(v: Any) -> str | None:
    return None if v is None else str(v)[:200]


def _port(v: Any) -> int | None:
    """A port as logged: an int, or its digits as a string (a proxy may pass it on as text)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int) or (isinstance(v, str) and v.isdigit()):
        return to_int(v)
    return None


def link(base: Row, rid: str, kv: dict[str, Any]) -> Row:
    """An engine_request_links row: what one request line's kv_transfer_params name. role: `decode` for
    a request that reads its KV from a prefill (do_remote_prefill), `prefill` for one whose KV a decode
    will read (do_remote_decode), NULL when neither flag is set."""
    role = None
    if kv.get("do_remote_prefill") is True:
        role = "decode"
    elif kv.get("do_remote_decode") is True:
        role = "prefill"
    blocks = kv.get("remote_block_ids")
    return {k: base[k] for k in ("node", "file_id", "line")} | {
        "rid": rid,
        "role": role,
        "remote_engine": _text(kv.get("remote_engine_id")),
        "remote_rid": _text(kv.get("remote_request_id")),
        "remote_host": _text(kv.get("remote_host")),
        "remote_port": _port(kv.get("remote_port")),
        # as logged (a list of ids, or per KV cache group a list): the prefill's blocks the decode read
        "remote_block_ids": None if blocks is None else json.dumps(blocks)[:4000],
    }


def received(m: re.Match[str], base: Row, rows: EngineRows) -> str:
    """`Received request <rid>: [prompt: .., ]params: .., ...` (--enable-log-requests)."""
    rid, body = m["rid"], m["body"]
    if not body.endswith("."):
        raise ValueError("a Received request line does not end with '.'")
    items = labelled(body[:-1])
    if "params" not in items:
        raise ValueError("a Received request line without params")
    rows.requests.append(request(base, rid, None, "received"))
    kv = _transfer_params(items["params"])
    if kv is not None:
        rows.links.append(link(base, rid, kv))
    return "received"


def generated(m: re.Match[str], base: Row, rows: EngineRows) -> str:
    """`Generated response <rid>[ (streaming ..)]: output: .., [output_token_ids: .., ]finish_reason: ..`
    (--enable-log-outputs): a response or a stream's end gives a `finished` row; a stream's delta, none."""
    if m["stream"] == "streaming delta":
        return "response_delta"
    body = m["body"]
    end = value_end(body, 0)  # the output's repr
    cut = body.rfind("finish_reason: ", end)
    if cut < 0:
        raise ValueError("a Generated response line without finish_reason")
    reason = body[cut + len("finish_reason: ") :]
    rows.requests.append(request(base, m["rid"], None, "finished", detail=json.dumps(reason)[:500]))
    return "finished"


def added(m: re.Match[str], base: Row, rows: EngineRows) -> str:
    """`Added request <id>.` (v1/engine/async_llm.py, with --enable-log-requests): the engine's own id of
    the request, the one a prefill's kv_transfer_params name as remote_request_id (from 0.12 the API
    id and 8 random characters; before, the API id itself)."""
    rows.requests.append(request(base, m["rid"], None, "added"))
    return "added"


def aborted(m: re.Match[str], base: Row, rows: EngineRows) -> str:
    """`Aborted request(s) <id>,<id>.` (v1/engine/async_llm.py): a row per engine request id."""
    rows.requests.extend(request(base, rid, None, "aborted") for rid in m["rids"].split(","))
    return "aborted"
