"""Write the evidence bundle exactly in the contract's shapes, byte-for-byte reproducibly."""

from __future__ import annotations

import csv
import gzip
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from forensics.contract import GATEWAY_FIELDS, page_table
from forensics.simulate import gateway_logs, vllm_logs
from forensics.simulate.cluster import Node
from forensics.simulate.cohorts import Cohort, exclusions_toml
from forensics.simulate.config import SimConfig
from forensics.simulate.request import Request
from forensics.simulate.truth import Row

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
GATEWAY_FILES = ["gw-a.jsonl", "gw-b.jsonl.gz", "gw-c.csv", "gw-d.parquet"]
GATEWAY_COLUMNS = list(GATEWAY_FIELDS)
_sec_cache: dict[int, str] = {}


def _sec(sec: int) -> str:
    s = _sec_cache.get(sec)
    if s is None:
        if len(_sec_cache) > 4096:
            _sec_cache.clear()
        s = _sec_cache[sec] = (EPOCH + timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
    return s


def log_ts(us: int, ms: bool) -> str:
    sec, frac = divmod(us, 1_000_000)
    return f"{_sec(sec)}.{frac // 1000:03d}" if ms else _sec(sec)


def iso_ms_z(us: int) -> str:
    sec, frac = divmod(us, 1_000_000)
    return f"{_sec(sec).replace(' ', 'T')}.{frac // 1000:03d}Z"


def iso_us(us: int, zone: str = "") -> str:
    sec, frac = divmod(us, 1_000_000)
    return f"{_sec(sec).replace(' ', 'T')}.{frac:06d}{zone}"


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def gz(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as f:
        f.write(data)
    return buf.getvalue()


def write_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd", use_dictionary=True, write_statistics=True)


def bundle_toml(cfg: SimConfig) -> str:
    # the release the nodes ran; not with the old coalesce allocator, which no release runs (its bundles
    # come out as they did before the release was simulated)
    version = "" if cfg.allocator == "coalesce" else f'version = "{cfg.release}"\n'
    if cfg.engine == "vllm":  # [engine] version names an SGLang release; vLLM's times need their year
        version = f"log_year = {datetime.fromtimestamp(cfg.start_us / 1e6, tz=UTC).year}\n"
    return (
        f'[incident]\nid = "{cfg.incident_id}"\ntitle = {json.dumps(cfg.incident_title)}\n'
        f'discovered_at = "{cfg.discovered_at}"\ncontact = "privacy@example.com"\n\n'
        f'[engine]\nlog_timezone = "UTC"\n{version}'
    ) + gateway_logs.gateway_toml(cfg)


def gateway_record(r: Request, cfg: SimConfig) -> dict[str, object]:
    rec: dict[str, object] = {
        "ts": iso_ms_z(r.t0),
        "request_id": r.request_id,
        "account_id": r.account,
        "api_token_id": r.token,
        "client_ip": r.ip,
        "user_agent": r.ua,
        "model": cfg.model,
        "status": r.status,
        "prompt_tokens": r.L,
        "completion_tokens": r.completion,
        "duration_ms": round((r.t_end - r.t0) / 1000, 1),
        "bootstrap_room": r.room,
        "prefill_node": r.prefill,
        "decode_node": r.decode,
    }
    if r.headers:
        rec["headers"] = r.headers
    if cfg.gateway_format == "kvf_noroom":  # as real gateways: the router made the room, none logged it
        rec.update(bootstrap_room=None, prefill_node=None, decode_node=None)
    return rec


def write_gateway(root: Path, reqs: list[Request], cfg: SimConfig) -> None:
    parts: list[list[dict[str, object]]] = [[] for _ in GATEWAY_FILES]
    times: list[list[int]] = [[] for _ in GATEWAY_FILES]
    for r in sorted(reqs, key=lambda x: (x.t0, x.request_id)):
        parts[r.gw].append(gateway_record(r, cfg))
        times[r.gw].append(r.t0 // 1000)
    for name, recs, ts in zip(GATEWAY_FILES, parts, times, strict=True):
        path = root / "gateway" / name
        if name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
            data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in recs).encode()
            write_bytes(path, gz(data) if name.endswith(".gz") else data)
        elif name.endswith(".csv"):
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(GATEWAY_COLUMNS)
            for x in recs:
                hdr = x.get("headers")
                w.writerow([x[c] for c in GATEWAY_COLUMNS[:-1]] + [json.dumps(hdr) if hdr else ""])
            write_bytes(path, buf.getvalue().encode())
        else:
            cols: dict[str, list[object]] = {c: [] for c in GATEWAY_COLUMNS}
            for x in recs:
                for c in GATEWAY_COLUMNS:
                    v = x.get(c)
                    cols[c].append(json.dumps(v) if c == "headers" and v else (None if c == "headers" else v))
            arrays = {
                c: pa.array(
                    v,
                    type=pa.int64()
                    if c in ("status", "prompt_tokens", "completion_tokens", "bootstrap_room")
                    else None,
                )
                for c, v in cols.items()
                if c != "ts"
            }
            table = pa.table({"ts": pa.array(ts, type=pa.timestamp("ms", tz="UTC")), **arrays})
            write_parquet(path, table)


def startup_messages(
    role: str,
    pool_tokens: int,
    model_path: str,
    context_len: int,
    page_size: int,
    tp_size: int = 1,
    max_running_requests: int = 64,
) -> list[str]:
    """The start-up lines a node logs (server args, the loaded weights, the KV pool, the scheduler's limits):
    the simulator's nodes and the page-event bundles of `simulate --scale --page-events` (simulate/pages)."""
    kv_gb = pool_tokens * 74_752 / 2**30  # GLM MLA-style KV bytes per token (illustrative)
    return [
        f"server_args=ServerArgs(model_path='{model_path}', context_length={context_len}, "
        f"page_size={page_size}, tp_size={tp_size}, disaggregation_mode='{role}', "
        "disaggregation_transfer_backend='mooncake')",
        "Load weight end. elapsed=41.27 s, type=GlmMoeDsaForCausalLM, avail mem=62.40 GB, mem usage=77.12 GB.",
        f"KV Cache is allocated. #tokens: {pool_tokens}, KV size: {kv_gb:.2f} GB",
        f"max_total_num_tokens={pool_tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={max_running_requests}, context_len={context_len}, available_gpu_mem=9.87 GB",
    ]


def node_startup(node: Node, cfg: SimConfig, t0_node: int) -> list[tuple[int, str]]:
    s = node.spec
    msgs = startup_messages(s.role, s.pool_tokens, cfg.model_path, cfg.context_len, cfg.page_size)
    return [(t0_node, m) for m in msgs]


def server_log(lines: list[tuple[int, str]], log_ms: bool, rank_prefix: str) -> str:
    """server.log's lines: SGLang's record prefix (the time, to the ms or the s, and the rank) and the message."""
    return "".join(f"[{log_ts(t, log_ms)} {rank_prefix}] {msg}\n" for t, msg in lines)


def write_engine(
    root: Path, nodes: dict[str, Node], cfg: SimConfig, headers: dict[int, dict[str, str]] | None = None
) -> None:
    """headers: room -> the request headers the engines' request logs record (gateway_logs.engine_headers)."""
    t_start = cfg.start_us - 600_000_000
    for name in sorted(nodes):
        node = nodes[name]
        s = node.spec
        lines = node_startup(node, cfg, node.clock(t_start)) + node.lines
        text = server_log(lines, s.log_ms, s.rank_prefix)
        write_bytes(root / "engine" / name / "server.log", text.encode())
        out = []
        for t, j in node.jsonl:
            rec: dict[str, object] = {
                "timestamp": iso_us(t),
                "event": "request.finished",
                "rid": j["rid"],
                "obj": {"rid": j["rid"], "bootstrap_room": j["room"], "bootstrap_port": 8998},
            }
            if headers is not None and j["room"] in headers:
                rec["headers"] = headers[j["room"]]
            rec["out"] = {
                "meta_info": {
                    "id": j["rid"],
                    "finish_reason": j["finish_reason"],
                    "prompt_tokens": j["prompt_tokens"],
                    "completion_tokens": j["completion_tokens"],
                    "cached_tokens": j["cached_tokens"],
                    "e2e_latency": j["e2e_latency"],
                }
            }
            out.append(json.dumps(rec) + "\n")
        write_bytes(root / "engine" / name / "requests.jsonl", "".join(out).encode())


def write_pages(root: Path, node: Node, rows: list[Row]) -> None:
    if node.spec.pages_format == "jsonl":
        out = []
        head = f'{{"node": {json.dumps(node.name)}, "seq": '
        for _n, seq, ts, op, room, a, b, peer, src, _d in rows:
            tail = (f', "peer": {json.dumps(peer)}' if peer is not None else "") + (
                f', "src": {json.dumps(src)}' if src is not None else ""
            )
            out.append(
                f'{head}{seq}, "ts": "{iso_us(ts, "Z")}", "op": "{op}", "room": {room}, "start": {a}, '
                f'"end": {b}{tail}}}\n'
            )
        write_bytes(root / "pages" / f"{node.name}.jsonl", "".join(out).encode())
        return
    table = page_table(node.name, [r[1:9] for r in rows])
    write_parquet(root / "pages" / f"{node.name}.parquet", table)


def write_bundle(
    root: Path,
    cfg: SimConfig,
    reqs: list[Request],
    nodes: dict[str, Node],
    kept_rows: dict[str, list[Row]],
    cohorts: list[Cohort],
    rows: list[Row] | None = None,
) -> None:
    """rows: every page event of the run, those the bundle lost too (vLLM's logs name the blocks)."""
    write_bytes(root / "bundle.toml", bundle_toml(cfg).encode())
    write_bytes(root / "exclusions.toml", exclusions_toml(cohorts).encode())
    if cfg.gateway_format in ("kvf", "kvf_noroom"):
        write_gateway(root, reqs, cfg)
        gateway_logs.write_ids(root, None)
    else:
        gateway_logs.write_gateway_format(root, cfg, reqs, nodes)
    if cfg.engine == "vllm":
        for name, text in vllm_logs.server_logs(nodes, cfg, reqs, rows or []).items():
            write_bytes(root / "engine" / name / "server.log", text.encode())
    else:
        write_engine(root, nodes, cfg, gateway_logs.engine_headers(cfg, reqs))
    for name in sorted(nodes):
        if nodes[name].spec.telemetry:
            write_pages(root, nodes[name], kept_rows[name])
