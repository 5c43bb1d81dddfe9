"""scripts/gpu_check without a GPU: its arguments, its --dry-run (every command it would run), its seeded
plan, and its bundle assembly, investigate and figures (--replay) on a run folder made of canned server
logs and page files: the worked example's (tests/data/example), laid out as the script's run leaves them,
with the transfer rows' peer as the plugin writes it under Mooncake (the decode session's host:port).
The findings are held to the example's own expected findings, not to what this script prints."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import EXAMPLE

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check" / "gpu_check.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout, check=False)  # fmt: skip


def test_help_and_bad_arguments() -> None:
    h = run("--help")
    assert h.returncode == 0 and "--dry-run" in h.stdout and "--keep" in h.stdout
    bad = run("--page-size", "8")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr and "Traceback" not in bad.stderr


def _lines(out: str, prefix: str) -> list[str]:
    return [x for x in out.splitlines() if x.startswith(prefix)]


def test_dry_run_prints_every_command(tmp_path: Path) -> None:
    r = run("--dry-run", "--run", str(tmp_path / "r"), "--guard", "enforce", "--page-size", "1", "--seed", "7")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert not (tmp_path / "r").exists()  # a dry run writes nothing
    (pre,) = _lines(r.stdout, "gpu-check: prefill-0: ")
    (dec,) = _lines(r.stdout, "gpu-check: decode-0: ")
    for line, mode, pool in ((pre, "prefill", "2048"), (dec, "decode", "16384")):
        assert f"--disaggregation-mode {mode}" in line and f"--max-total-tokens {pool}" in line
        assert "-m sglang.launch_server" in line and "--page-size 1" in line and "--load-format dummy" in line
        node = f"{mode}-0"
        assert f"KVF_SGLANG_DIR={tmp_path / 'r' / 'kvf' / node}" in line and f"KVF_SGLANG_NODE={node}" in line
        assert "KVF_SGLANG_GUARD=enforce" in line and "TZ=UTC" in line
    # the main venv has neither Mooncake nor SGLang: the fake backend, and the run's preflight says why it stops
    assert "--disaggregation-transfer-backend fake" in pre and "--disaggregation-transfer-backend fake" in dec
    assert "a real run would stop here: sglang does not import" in r.stdout
    assert f"-m forensics investigate {tmp_path / 'r' / 'bundle'}" in r.stdout
    assert (
        r.stdout
        == run(
            "--dry-run", "--run", str(tmp_path / "r"), "--guard", "enforce", "--page-size", "1", "--seed", "7"
        ).stdout
    )  # fmt: skip  (seeded: the same plan)


def test_plan_mix(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from plan import Settings, plan_requests, router_cmd
    finally:
        sys.path.remove(str(SCRIPT.parent))
    s = Settings(run=tmp_path, requests=200, seed=3)
    reqs = plan_requests(s)
    assert {p.kind for p in reqs} == {"normal", "overlength", "abort_early", "abort_stream"}
    # over-length: past what prefill's pool admits (min(context, pool) - 1 - 5: SGLang's tp_worker), within
    # the context length the tokenizer manager checks, and within decode's pool
    limit = min(s.context_length - 1, s.prefill_tokens - 1) - 5
    for p in reqs:
        assert len(p.input_ids) == p.prompt_tokens
        if p.kind == "overlength":
            assert limit < p.prompt_tokens and p.prompt_tokens + s.max_new_tokens < s.context_length
        else:
            assert p.prompt_tokens < limit
    assert len({p.room for p in reqs}) == len(reqs) and len({p.request_id for p in reqs}) == len(reqs)
    cmd = router_cmd(s)
    assert cmd[1:5] == ["-m", "sglang_router.launch_router", "--pd-disaggregation", "--mini-lb"]


def _canned_run(run: Path) -> None:
    """The example bundle as the check's run folder holds it."""
    bundle = EXAMPLE / "bundle"
    for node in ("prefill-0", "decode-0"):
        (run / "logs").mkdir(parents=True, exist_ok=True)
        (run / "logs" / f"{node}.log").write_bytes((bundle / "engine" / node / "server.log").read_bytes())
        (run / "kvf" / node / "pages").mkdir(parents=True)
    by_node: dict[str, list[str]] = {}
    for line in (bundle / "pages" / "events.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["op"] == "transfer":
            r["peer"] = "10.0.0.7:41234"  # the Mooncake endpoint and port, as the plugin names the receiver
        by_node.setdefault(r["node"], []).append(json.dumps(r))
    for node, rows in by_node.items():
        (run / "kvf" / node / "pages" / f"{node}-20260829T104000-0.jsonl").write_text("\n".join(rows) + "\n")
    (run / "kvf" / "decode-0" / "alerts.jsonl").write_text(json.dumps({
        "kind": "exposure", "node": "decode-0", "room": 2002, "request_ids": ["req-B"],
        "summary": "room 2002 on decode-0: 45 attended KV slots hold another request's KV (rooms 1001) (stale), "
                   "before a forward pass over its KV (kv-forensics guard, observe); forensics investigate settles it",
    }) + "\n")  # fmt: skip
    kinds = {"req-A": "normal", "req-B": "overlength", "req-C": "abort_early", "req-D": "normal"}
    client = []
    for line in (bundle / "gateway" / "gateway.jsonl").read_text().splitlines():
        g = json.loads(line)
        client.append({"request_id": g["request_id"], "account_id": g["account_id"], "kind": kinds[g["request_id"]],
                       "prompt_tokens": g["prompt_tokens"], "room": g["bootstrap_room"], "sent_at": g["ts"],
                       "status": g["status"], "completion_tokens": g["completion_tokens"],
                       "duration_ms": g["duration_ms"], "guard_refused": False})  # fmt: skip
    (run / "client.jsonl").write_text("".join(json.dumps(c) + "\n" for c in client))


@pytest.mark.slow
def test_replay_assembles_and_investigates(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _canned_run(run_dir)
    r = run("--replay", str(run_dir), "--python", sys.executable, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    b = run_dir / "bundle"
    assert (b / "engine" / "prefill-0" / "server.log").read_bytes() == (
        EXAMPLE / "bundle" / "engine" / "prefill-0" / "server.log"
    ).read_bytes()
    peers = {json.loads(x)["peer"] for f in (b / "pages").glob("*.jsonl") for x in f.read_text().splitlines()
             if json.loads(x)["op"] == "transfer"}  # fmt: skip
    assert peers == {"decode-0"}
    gw = [json.loads(x) for x in (b / "gateway" / "gateway.jsonl").read_text().splitlines()]
    assert [g["bootstrap_room"] for g in gw] == [1001, 2002, 3003, 4004]
    # the example's expected findings: req-B stale (the placeholder), req-D foreign write (req-C's late transfer,
    # linked to decode-0 only through the peer the assembly named)
    with (EXAMPLE / "expected" / "affected_responses.csv").open() as fh:
        want = {(x["request_id"], x["status"]) for x in csv.DictReader(fh)}
    with (run_dir / "findings" / "affected_responses.csv").open() as fh:
        got = {(x["request_id"], x["status"]) for x in csv.DictReader(fh)}
    assert got == want
    # the figures: the guard's alert, and one row per kind with the counts computed from the expectation
    assert "decode-0: 1 alerts (stale 1)" in r.stdout
    table = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("  ") and len(ln.split()) == 7]
    row = {cells[0]: cells[1:] for cells in table}
    conf = {k: str(sum(1 for rid, st in want if kinds_of(rid) == k and st == "confirmed")) for k in row}
    assert row["normal"] == ["2", "2", "0", "0", conf["normal"], "0"]
    assert row["overlength"] == ["1", "1", "0", "1", conf["overlength"], "0"]
    assert row["abort_early"] == ["1", "0", "0", "0", conf["abort_early"], "0"]


def kinds_of(rid: str) -> str:
    return {"req-A": "normal", "req-B": "overlength", "req-C": "abort_early", "req-D": "normal"}[rid]


def test_client_against_stub_servers(tmp_path: Path) -> None:
    """traffic.py against two stub HTTP servers standing for prefill and decode: each request reaches both
    with the plan's room and the bootstrap address (as mini_lb sends it), aborts close the stream, and a
    refusal carrying the guard's text is counted as one."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from plan import GUARD_REFUSAL, Settings, plan_requests
        from traffic import send_all
    finally:
        sys.path.remove(str(SCRIPT.parent))
    seen: dict[str, list[dict[str, object]]] = {"prefill": [], "decode": []}

    def handler(role: str) -> type[BaseHTTPRequestHandler]:
        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def _send(self, status: int, payload: dict[str, object]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                b = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen[role].append(b)
                if role == "prefill":
                    return self._send(200, {"meta_info": {"completion_tokens": 1}})
                if b["rid"].endswith("0") and not b["stream"]:  # every tenth request: refused by "the guard"
                    return self._send(500, {"error": {"message": GUARD_REFUSAL + " this request: stale"}})
                if not b["stream"]:
                    return self._send(200, {"output_ids": [5] * 3, "meta_info": {"completion_tokens": 3}})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for i in range(1, 7):
                        ev = f"data: {json.dumps({'meta_info': {'completion_tokens': i}})}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                        self.wfile.flush()
                        time.sleep(0.02)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass  # the client closed the stream: the abort

        return H

    servers = {r: ThreadingHTTPServer(("127.0.0.1", 0), handler(r)) for r in ("prefill", "decode")}
    for srv in servers.values():
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        ports = {"prefill": servers["prefill"].server_address[1], "decode": servers["decode"].server_address[1]}

        class Stub(Settings):
            @property
            def ports(self) -> dict[str, int]:
                return {**ports, "bootstrap": 8998, "router": 1}

        s = Stub(run=tmp_path, requests=40, seed=5, concurrency=4)
        reqs = plan_requests(s)
        recs = send_all(s, reqs, "mooncake", 30, lambda m: None)
    finally:
        for srv in servers.values():
            srv.shutdown()
    assert [r["request_id"] for r in recs] == [p.request_id for p in reqs]
    for role in ("prefill", "decode"):
        by_rid = {b["rid"]: b for b in seen[role]}
        for p in reqs:
            if role == "prefill" or p.kind != "abort_early" or p.request_id in by_rid:
                b = by_rid[p.request_id]
                assert (b["bootstrap_room"], b["bootstrap_host"], b["bootstrap_port"]) == (p.room, "127.0.0.1", 8998)
                assert b["input_ids"] == p.input_ids
    for p, r in zip(reqs, recs, strict=True):
        if p.kind == "abort_stream":  # closed after abort_after chunks of the 6 the stub streams
            assert (r["status"], r["completion_tokens"]) == (499, int(p.abort_after))
        elif p.kind == "abort_early":
            assert r["status"] == 499 and r["completion_tokens"] == 0
        elif p.request_id.endswith("0"):
            assert r["status"] == 500 and r["guard_refused"]
        else:
            assert (r["status"], r["completion_tokens"], r["guard_refused"]) == (200, 3, False)
