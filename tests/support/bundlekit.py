"""Build small evidence bundles by hand for tests: real files in the contract's formats."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from forensics.contract import GATEWAY_FIELDS, PAGE_SCHEMA


def gw(
    request_id: str,
    room: int | None,
    account: str = "acct-x",
    status: int = 200,
    ts: str = "2026-08-29T10:00:00Z",
    decode: str = "decode-0",
    prefill: str = "prefill-0",
    **extra: Any,
) -> dict[str, Any]:
    row = {
        "ts": ts,
        "request_id": request_id,
        "account_id": account,
        "api_token_id": "tok-" + account,
        "client_ip": "203.0.113.7",
        "user_agent": "curl/8",
        "model": "glm",
        "status": status,
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "duration_ms": 10.0,
        "bootstrap_room": room,
        "prefill_node": prefill,
        "decode_node": decode,
    }
    row.update(extra)
    return row


def write_jsonl(path: Path, rows: list[Any], gz: bool = False) -> Path:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(text.encode())
    else:
        path.write_text(text)
    return path


def write_gateway_csv(path: Path, rows: list[dict[str, Any]], gz: bool = False) -> Path:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=GATEWAY_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        r = dict(r)
        if isinstance(r.get("headers"), dict):
            r["headers"] = json.dumps(r["headers"])
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in GATEWAY_FIELDS})
    path.parent.mkdir(parents=True, exist_ok=True)
    data = buf.getvalue().encode()
    if gz:
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


class Node:
    """Page events of one node, seq counting up; ts in seconds after a base time."""

    def __init__(self, name: str, seq: int = 1, t0: float = 0.0):
        self.name, self.seq, self.t = name, seq, t0
        self.rows: list[dict[str, Any]] = []

    def ev(
        self,
        op: str,
        room: int,
        start: int,
        end: int,
        t: float | None = None,
        peer: str | None = None,
        src: str | None = None,
        skip: int = 0,
    ) -> Node:
        self.seq += skip
        if t is not None:
            self.t = t
        else:
            self.t += 0.01
        sec = int(self.t)
        ms = round((self.t - sec) * 1000)
        row = {
            "node": self.name,
            "seq": self.seq,
            "ts": f"2026-08-29T10:{sec // 60:02d}:{sec % 60:02d}.{ms:03d}Z",
            "op": op,
            "room": room,
            "start": start,
            "end": end,
        }
        if peer:
            row["peer"] = peer
        if src:
            row["src"] = src
        self.rows.append(row)
        self.seq += 1
        return self


ENGINE_HEAD = (
    "[2026-08-29 09:59:00.000 TP0] server_args=ServerArgs(model_path='zai-org/GLM-5.3', context_length={ctx}, "
    "page_size={page}, tp_size=1, disaggregation_mode='{role}', disaggregation_transfer_backend='mooncake')\n"
    "[2026-08-29 09:59:00.000 TP0] KV Cache is allocated. #tokens: {pool}, KV size: 0.27 GB\n"
    "[2026-08-29 09:59:00.000 TP0] max_total_num_tokens={pool}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=8, context_len={ctx}, available_gpu_mem=10.00 GB\n"
)


def engine_log(
    bundle: Path, node: str, role: str, pool: int, ctx: int = 8192, page: int = 16, lines: list[str] = ()
) -> Path:
    path = bundle / "engine" / node / "server.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        ENGINE_HEAD.format(ctx=ctx, page=page, role=role, pool=pool) + "".join(line + "\n" for line in lines)
    )
    return path


def write_pages(bundle: Path, *nodes: Node, fmt: str = "jsonl") -> None:
    for n in nodes:
        if fmt == "parquet":
            rows = []
            from datetime import datetime

            for r in n.rows:
                r = dict(r)
                r["ts"] = datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))
                rows.append(r)
            write_parquet(bundle / "pages" / f"{n.name}.parquet", rows, PAGE_SCHEMA)
        else:
            write_jsonl(bundle / "pages" / f"{n.name}.jsonl", n.rows)
