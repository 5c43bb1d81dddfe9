"""What the simulator's writers of the formats share: what a writer is handed, what it gives back, id
digests, log-file order and time text.

A writer is handed plain data: the simulated config and requests as the Protocols below (the simulator's
SimConfig and Request fit them; this package cannot import the simulator, which only the CLI may), and
the engines' request-log records by room. It writes what its tool would have written for the same client
requests and nothing the tool could not know: no format logs bootstrap_room, prefill_node or
decode_node. Field sets, names, order and value shapes follow the sources cited at each writer (check
them against the version you target); each format's module says which key it leaves for the join.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

ROUTE = "/v1/chat/completions"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SimSettings(Protocol):
    """The simulated run's settings a writer reads (forensics.simulate.config.SimConfig)."""

    seed: int
    model: str  # the served model name (what clients ask for)
    model_path: str  # the model's path (what the engines load)
    start_us: int


@runtime_checkable
class SimText(Protocol):
    """A request's simulated texts (forensics.simulate.texts.Text)."""

    @property
    def system(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def response(self) -> str: ...  # "" when the request was not served


class SimRequest(Protocol):
    """One simulated client request as a writer reads it (forensics.simulate.request.Request): times in
    µs on the true clock, L its prompt tokens, rid_d the decode node's rid of it."""

    idx: int
    request_id: str
    t0: int
    t_end: int
    status: int
    account: str
    token: str
    ip: str
    ua: str
    headers: dict[str, str] | None
    L: int
    completion: int
    room: int
    rid_d: str
    extra: dict[str, object]  # "text": its SimText, with --texts


# the engines' request-log records of a room: (node, role, node-clock µs, record)
EngineRecords = dict[int, list[tuple[str, str, int, dict[str, Any]]]]


@dataclass
class Rendered:
    files: dict[str, bytes] = field(default_factory=dict)  # name under gateway/ -> bytes
    ids: list[tuple[str, ...]] | None = None  # truth/gateway_ids.csv rows, header first (None: not written)


# a format's writer: the settings, the requests and the engines' records (which only OTLP reads)
Writer = Callable[[SimSettings, Sequence[SimRequest], EngineRecords], Rendered]


def log_ts(us: int, ms: bool) -> str:
    """UTC 'YYYY-MM-DD HH:MM:SS[.mmm]' (ms truncated), as forensics.simulate.writer.log_ts (which this
    package cannot import)."""
    sec, frac = divmod(us, 1_000_000)
    text = (_EPOCH + timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{frac // 1000:03d}" if ms else text


def iso_ms_z(us: int) -> str:
    """RFC 3339 UTC with ms, as the spec's gateway ts (forensics.simulate.writer.iso_ms_z)."""
    return log_ts(us, True).replace(" ", "T") + "Z"


def digest(cfg: SimSettings, *parts: str) -> bytes:
    return hashlib.sha256("\x1f".join((str(cfg.seed), *parts)).encode()).digest()


def uuid4_of(cfg: SimSettings, *parts: str) -> str:
    return str(uuid.UUID(bytes=digest(cfg, *parts)[:16], version=4))


def hex_of(cfg: SimSettings, n: int, *parts: str) -> str:
    return digest(cfg, *parts).hex()[:n]


def succeeded(r: SimRequest) -> bool:
    return 200 <= r.status < 300


def by_end(reqs: Iterable[SimRequest]) -> list[SimRequest]:
    """Loggers write when a request completes: the order of a log file."""
    return sorted(reqs, key=lambda r: (r.t_end, r.request_id))


def text_of(r: SimRequest) -> SimText | None:
    t = r.extra.get("text")
    return t if isinstance(t, SimText) else None
