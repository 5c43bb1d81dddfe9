"""The client: sends the planned requests and keeps its own record of each (client.jsonl).

With --lb client it does what sglang_router's MiniLoadBalancer does for POST /generate
(sgl-router/py_src/sglang_router/mini_lb.py handle_generate_request): the same body, with
bootstrap_host, bootstrap_port and bootstrap_room added, to the prefill and the decode server at
once, and the decode server's answer is the client's. The room is the plan's, so the gateway log
carries it. With --lb router the body goes to the router, which picks the room; the request id is
passed as `rid`, which the router copies to both servers, so the engines' request lines name it.
An abort closes the decode (or router) connection of a streamed request: SGLang's HTTP server sees
the disconnect and aborts the request (AbortReq), as a real client going away does.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from plan import GUARD_REFUSAL, Planned, Settings


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def body(s: Settings, p: Planned, backend: str, stream: bool) -> dict[str, Any]:
    b: dict[str, Any] = {
        "input_ids": p.input_ids,
        "sampling_params": {"max_new_tokens": s.max_new_tokens, "temperature": 0.0, "ignore_eos": True},
        "rid": p.request_id,
        "stream": stream,
    }
    if s.lb == "client":
        b["bootstrap_room"] = p.room
        if backend != "fake":  # the fake backend's requests carry no bootstrap host (disaggregation/utils.py
            b["bootstrap_host"] = s.host  # _is_fake_transfer): with one, 0.5.23 waits for metadata never sent
            b["bootstrap_port"] = s.ports["bootstrap"]
    return b


def _conn(url: str, timeout: float) -> http.client.HTTPConnection:
    u = urlparse(url)
    return http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=timeout)


def _post(url: str, data: dict[str, Any], timeout: float) -> tuple[int, str]:
    c = _conn(url, timeout)
    try:
        c.request("POST", "/generate", body=json.dumps(data), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def _meta(text: str) -> dict[str, Any]:
    try:
        d = json.loads(text)
    except ValueError:
        return {}
    d = d[0] if isinstance(d, list) and d else d
    return d.get("meta_info", {}) if isinstance(d, dict) else {}


def _error_text(text: str) -> str:
    try:
        d = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(d, dict):
        e = d.get("error", d.get("detail", d.get("message")))
        if e is not None:
            return (e.get("message") if isinstance(e, dict) else str(e))[:300]
        fin = d.get("meta_info", {}).get("finish_reason") or {}
        if isinstance(fin, dict) and fin.get("type") == "abort":
            return str(fin.get("message", "aborted"))[:300]
    return ""


def _stream_abort(url: str, data: dict[str, Any], p: Planned, timeout: float) -> dict[str, Any]:
    """Read the stream until the planned moment, then close the socket mid-stream."""
    c = _conn(url, timeout)
    chunks, tokens, err = 0, 0, ""
    try:
        c.request("POST", "/generate", body=json.dumps(data), headers={"Content-Type": "application/json"})
        if p.kind == "abort_early":
            # before the response head: the request is in prefill or in transfer
            time.sleep(p.abort_after)
            return {"status": 499, "completion_tokens": 0, "aborted_at": _iso(time.time()), "chunks": 0}
        r = c.getresponse()
        status = r.status
        if status != 200:  # refused before streaming (the guard in enforce, a bad request): its error body
            text = r.read().decode("utf-8", "replace")
            return {"status": status, "completion_tokens": 0, "chunks": 0, "error": _error_text(text) or text[:300]}
        ended = False  # the stream finished before the planned moment: no abort happened
        while chunks < p.abort_after:
            line = r.readline()  # HTTPResponse undoes the chunked encoding
            if not line or b"[DONE]" in line:
                ended = True
                break
            if line.startswith(b"data:"):
                chunks += 1
                m = _meta(line[5:].decode("utf-8", "replace"))
                tokens = int(m.get("completion_tokens", tokens) or tokens)
                err = err or _error_text(line[5:].decode("utf-8", "replace"))
        return {
            "status": 200 if ended else 499,
            "completion_tokens": tokens,
            "aborted_at": None if ended else _iso(time.time()),
            "chunks": chunks,
            "error": err,
        }
    finally:
        try:
            if c.sock is not None:
                c.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        c.close()


def send_one(s: Settings, p: Planned, backend: str, timeout: float) -> dict[str, Any]:
    t0 = time.time()
    rec: dict[str, Any] = {
        "request_id": p.request_id,
        "account_id": p.account_id,
        "kind": p.kind,
        "prompt_tokens": p.prompt_tokens,
        "room": p.room if s.lb == "client" else None,
        "sent_at": _iso(t0),
    }
    aborting = p.kind.startswith("abort")
    front = s.url("router") if s.lb == "router" else s.url("decode")
    prefill_result: dict[str, Any] = {}

    def prefill() -> None:  # mini_lb's prefill half: its answer is not the client's, only kept for the record
        try:
            st, text = _post(s.url("prefill"), body(s, p, backend, False), timeout)
            prefill_result.update(status=st, error=_error_text(text))
        except (OSError, http.client.HTTPException) as err:
            prefill_result.update(status=0, error=f"{type(err).__name__}: {err}")

    th = None
    if s.lb == "client":
        th = threading.Thread(target=prefill, daemon=True)
        th.start()
    try:
        if aborting:
            rec.update(_stream_abort(front, body(s, p, backend, True), p, timeout))
        else:
            st, text = _post(front, body(s, p, backend, False), timeout)
            m = _meta(text)
            rec.update(status=st, completion_tokens=int(m.get("completion_tokens", 0) or 0), error=_error_text(text))
            if st == 200 and rec["error"]:  # an abort finish inside a 200 (SGLang's finish_reason abort)
                rec["status"] = 500 if GUARD_REFUSAL in rec["error"] else 400
    except (OSError, http.client.HTTPException) as err:
        rec.update(status=0, completion_tokens=0, error=f"client: {type(err).__name__}: {err}")
    if th is not None:
        th.join(timeout)
        rec["prefill_status"] = prefill_result.get("status")
        rec["prefill_error"] = prefill_result.get("error", "")
    rec["duration_ms"] = round((time.time() - t0) * 1000, 1)
    rec["guard_refused"] = GUARD_REFUSAL in (rec.get("error") or "")
    return rec


def send_all(s: Settings, reqs: list[Planned], backend: str, timeout: float, log: Any) -> list[dict[str, Any]]:
    """Concurrent, so that aborted rooms' transfers overlap other requests' allocations; the records are
    returned in plan order whatever order they finish in."""
    done: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=s.concurrency) as pool:
        for i, rec in enumerate(pool.map(lambda p: send_one(s, p, backend, timeout), reqs)):
            done.append(rec)
            if (i + 1) % 20 == 0 or i + 1 == len(reqs):
                log(f"  {i + 1}/{len(reqs)} requests done")
    return done
