"""The cluster driver: 2 prefill and 2 decode nodes, each an OS process (node.py), a seeded workload,
the transfers relayed between them, and the truth from the driver's own bookkeeping.

The run is a sequence of ticks. Each tick: new requests arrive (the decode pre-allocates through
DecodePreallocQueue._pre_alloc, the prefill computes the prompt, 1 token for an over-length prompt,
and queues its send through add_transfer_request); client aborts that are due reach the decode (the
room turns Failed and the ABORT goes to the prefill; its pages go back at once, immediate release, or
are held by SGLang's own deferred release, decode.py _defer_release, until the prefill's ABORT_ACK says
its in-flight chunks drained or the timeout in ticks passes: resolve_deferred_releases, every tick on
every decode); transfers that are due land (the RDMA
write: a message that writes the destination slots of the decode's KV buffer, after an abort freed
them where the abort came first; the metadata row prefill filled rides with the last chunk) and the
prefill concludes the room (conclude_transfer: Success, or Failed where the room failed), its status
relayed to the decode (also for a room decode aborted), which commits the room on Success
(_commit_transfer_to_req, where the guard checks it first; a request it refuses there ends with no
forward pass, and its truth is what its row's slots hold at that moment) and admits it to its
running batch; every decode node runs one step of its batch (Scheduler.run_batch).

Truth: what each decode forward pass read (node.py's stub forward reads the KV buffer the transfers
and the decode steps wrote): a response attended another request's KV when a slot its row names held
that request's room. Nothing is taken from forensics.simulate.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support.sglang_cluster.node import ENDPOINT_PORT, paged_refusal, serve

PREFILLS, DECODES = ("prefill-0", "prefill-1"), ("decode-0", "decode-1")
LIMIT = 256  # the prefill's input limit: a longer prompt is replaced by a 1-token placeholder
SUCCESS, FAILED = 4, 0  # KVPoll (disaggregation/base/conn.py)


@dataclass
class Setup:
    seed: int
    requests: int = 300
    page_size: int = 1
    release: str = "immediate"  # or deferred
    guard: str = "observe"  # or enforce
    long_rate: float = 0.08
    abort_rate: float = 0.12
    per_tick: int = 3
    pool: int = 3072  # decode pool slots: small, so freed pages are soon taken again
    timeout_ticks: int = 3  # deferred release: held at most this long without the prefill's ack


@dataclass
class Req:
    i: int
    room: int
    rid: str
    account: str
    prefill: str
    decode: str
    L: int
    out: int
    abort_after: int | None  # ticks after arrival the client aborts (before the transfer lands)
    land_after: int
    t0: float = 0.0
    t1: float = 0.0
    status: int = 0
    completion: int = 0
    sources: list[int] = field(default_factory=list)
    slots: int = 0
    refused: bool = False
    decoded: bool = False
    # a request the guard ended: the rooms whose KV it had read or would have read had it run to its end
    # (what its row held, and late chunks still in flight to its slots before its last step)
    would: list[int] = field(default_factory=list)

    @property
    def placeholder(self) -> bool:
        return self.L > LIMIT


def workload(s: Setup) -> list[Req]:
    rng = random.Random(s.seed)
    out = []
    for i in range(s.requests):
        long = rng.random() < s.long_rate
        L = rng.randint(LIMIT + 1, 2 * LIMIT) if long else rng.randint(16, 160)
        aborted = rng.random() < s.abort_rate
        land = rng.randint(1, 6) if aborted else rng.randint(1, 2)
        out.append(Req(i, 10_000 + 7 * i + s.seed % 7, f"r{i}", f"acct-{rng.randint(0, 19):02d}",
                       PREFILLS[i % 2], rng.choice(DECODES), L, rng.randint(2, 8),
                       rng.randint(0, min(land - 1, 2)) if aborted else None, land))  # fmt: skip
    return out


class Cluster:
    """The four node processes. A module of tests starts them once and runs several setups in them
    (reset: the plugin configured anew, new SGLang objects), since starting them (each imports SGLang)
    costs most of a short run."""

    def __init__(self, s: Setup, out: Path) -> None:
        self.ctx = mp.get_context("spawn")
        self.pipes: dict[str, Any] = {}
        self.procs: dict[str, Any] = {}
        self.pids: dict[str, int] = {}
        for name, spec in _specs(s, out).items():
            a, b = self.ctx.Pipe()
            p = self.ctx.Process(target=serve, args=(b, spec), name=name, daemon=True)
            p.start()
            self.pipes[name], self.procs[name] = a, p
        for name, a in self.pipes.items():
            hello = a.recv()
            if not hello.get("ok"):
                self.shutdown()
                raise RuntimeError(f"{name} did not start: {hello.get('error')}")
            self.pids[name] = hello["pid"]

    def reset(self, s: Setup, out: Path) -> None:
        for name, spec in _specs(s, out).items():
            self.call(name, "reset", spec)

    def call(self, node: str, cmd: str, *args: Any) -> dict[str, Any]:
        self.pipes[node].send((cmd, args))
        out: dict[str, Any] = self.pipes[node].recv()
        if "error" in out:
            raise RuntimeError(f"{node}: {out['error']}")
        return out

    def shutdown(self) -> None:
        """Every node told to exit at once; one still alive after 5 s (each run closed its recorders
        before) is terminated."""
        for name, p in self.procs.items():
            if p.is_alive():
                try:
                    self.pipes[name].send(("exit", ()))
                except OSError:
                    pass
        end = time.time() + 5
        for p in self.procs.values():
            p.join(timeout=max(0.1, end - time.time()))
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


def _specs(s: Setup, out: Path) -> dict[str, dict[str, Any]]:
    peers = ",".join(f"10.0.0.{k + 1}:{ENDPOINT_PORT + k}={d}" for k, d in enumerate(DECODES))
    specs = {}
    for name in PREFILLS + DECODES:
        env = {"KVF_SGLANG_DIR": str(out / "plugin" / name), "KVF_SGLANG_NODE": name,
               "KVF_SGLANG_GUARD": s.guard, "KVF_SGLANG_FORMAT": "jsonl", "KVF_SGLANG_PEERS": peers}  # fmt: skip
        role = "decode" if name.startswith("decode") else "prefill"
        specs[name] = {"name": name, "role": role, "page_size": s.page_size, "env": env, "rows": 512,
                       "release": s.release, "timeout_ticks": s.timeout_ticks,
                       "pool": s.pool if role == "decode" else 4 * s.pool, "context": 2 * LIMIT + 64}  # fmt: skip
    return specs


def refusal(s: Setup) -> str | None:
    """Why this venv's SGLang release cannot run `s`, or None: 0.5.11's paged allocator runs only its
    Triton kernel (node.paged_refusal), and 0.5.11 has no deferred release (DecodeTransferQueue.
    _defer_release and the prefill's ABORT_ACK come with 0.5.23)."""
    import importlib.metadata

    rel = importlib.metadata.version("sglang")
    old = tuple(int(x) for x in rel.split(".")[:3]) < (0, 5, 23)
    if old and s.page_size > 1:
        return paged_refusal(rel)
    if old and s.release == "deferred":
        return f"SGLang {rel} has no deferred KV release (DecodeTransferQueue._defer_release, 0.5.23 on)"
    return None


def run(out: Path, s: Setup, cluster: Cluster | None = None) -> dict[str, Any]:
    """One run: OUT/plugin/<node> the plugin's output per node, OUT/bundle the evidence bundle.
    Returns the requests (with their truth), the node processes' pids and what each closed with.
    With `cluster`, the run reuses its processes (reset) and leaves them running; else it starts its
    own and stops them."""
    why = refusal(s)
    if why is not None:
        raise RuntimeError(why)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    reqs = workload(s)
    c = cluster or Cluster(s, out)
    if cluster is not None:
        c.reset(s, out)
    logs: dict[str, list[tuple[float, str]]] = {n: [] for n in PREFILLS + DECODES}
    try:
        _drive(c, s, reqs, logs)
        closed = {n: c.call(n, "close") for n in PREFILLS + DECODES}
    finally:
        if cluster is None:
            c.shutdown()
    write_bundle(out / "bundle", s, reqs, logs, out / "plugin")
    return {"reqs": reqs, "pids": c.pids, "closed": closed}


def _drive(c: Cluster, s: Setup, reqs: list[Req], logs: dict[str, list[tuple[float, str]]]) -> None:
    pending = list(reqs)
    # room -> (req, landing tick, chunks, metadata row, decode's metadata row index)
    flight: dict[int, tuple[Req, int, list[list[int]], dict[str, Any], int]] = {}
    aborts: dict[int, int] = {}  # room -> abort tick
    held: dict[str, int] = {}  # decode -> rooms its deferred release still holds
    by_room = {r.room: r for r in reqs}
    running: set[int] = set()  # rooms admitted to a decode batch, not yet ended
    tick = 0
    while pending or flight or any(held.values()) or running:
        tick += 1
        for r in pending[: s.per_tick]:
            _arrive(c, r, tick, flight, aborts, logs)
        pending = pending[s.per_tick :]
        for room, t in sorted(aborts.items()):
            if t == tick:
                r = by_room[room]
                msg = c.call(r.decode, "abort", room, s.release == "immediate", tick)["abort"]
                acks = c.call(r.prefill, "abort_notice", room, msg)["acks"]  # the ABORT message relayed
                if acks:  # nothing of the room in flight: the prefill acks at once
                    c.call(r.decode, "abort_acks", acks)
                r.status, r.t1 = 499, time.time()
                logs[r.decode].append((r.t1, f"Decode transfer failed for request rank=0 decode_req.req.rid='d{r.rid}' "
                                       f"decode_req.req.bootstrap_room={room} with exception KVTransferError("
                                       f"bootstrap_room={room}): Aborted by AbortReq."))  # fmt: skip
        for room in [rm for rm, f in flight.items() if f[1] == tick]:
            r, _, chunks, meta, aux = flight.pop(room)
            for k, slots in enumerate(chunks):  # the metadata row rides with the last chunk
                last = k == len(chunks) - 1
                c.call(r.decode, "land", room, slots, meta if last else None, aux)
            host = f"10.0.0.{DECODES.index(r.decode) + 1}"
            done = c.call(r.prefill, "conclude", room, host, ENDPOINT_PORT + DECODES.index(r.decode))
            if done["acks"]:  # the in-flight write drained: the ABORT_ACK of an aborted, held room
                c.call(r.decode, "abort_acks", done["acks"])
            c.call(r.decode, "status", room, done["status"])  # also for a room decode aborted
            if r.status != 499:
                got = c.call(r.decode, "admit", room, r.out)
                if got["ok"]:
                    running.add(room)
                elif got.get("refused"):  # the guard refused it at the commit: no forward pass ran
                    r.decoded, r.refused, r.t1, r.status = True, True, got["t"], 500
                    r.would = sorted(set(got["would"]) | _late(flight, got["row"], tick + r.out - 1))
                else:
                    r.status, r.t1 = 500, time.time()
        for d in DECODES:  # the scheduler loop's resolve_deferred_releases: drained, or timed out
            held[d] = c.call(d, "resolve", tick)["held"]
        for d in DECODES:
            for e in c.call(d, "step")["ended"]:
                r = by_room[e["room"]]
                running.discard(r.room)
                r.decoded, r.sources, r.slots, r.refused, r.t1 = True, e["sources"], e["slots"], e["refused"], e["t"]
                if r.refused:  # ended by the guard: what it would have read had it run its remaining steps
                    r.would = sorted(set(r.sources) | _late(flight, e["row"], tick + e["left"]))
                r.status, r.completion = (500, 0) if r.refused else (200, r.out)
                logs[d].append((r.t1, f"Req Time Stats(rid=d{r.rid}, bootstrap_room={r.room}, input len={r.L}, "
                               f"output len={r.completion}, type=decode): forward_duration=0.01"))  # fmt: skip
        if tick > 50 * (s.requests // s.per_tick + 10):
            raise RuntimeError("the cluster did not drain")


def _late(flight: dict, row: list[int], last: int) -> set[int]:  # type: ignore[type-arg]
    """Rooms whose transfer, still in flight, writes a slot of `row` by tick `last` (a refused
    request's steps would have attended it)."""
    mine = set(row)
    return {
        room for room, (_, t, chunks, *_) in flight.items() if t <= last and any(mine.intersection(x) for x in chunks)
    }


def _arrive(c: Cluster, r: Req, tick: int, flight: dict, aborts: dict[int, int], logs: dict) -> None:  # type: ignore[type-arg]
    r.t0 = time.time()
    got = c.call(r.decode, "prealloc", r.room, f"d{r.rid}", r.L)
    if not got["ok"]:
        r.status, r.t1 = 503, time.time()
        return
    n = 1 if r.placeholder else r.L
    if r.placeholder:
        logs[r.prefill].append((time.time(), f"Input length ({r.L} tokens) exceeds the maximum allowed length "
                                f"({LIMIT} tokens). Use a shorter input or enable --allow-auto-truncate., "
                                f"self.rid='p{r.rid}'"))  # fmt: skip
    k = DECODES.index(r.decode)
    sent = c.call(r.prefill, "prefill", r.room, f"p{r.rid}", n, got["pages"], (f"10.0.0.{k + 1}", ENDPOINT_PORT + k))
    logs[r.prefill].append((time.time(), f"Req Time Stats(rid=p{r.rid}, bootstrap_room={r.room}, input len={n}, "
                            f"output len=1, type=prefill): forward_duration=0.01"))  # fmt: skip
    flight[r.room] = (r, tick + r.land_after, sent["chunks"], sent["meta"], got["aux"])
    if r.abort_after is not None:
        aborts[r.room] = tick + r.abort_after


# --- the evidence bundle ---------------------------------------------------------------------------
def _ts(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def write_bundle(b: Path, s: Setup, reqs: list[Req], logs: dict[str, list[tuple[float, str]]], plugin: Path) -> None:
    """The plugin's page files, a gateway record per request and each node's server log with the
    lines the contract reads (docs/evidence-bundle.md sections 2-4)."""
    (b / "gateway").mkdir(parents=True)
    (b / "pages").mkdir()
    (b / "bundle.toml").write_text('[incident]\nid = "MP-RUN"\n\n[engine]\nlog_timezone = "UTC"\n')
    with (b / "gateway" / "gateway.jsonl").open("w") as fh:
        for r in reqs:
            fh.write(json.dumps({
                "ts": datetime.fromtimestamp(r.t0, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "request_id": r.rid,
                "account_id": r.account, "api_token_id": f"tok-{r.account}", "client_ip": "203.0.113.7",
                "user_agent": "mp-driver", "model": "m", "status": r.status or 503, "prompt_tokens": r.L,
                "completion_tokens": r.completion, "duration_ms": round(max(0.0, r.t1 - r.t0) * 1000, 1),
                "bootstrap_room": r.room, "prefill_node": r.prefill, "decode_node": r.decode,
            }) + "\n")  # fmt: skip
    t0 = min(r.t0 for r in reqs) - 1
    for node, lines in logs.items():
        role = "decode" if node.startswith("decode") else "prefill"
        pool = s.pool if role == "decode" else 4 * s.pool
        head = [
            f"server_args=ServerArgs(model_path='m', context_length={2 * LIMIT + 64}, page_size={s.page_size}, "
            f"tp_size=1, disaggregation_mode='{role}', disaggregation_transfer_backend='mooncake')",
            f"KV Cache is allocated. #tokens: {pool}, KV size: 1.00 GB",
            f"max_total_num_tokens={pool}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests=64, context_len={2 * LIMIT + 64}, available_gpu_mem=9.87 GB",
        ]
        d = b / "engine" / node
        d.mkdir(parents=True)
        body = [(t0, x) for x in head] + sorted(lines, key=lambda x: x[0])
        (d / "server.log").write_text("".join(f"[{_ts(t)} TP0] {x}\n" for t, x in body))
        for f in sorted((plugin / node / "pages").glob("*")) if (plugin / node / "pages").exists() else []:
            shutil.copy(f, b / "pages" / f.name)
