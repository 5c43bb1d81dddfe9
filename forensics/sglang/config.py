"""Plugin settings: environment variables over a TOML file over defaults.

The plugin is inert until KVF_SGLANG_DIR is set: the entry point is registered as soon as the package
is installed, and SGLang's load_plugins() calls it in every process, so an installed but unconfigured
kv-forensics must not change a server.
"""

from __future__ import annotations

import os
import socket
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

ENV_PREFIX = "KVF_SGLANG_"


@dataclass
class Config:
    dir: str = ""  # where pages/<node>-*.{jsonl,parquet}, alerts.jsonl and metrics.prom go; "" = off
    node: str = field(default_factory=socket.gethostname)  # the bundle's node name for this engine
    format: str = "jsonl"  # jsonl or parquet
    rotate_events: int = 1_000_000  # a new file after this many events
    queue: int = 65_536  # events the writer thread may lag behind; beyond: dropped, counted, a seq gap
    flush_ms: int = 50  # how often the writer thread drains the queue
    guard: str = "observe"  # off, observe or enforce
    page_size: int = 0  # 0: taken from the allocator
    # transfer endpoint -> decode node name: "host:port", "host" (any port) or "*" (any endpoint)
    peers: dict[str, str] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.dir)

    def peer(self, host: str, port: object) -> str:
        """The bundle's node name for a transfer's destination. Mooncake's decode session is
        `endpoint:dst_port`, the port a bootstrap picks at start (mooncake/conn.py
        KVArgsRegisterInfo), so an operator can name the host before the servers start, or name the one
        decode node of a pair with "*"; an endpoint no entry names stays `host:port`."""
        endpoint = f"{host}:{port}"
        return self.peers.get(endpoint) or self.peers.get(str(host)) or self.peers.get("*") or endpoint


def load(env: dict[str, str] | None = None) -> Config:
    """KVF_SGLANG_CONFIG names a TOML file ([kv_forensics] table or top level); each field may be
    overridden by KVF_SGLANG_<FIELD> (peers as host:port=name,host=name,*=name)."""
    env = dict(os.environ) if env is None else env
    cfg = Config()
    path = env.get(ENV_PREFIX + "CONFIG")
    if path:
        data = tomllib.loads(Path(path).read_text())
        data = data.get("kv_forensics", data)
        for f in fields(Config):
            if f.name in data:
                setattr(cfg, f.name, data[f.name])
    for f in fields(Config):
        raw = env.get(ENV_PREFIX + f.name.upper())
        if raw is None:
            continue
        if f.name == "peers":
            cfg.peers = dict(p.split("=", 1) for p in raw.split(",") if "=" in p)
        elif isinstance(getattr(cfg, f.name), int):
            setattr(cfg, f.name, int(raw))
        else:
            setattr(cfg, f.name, raw)
    if cfg.format not in ("jsonl", "parquet"):
        raise ValueError(f"{ENV_PREFIX}FORMAT must be jsonl or parquet, not {cfg.format!r}")
    if cfg.guard not in ("off", "observe", "enforce"):
        raise ValueError(f"{ENV_PREFIX}GUARD must be off, observe or enforce, not {cfg.guard!r}")
    return cfg
