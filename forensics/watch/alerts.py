"""The watcher's alerts and the state they are decided on: an Alert (its evidence lines, cut to
EVIDENCE_CHARS), what the lines so far say of a room (Room) and of a node's start-up (NodeFacts), both kept
in the state file, and what each rule's alert says (its summary and evidence). forensics.watch.detector
decides when a rule fires."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from forensics.engines.sglang import landing_offset, max_req_input_len

EVIDENCE_CHARS = 500


@dataclass
class Alert:
    kind: str
    node: str
    room: int | None
    request_ids: list[str]
    evidence: list[dict[str, Any]]  # {file, line, text}, the lines that make the alert
    log_time: str | None  # the deciding line's time (UTC, on its node's clock)
    detected_at: str = ""
    summary: str = ""
    # with watch --gateway: the gateway record that names the room (None while no record names it)
    gateway_request_id: str | None = None
    account_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def iso(ts: datetime | None) -> str | None:
    return ts.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z") if ts else None


def evidence(path: str, line: int, raw: bytes) -> dict[str, Any]:
    return {"file": path, "line": line, "text": raw.decode("utf-8", "replace").rstrip("\r\n")[:EVIDENCE_CHARS]}


@dataclass
class Room:
    """What the lines seen so far say of one room (JSON-serializable for the state file)."""

    placeholder: list[dict[str, Any]] = field(default_factory=list)  # prefill's evidence of a 1-token prompt
    prefill_node: str | None = None
    prefill_done: float | None = None  # prefill's Req Time Stats time (epoch s, its clock): transfer done
    prefill_ev: dict[str, Any] | None = None
    prefill_res: float = 0.001  # the prefill line's time resolution (s)
    decode: dict[str, Any] | None = None  # decode's full-length line
    decode_node: str | None = None
    decode_input: int | None = None
    decode_done: bool = False
    aborted: dict[str, Any] | None = None  # decode's transfer-failed line
    abort_ts: float | None = None
    rids: list[str] = field(default_factory=list)
    last_seen: float = 0.0

    def bound_offset(self, offsets: dict[str, list[float]], r: dict[str, Any], t_end: float, res: float) -> None:
        """A room both nodes finished bounds their clocks' offset in `offsets` ("prefill\tdecode" -> [lo, hi]
        of prefill minus decode clock; landing_offset, as node_lifecycle.sql: a decode line without both
        durations gives no landing)."""
        fwd, queue = r.get("forward_s"), r.get("queue_s")
        if self.prefill_done is None or self.prefill_node is None or fwd is None or queue is None:
            return
        lo, hi = landing_offset(self.prefill_done, self.prefill_res, t_end - fwd - queue, res)
        key = f"{self.prefill_node}\t{self.decode_node}"
        cur = offsets.get(key)
        offsets[key] = [lo, hi] if cur is None else [max(cur[0], lo), min(cur[1], hi)]

    def landing_hi(self, offsets: dict[str, list[float]]) -> float:
        """The latest the room's transfer may have landed, on the decode node's clock (inf: unknown)."""
        bounds = offsets.get(f"{self.prefill_node}\t{self.decode_node}")
        if self.prefill_done is None or bounds is None or bounds[0] > bounds[1]:
            return float("inf")  # no finished room bounds the clocks yet, or their bounds disagree
        return self.prefill_done + self.prefill_res - bounds[0]


@dataclass
class NodeFacts:
    role: str | None = None
    pool: int | None = None  # the pool rule's (forensics.engines.sglang.node_pool) over `stated`
    context: int | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    # rank ("" without one) -> the first value of each of POOL_SOURCES its lines stated
    stated: dict[str, list[int | None]] = field(default_factory=dict)


def pool_alert(node: str, facts: NodeFacts) -> Alert:
    """pool_smaller_than_context: the node's pool and context length, with the lines that stated them."""
    assert facts.pool is not None and facts.context is not None
    return Alert(
        "pool_smaller_than_context", node, None, [], list(facts.evidence), None,
        summary=f"{node}: the KV pool holds {facts.pool} tokens, the context length is "
        f"{facts.context}: a prompt of {max_req_input_len(facts.context, facts.pool)} tokens or "
        "more cannot fit, and a prefill server replaces it with a 1-token placeholder",
    )  # fmt: skip


def placeholder_alert(room: int, s: Room) -> Alert:
    """placeholder_signature: prefill's placeholder lines and decode's full-length line."""
    assert s.decode is not None
    return Alert(
        "placeholder_signature", s.decode_node or "", room, list(s.rids), [*s.placeholder, s.decode],
        iso(datetime.fromtimestamp(s.last_seen, UTC)),
        summary=f"room {room}: prefill ({s.prefill_node}) ran a 1-token placeholder, decode ({s.decode_node}) "
        f"ran {s.decode_input} tokens: the response is decoded over KV its request never wrote",
    )  # fmt: skip


def late_alert(room: int, s: Room) -> Alert:
    """late_transfer: decode's transfer-failed line and prefill's line that the transfer was done."""
    assert s.aborted is not None and s.prefill_ev is not None
    assert s.prefill_done is not None and s.abort_ts is not None
    return Alert(
        "late_transfer", s.decode_node or "", room, list(s.rids), [s.aborted, s.prefill_ev],
        iso(datetime.fromtimestamp(max(s.prefill_done, s.abort_ts), UTC)),
        summary=f"room {room}: decode ({s.decode_node}) gave its pages back at a transfer failure, and "
        f"the transfer from prefill ({s.prefill_node}) may have landed after that (the clocks' bounds do not "
        "put it before): the write may land in pages another request holds",
    )  # fmt: skip
