"""The simulator's vLLM server logs (`forensics simulate --engine vllm`): the same run as SGLang's logs
describe, written as vLLM 0.33.0's lines, by the renderers of vLLM's table of line shapes
(forensics.engines.vllm.shapes), each node on its own clock.

Per node, its start-up lines (the banner, the non-default args with the KV role, the pool, the NIXL
engine id); per request, as a toy proxy with NixlConnector passes it (docs/vllm-lines.md): on the
prefill, `Received request` with the proxy's kv_transfer_params and max_tokens=1, `Added request` (the
engine's id: the API id and 8 characters), `Generated response` when its forward ends; on the decode,
`Received request` naming the prefill (its engine id, its engine request id, the blocks its page events
allocated to the room: remote_block_ids) when the prefill ends, `Added request`, then `Generated
response` or, for a request the client aborted, `Aborted request(s)`. The API id carries the gateway's
request id (the proxy forwards it as X-Request-Id). Times print no year: bundle.toml [engine] log_year.

The run itself is SGLang's (its allocator, its rooms): this writes what vLLM would log of it, so the
request lines, their links and the page events can be checked against one truth.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import UTC, datetime

from forensics.engines.vllm.shapes import (
    render_aborted,
    render_added,
    render_generated,
    render_received,
    render_record,
)
from forensics.simulate.cluster import Node
from forensics.simulate.config import SimConfig
from forensics.simulate.request import Request
from forensics.simulate.truth import Row

RELEASE = "0.33.0"
SIDE_PORT = 5600  # VLLM_NIXL_SIDE_CHANNEL_PORT's default
_FINISH = re.compile(r"Req Time Stats\(rid=([^,]+), ")
_FAILED = re.compile(r"decode_req\.req\.rid='([^']+)'")


def engine_id(node: str) -> str:
    """A node's NIXL engine id: a uuid, fixed per node name so that a run writes the same bytes."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kvf-sim-vllm/{node}"))


def _suffix(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def api_id(r: Request) -> str:
    return f"cmpl-{r.request_id}-0"


def engine_rid(r: Request, node: str) -> str:
    """The engine's id of the request on `node` (vllm/v1/engine/input_processor.py assign_request_id)."""
    return f"{api_id(r)}-{_suffix(node + api_id(r))}"


def _stamp(t_us: int) -> str:
    return datetime.fromtimestamp(t_us / 1e6, tz=UTC).strftime("%m-%d %H:%M:%S")


def _times(node: Node) -> dict[str, int]:
    """rid -> the node-clock time of its last line (its Req Time Stats, or its decode's transfer failure)."""
    out: dict[str, int] = {}
    for t, msg in node.lines:
        if m := _FINISH.match(msg) or _FAILED.search(msg):
            out[m[1].strip("'")] = t
    return out


def _blocks(rows: list[Row], node: str, room: int, ps: int) -> list[int]:
    """The blocks the run's page events on `node` gave the room (alloc and share), in order."""
    out: list[int] = []
    for name, _seq, _t, op, rm, a, b, *_ in rows:
        if name == node and rm == room and op in ("alloc", "share"):
            out += [x for x in range(a // ps, (b - 1) // ps + 1) if x not in out]
    return out


PROXY = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
         "remote_block_ids": None, "remote_host": None, "remote_port": None}  # fmt: skip


def received_prefill(api: str) -> str:
    """The prefill's `Received request`: the proxy's kv_transfer_params, max_tokens=1."""
    return render_received(RELEASE, api, "", [], 1, PROXY)


def received_decode(api: str, out: int, kv: dict[str, object]) -> str:
    return render_received(RELEASE, api, "", [], max(1, out), kv)


def generated(api: str, reason: str) -> str:
    return render_generated(RELEASE, api, "", None, reason)


def transfer_params(r: Request, blocks: list[int]) -> dict[str, object]:
    """The kv_transfer_params the decode gets: the prefill's engine id and request id, the blocks named."""
    return {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": blocks,
            "remote_engine_id": engine_id(r.prefill), "remote_request_id": engine_rid(r, r.prefill),
            "remote_host": r.prefill, "remote_port": SIDE_PORT, "tp_size": 1}  # fmt: skip


def transfer_failed(rid: str, r: Request, remote_rid: str, local: list[int], n_remote: int) -> str:
    """A failed READ as the decode's worker logs it (vllm 0.29.0 nixl/base_worker.py _log_failure, called
    with failure_type="transfer_failed", msg="Marking blocks as invalid" and xfer_state, line 2398): the
    context a dict repr, the remote fields from the request's receive metadata."""
    ctx = {"failure_type": "transfer_failed", "request_id": rid, "engine_id": engine_id(r.decode),
           "remote_engine_id": engine_id(r.prefill), "remote_request_id": remote_rid, "remote_host": r.prefill,
           "remote_port": SIDE_PORT, "num_local_blocks": len(local), "num_remote_blocks": n_remote,
           "local_block_ids_sample": local[:10], "xfer_state": "ERR"}  # fmt: skip
    return f"NIXL transfer failure: transfer_failed. Marking blocks as invalid | Context: {ctx!r}"


def expired(rid: str, count: int) -> str:
    """The prefill's release of a request's blocks at the lease's end (nixl/base_worker.py 0.29.0, 2319)."""
    return (
        f"Releasing expired KV blocks for request {rid} which were retrieved by {count} remote worker(s) "
        "before lease expired."
    )


def record(t_us: int, source: str, message: str, level: str, proc: str) -> str:
    """A record of the API server (pid 1) or of the engine core's process (pid 2), where NIXL logs."""
    return render_record(_stamp(t_us), source, message, level, 1 if proc == "APIServer" else 2).replace(
        "(APIServer ", f"({proc} ", 1
    )


def startup(node: Node, cfg: SimConfig, t: int) -> list[tuple[int, str, str]]:
    role = "kv_producer" if node.spec.role == "prefill" else "kv_consumer"
    return [
        (t, "api_server.py:1885", f"vLLM API server version {RELEASE}"),
        (
            t,
            "utils.py:328",
            f"non-default args: {{'model': '{cfg.model_path}', 'max_model_len': {cfg.context_len}, "
            f"'block_size': {cfg.page_size}, 'enable_log_requests': True, 'enable_log_outputs': True, "
            f"'kv_transfer_config': {{'kv_connector': 'NixlConnector', 'kv_role': '{role}'}}}}",
        ),
        (t, "kv_cache_utils.py:1087", f"GPU KV cache size: {node.spec.pool_tokens:,} tokens"),
        (t, "base_scheduler.py:109", f"Initializing NIXL Scheduler {engine_id(node.name)}"),
    ]


def server_logs(nodes: dict[str, Node], cfg: SimConfig, reqs: list[Request], rows: list[Row]) -> dict[str, str]:
    """Each node's server.log text; `rows`: every page event of the run (the blocks a prefill gave a room)."""
    if cfg.vllm_pd:  # the driver logged each line as it ran (forensics.simulate.vllm_pd)
        return {name: _render(startup(nodes[name], cfg, nodes[name].clock(cfg.start_us - 600_000_000)),
                              nodes[name].records) for name in sorted(nodes)}  # fmt: skip
    ps = cfg.page_size
    rooms = {r.room for r in reqs}
    by_room: dict[tuple[str, int], list[Row]] = {}
    for row in rows:  # the alloc and share events, per node and room
        if row[3] in ("alloc", "share") and row[4] in rooms:
            by_room.setdefault((row[0], row[4]), []).append(row)
    done = {name: _times(n) for name, n in nodes.items()}
    lines: dict[str, list[tuple[int, str, str]]] = {name: [] for name in nodes}
    t_start = cfg.start_us - 600_000_000
    for name, node in nodes.items():
        lines[name] += startup(node, cfg, node.clock(t_start))
    proxy = PROXY
    for r in sorted(reqs, key=lambda q: (q.t0, q.idx)):
        p, d = nodes[r.prefill], nodes[r.decode]
        api, rid_p, rid_d = api_id(r), engine_rid(r, r.prefill), engine_rid(r, r.decode)
        t_in = p.clock(r.t0)
        lines[r.prefill] += [
            (t_in, "request_logger.py:67", render_received(RELEASE, api, "", [], 1, proxy)),
            (t_in, "async_llm.py:587", render_added(rid_p)),
        ]
        p_end = done[r.prefill].get(r.rid_p)
        if p_end is None:  # the prefill never ended: the decode was never handed it
            continue
        lines[r.prefill].append((p_end, "request_logger.py:120", render_generated(RELEASE, api, "", None, "length")))
        t_d = d.clock(p_end - p.spec.clock_offset_us)
        blocks = _blocks(by_room.get((r.prefill, r.room), []), r.prefill, r.room, ps)
        kv = {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": blocks,
              "remote_engine_id": engine_id(r.prefill), "remote_request_id": rid_p, "remote_host": r.prefill,
              "remote_port": SIDE_PORT, "tp_size": 1}  # fmt: skip
        lines[r.decode] += [
            (t_d, "request_logger.py:67", render_received(RELEASE, api, "", [], max(1, r.out), kv)),
            (t_d, "async_llm.py:587", render_added(rid_d)),
        ]
        d_end = done[r.decode].get(r.rid_d)
        if d_end is None:
            continue
        if r.aborted:
            lines[r.decode].append((d_end, "async_llm.py:959", render_aborted([rid_d])))
        else:
            reason = "length" if r.completion >= r.out else "stop"
            lines[r.decode].append((d_end, "request_logger.py:120", render_generated(RELEASE, api, "", None, reason)))
    out = {}
    for name in sorted(nodes):
        ordered = sorted(lines[name], key=lambda x: x[0])  # stable: a request's lines keep their order
        out[name] = "".join(render_record(_stamp(t), src, msg) + "\n" for t, src, msg in ordered)
    return out


def _render(start: list[tuple[int, str, str]], records: list[tuple[int, str, str, str, str]]) -> str:
    head = "".join(render_record(_stamp(t), src, msg) + "\n" for t, src, msg in start)
    ordered = sorted(records, key=lambda x: x[0])  # stable: a request's lines keep their order
    return head + "".join(record(t, src, msg, level, proc) + "\n" for t, src, msg, level, proc in ordered)
