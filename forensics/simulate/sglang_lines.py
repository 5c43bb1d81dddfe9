"""The SGLang messages the simulator writes, each written here once: the event loop (engine.py,
decode.py) calls them per request, the scale generator (simulate/scale) renders each once with
sentinel values and fills the template it splits out (so the two cannot drift apart).

Times and durations are seconds, printed as SGLang prints them (`{:.4f}` durations, `{:.3f}` start).
The `--log-requests` text lines are 0.5.11's utils/request_logger at log level 0 (text and input ids
left out), the reprs forensics/engines/sglang_reprs.py reads."""

from __future__ import annotations


def overlength(L: int, limit: int, rid: str) -> str:
    """managers/scheduler: a prompt over max_req_input_len (the placeholder path on prefill)."""
    return (
        f"Input length ({L} tokens) exceeds the maximum allowed length ({limit} tokens). Use a "
        f"shorter input or enable --allow-auto-truncate., self.rid='{rid}'"
    )


def time_stats_prefill(rid: str, room: int, input_len: int, bootstrap: float, forward: float, start: float) -> str:
    return (
        f"Req Time Stats(rid={rid}, bootstrap_room={room}, "
        f"input len={input_len}, output len=1, type=prefill): "
        f"bootstrap_duration={bootstrap:.4f}, "
        f"queue_duration=0.0001, forward_duration={forward:.4f}, start_time={start:.3f}"
    )


def time_stats_decode(
    rid: str,
    room: int,
    input_len: int,
    output_len: int,
    prealloc: float,
    transfer: float,
    queue: float,
    forward: float,
    start: float,
) -> str:
    return (
        f"Req Time Stats(rid={rid}, bootstrap_room={room}, input len={input_len}, "
        f"output len={output_len}, type=decode): prealloc_duration={prealloc:.4f}, "
        f"transfer_duration={transfer:.4f}, "
        f"queue_duration={queue:.4f}, "
        f"forward_duration={forward:.4f}, start_time={start:.3f}"
    )


def transfer_failed(rid: str, room: int) -> str:
    """disaggregation/decode: the client aborted the request while its KV was in transfer."""
    return (
        f"Decode transfer failed for request rank=0 decode_req.req.rid='{rid}' "
        f"decode_req.req.bootstrap_room={room} with exception "
        f"KVTransferError(bootstrap_room={room}): Aborted by AbortReq."
    )


def _req_obj(rid: str, host: str, room: int) -> str:
    return (
        f"GenerateReqInput(rid='{rid}', http_worker_ipc=None, bootstrap_host='{host}', bootstrap_port=8998, "
        f"bootstrap_room={room}, data_parallel_rank=None)"
    )


def received(rid: str, host: str, room: int) -> str:
    """`--log-requests` text: the request as the tokenizer manager received it."""
    return f"Receive: obj={_req_obj(rid, host, room)}"


def finished(
    rid: str,
    host: str,
    room: int,
    finish_reason: dict[str, object],
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int,
    e2e_latency: float,
    request_id: str | None,
) -> str:
    """`--log-requests` text: the finished request, its headers (the gateway's x-request-id) if forwarded."""
    headers = f", headers={dict({'x-request-id': request_id})!r}" if request_id is not None else ""
    out = {
        "meta_info": {
            "id": rid,
            "finish_reason": finish_reason,
            "prompt_tokens": prompt_tokens,
            "weight_version": "default",
            "total_retractions": 0,
            "completion_tokens": completion_tokens,
            "cached_tokens": cached_tokens,
            "e2e_latency": e2e_latency,
        }
    }
    return f"Finish: obj={_req_obj(rid, host, room)}{headers}, out={out!r}"
