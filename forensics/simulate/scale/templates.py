"""The scale generator's templates: every line kind of a scale bundle as a compiled program, each split
out of a render of the one place its format is written, with sentinel values: the record prefix, the
start-up lines and the request.finished records from forensics.simulate.writer (here), the SGLang
messages from forensics.simulate.sglang_lines and the batch lines from forensics.simulate.batch_lines
(scale/messages.py), the gateway lines from forensics.gateway_formats (scale/gateway.py). A second
render with other sentinels must rebuild exactly (render.split_template), so no field is left constant
by mistake."""

from __future__ import annotations

import hashlib
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from forensics.engines.sglang import max_req_input_len
from forensics.gateway_formats import litellm
from forensics.gateway_formats import litellm_spendlogs as spendlogs
from forensics.simulate import writer
from forensics.simulate.config import NodeSpec, S, SimConfig, build_config
from forensics.simulate.request import CUSTOMER_UAS, HOSTILE_UAS
from forensics.simulate.scale.options import DAY, NO_PREFIX_RELEASES, ROUTES, START, Scale
from forensics.simulate.scale.render import (
    HEX,
    INT,
    LIT,
    REPR,
    TS,
    TS_ISO_US,
    TS_LOG,
    TS_LOG_MS,
    Op,
    Pool,
    Programs,
    split_template,
    sub_slots,
)


class Bundle:
    """Templates, tables and streams of one bundle (scale.bundle adds the messages' and gateways' programs)."""

    W = 15  # data columns of a line row (after stream, ts, seq, prog)

    def __init__(self, a: Scale) -> None:
        self.a = a
        self.cfg: SimConfig = build_config(
            "incident",
            requests=a.requests,
            seed=a.seed,
            prefill_count=a.prefill_nodes,
            decode_count=a.decode_nodes,
            batch_lines=a.release,
            release=a.release if a.release != "0.4.9" else "0.5.4",
            start_us=int(datetime.fromisoformat(START).timestamp()) * S,
            duration_us=a.days * DAY,
            gateway_format="envoy" if a.gateway == ("envoy",) else "litellm_spendlogs",
        )
        end = self.cfg.start_us + self.cfg.duration_us
        disc = datetime.fromisoformat(self.cfg.discovered_at.replace("Z", "+00:00"))
        if disc.timestamp() * S < end:
            self.cfg.discovered_at = datetime.fromtimestamp(end / S + 300, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.specs: list[NodeSpec] = self.cfg.prefill_nodes + self.cfg.decode_nodes
        self.P, self.D = len(self.cfg.prefill_nodes), len(self.cfg.decode_nodes)
        self.NN = self.P + self.D
        self.offsets = np.array([s.clock_offset_us for s in self.specs], dtype=np.int64)
        self.text_nodes = self._text_nodes(a.text_nodes)
        self.pool = Pool()
        self.progs = Programs(self.pool)
        self.limit_p = max_req_input_len(self.cfg.context_len, self.cfg.prefill_nodes[0].pool_tokens)
        self.prefixed = a.release not in NO_PREFIX_RELEASES
        self._tables()
        self._prefix_cache = {n: self._prefix(n) for n in range(self.NN)}
        self.prog: dict[tuple[Any, ...], int] = {}
        self._build_json()

    def _text_nodes(self, spec: str) -> set[int]:
        names = [s.name for s in self.specs]
        if spec == "none":
            return set()
        if spec == "all":
            return set(range(self.NN))
        if spec == "odd-decode":
            return {self.P + i for i in range(self.D) if i % 2 == 1}
        out = set()
        for n in spec.split(","):
            if n.strip() not in names:
                raise ValueError(f"--text-nodes: no node {n.strip()!r} (nodes: {', '.join(names)})")
            out.add(names.index(n.strip()))
        return out

    # --- accounts and their tables -------------------------------------------------------------
    def _tables(self) -> None:
        a, rng = self.a, np.random.default_rng([self.a.seed, 0xACC])
        n = a.accounts
        names = [f"acct-{x:06x}" for x in rng.choice(1 << 24, size=n, replace=False)]
        self.acct_w = np.cumsum(1.0 / (np.arange(n) + 10.0) ** 1.1)
        self.acct_w /= self.acct_w[-1]
        uas = list(CUSTOMER_UAS) + list(HOSTILE_UAS)
        self.acct_ua = np.array(
            [
                len(CUSTOMER_UAS) + k % len(HOSTILE_UAS) if k % 9 == 4 else int(rng.integers(len(CUSTOMER_UAS)))
                for k in range(n)
            ],
            dtype=np.int64,
        )
        ips = [
            f"2001:db8:{rng.integers(1, 0xFFFF):x}::{rng.integers(1, 0xFFFF):x}"
            if rng.random() < 0.2
            else f"203.0.{rng.integers(0, 256)}.{rng.integers(1, 255)}"
            for _ in range(n)
        ]
        self.acct_ntok = rng.integers(1, 3, size=n)
        toks = [f"tok-{x:08x}" for x in rng.choice(1 << 32, size=2 * n, replace=False)]
        share = a.litellm_share if len(a.gateway) == 2 else (1.0 if a.gateway == ("litellm",) else 0.0)
        self.acct_route = (rng.random(n) >= share).astype(np.int64)  # 0 litellm, 1 envoy
        self.t_acct = self.pool.table(names)
        self.t_ip = self.pool.table(ips)
        self.t_tok = self.pool.table(toks).reshape(n, 2)
        self.t_keyh = self.pool.table([hashlib.sha256(t.encode()).hexdigest() for t in toks]).reshape(n, 2)
        self.t_ua_env = self.pool.table([json.dumps(u, ensure_ascii=False)[1:-1] for u in uas])
        self.t_tags = self.pool.table([spendlogs.pg_csv(spendlogs.jsonb(litellm.ua_tags(u))) for u in uas])
        self.t_host = self.pool.table([f"10.20.1.{10 + p}" for p in range(self.P)])
        m = self.progs.table_max
        for col, texts in (
            ("acct", names),
            ("ip", ips),
            ("tok", toks),
            ("keyh", ["x" * 64]),
            ("host", ["x" * 12]),
            ("ua_env", [json.dumps(u, ensure_ascii=False)[1:-1] for u in uas]),
            ("tags", [spendlogs.pg_csv(spendlogs.jsonb(litellm.ua_tags(u))) for u in uas]),
        ):
            m[col] = max(len(t.encode()) for t in texts)

    # --- templates -----------------------------------------------------------------------------
    def cols(self, names: list[str]) -> dict[str, int]:
        assert len(names) <= self.W, names
        return {"ts": 1, **{n: 4 + i for i, n in enumerate(names)}}

    def _prefix(self, node: int) -> list[tuple[str, Any]]:
        """The record prefix of a node's server.log lines, as writer.write_engine writes it, with a slot
        `msg` (and `ts`, the line's own time)."""
        spec = self.specs[node]
        t = (1_787_801_234_567_891, 1_788_123_456_789_012)
        msgs = ("ZQMSGZQA", "ZQMSGZQB")

        def render(k: int) -> str:
            return engine_files(self.cfg, spec, [(t[k], msgs[k])], [], None)[0].splitlines(keepends=True)[-1]

        return split_template(
            render, {"ts": (writer.log_ts(t[0], spec.log_ms), writer.log_ts(t[1], spec.log_ms)), "msg": msgs}
        )

    def _ts_slot(self, node: int) -> list[Op]:
        return [(TS, "ts", TS_LOG_MS if self.specs[node].log_ms else TS_LOG)]

    def engine_prog(
        self, node: int, msg: list[tuple[str, Any]], slots: dict[str, list[Op]], cols: list[str], prefixed: bool = True
    ) -> int:
        if prefixed:
            parts = sub_slots(self._prefix_cache[node], "msg", msg)
        elif self.prefixed:  # the tokenizer process of 0.4.9-0.5.4: the prefix without a rank
            parts = [("lit", "["), ("slot", "ts"), ("lit", "] "), *msg, ("lit", "\n")]
        else:
            parts = [*msg, ("lit", "\n")]
        return self.progs.add(parts, {"ts": self._ts_slot(node), **slots}, self.cols(cols))

    def _build_json(self) -> None:
        """request.finished records as writer.write_engine writes them (one sentinel record per shape)."""
        t = (1_787_801_234_567_891, 1_788_123_456_789_012)
        rid = ("f00dfeedf00dfeedf00dfeedf00dfeed", "beefcafebeefcafebeefcafebeefcafe")
        room, P, C, K, E = (
            (6660000000000000001, 5550000000000000002),
            (73100019, 84200027),
            (5300041, 6400053),
            (4100039, 3200023),
            (123.4567, 234.5671),
        )
        rq = ("zqreqzqa", "zqreqzqb")
        slots = {
            "ts": (writer.iso_us(t[0]), writer.iso_us(t[1])),
            "rid": rid,
            "room": (str(room[0]), str(room[1])),
            "P": (str(P[0]), str(P[1])),
            "C": (str(C[0]), str(C[1])),
            "K": (str(K[0]), str(K[1])),
            "E": (json.dumps(E[0]), json.dumps(E[1])),
            "rq": rq,
        }
        ops = {
            "ts": [(TS, "ts", TS_ISO_US)],
            "rid": [(HEX, "rid_hi", 16), (HEX, "rid_lo", 16)],
            "room": [(INT, "room", 0)],
            "P": [(INT, "P", 0)],
            "C": [(INT, "C", 0)],
            "K": [(INT, "K", 0)],
            "E": [(REPR, "E", 4)],
            "rq": [(LIT, "req-", 0), (HEX, "rq", 16)],
        }
        cols = self.cols(["rid_hi", "rid_lo", "room", "P", "C", "K", "E", "rq"])
        shapes = {
            "p": ({"type": "length", "length": 1}, True, 1),
            "ph": ({"type": "length", "length": 0}, False, 1),
            "stop": ({"type": "stop", "matched": 151329}, True, None),
            "len": (None, True, None),
            "abort": ({"type": "abort", "message": "Aborted by AbortReq."}, True, 0),
        }
        spec = self.specs[0]
        for fr, (reason, p_slot, c_fixed) in shapes.items():
            for hdr in (False, True):

                def render(k: int, fr=fr, reason=reason, p_slot=p_slot, c_fixed=c_fixed, hdr=hdr) -> str:
                    j = {
                        "rid": rid[k],
                        "room": room[k],
                        "prompt_tokens": P[k] if p_slot else 1,
                        "completion_tokens": C[k] if c_fixed is None else c_fixed,
                        "cached_tokens": K[k],
                        "finish_reason": reason or {"type": "length", "length": C[k]},
                        "e2e_latency": E[k],
                    }
                    headers = {room[k]: {"x-request-id": rq[k]}} if hdr else None
                    return engine_files(self.cfg, spec, [], [(t[k], j)], headers)[1]

                parts = split_template(render, slots)
                self.prog["json", fr, hdr] = self.progs.add(parts, ops, cols)

    # --- streams -------------------------------------------------------------------------------
    # stream ids: n (server.log of node n), NN + n (requests.jsonl of node n), 2NN (LiteLLM), 2NN + 1 (Envoy)
    def stream_name(self, s: int) -> str:
        if s < 2 * self.NN:
            return f"{self.specs[s % self.NN].name}/{'server.log' if s < self.NN else 'requests.jsonl'}"
        return ROUTES[s - 2 * self.NN]

    def path(self, s: int, day: int) -> str:
        """The file (relative to the bundle) that holds stream s's lines of `day` (0: the first)."""
        last = self.a.days - 1
        rot = self.a.rotation
        date = (datetime.fromisoformat(START) + timedelta(days=day)).strftime("%Y%m%d")
        if s == 2 * self.NN:
            return "gateway/litellm/spend_logs.csv"
        if s == 2 * self.NN + 1:
            return (
                "gateway/envoy/access.jsonl" if day >= last or rot == "none" else f"gateway/envoy/access-{date}.jsonl"
            )
        node = self.specs[s % self.NN].name
        stem, ext = ("server", ".log") if s < self.NN else ("requests", ".jsonl")
        if day >= last or rot == "none":
            return f"engine/{node}/{stem}{ext}"
        if rot == "dateext":
            return f"engine/{node}/{stem}-{date}{ext}"
        return f"engine/{node}/{stem}{ext}.{last - day}" + (".gz" if rot == "numbered-gz" else "")


class FakeNode:
    """What writer.write_engine reads of a simulated node."""

    def __init__(self, spec: NodeSpec, lines: list[tuple[int, str]], jsonl: list[tuple[int, dict[str, object]]]):
        self.spec, self.name, self.lines, self.jsonl = spec, spec.name, lines, jsonl

    def clock(self, t: int) -> int:
        return t + self.spec.clock_offset_us


def engine_files(
    cfg: SimConfig,
    spec: NodeSpec,
    lines: list[tuple[int, str]],
    jsonl: list[tuple[int, dict[str, object]]],
    headers: dict[int, dict[str, str]] | None,
) -> tuple[str, str]:
    """writer.write_engine's server.log and requests.jsonl for one node."""
    with tempfile.TemporaryDirectory() as tmp:
        writer.write_engine(Path(tmp), {spec.name: FakeNode(spec, lines, jsonl)}, cfg, headers)  # type: ignore[dict-item]
        d = Path(tmp) / "engine" / spec.name
        return (d / "server.log").read_text(), (d / "requests.jsonl").read_text()
