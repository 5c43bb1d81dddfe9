"""Watch, detection: engine log lines fed one at a time, alerts out.

Each line is parsed by the same functions `investigate` reads whole files with
(forensics.engines.sglang.reader: READER, SGLang's line reader), and the rules are the signatures the
findings use, applied as soon as their last line arrives:
- placeholder_signature: prefill replaced the prompt with one token (its over-length line for the rid,
  or input length 1 for the room) and decode ran the same room at its full length: the response is
  decoded over KV its request never wrote (findings/queries/signature_responses.sql);
- late_transfer: decode gave an aborted room's pages back (`Decode transfer failed`), and prefill's
  transfer of that room may have landed after that: its landing (the prefill's Req Time Stats line,
  moved onto the decode node's clock) is not provably before the abort. As in node_lifecycle.sql, each
  room both nodes finished bounds the two clocks' offset (prefill minus decode) by the one rule
  forensics.engines.sglang.landing_offset (t_land = decode's line time less its forward and queue
  durations; the lines' resolutions and the durations' rounding widen it), and the offset lies in every
  such room's bounds, as far as the rooms finished so far give them (the findings take every room of
  the bundle). Until a finished room bounds it, or while the rooms' bounds disagree (the clocks
  drifted; the findings then take the wider of the two orders), the offset is unknown and the landing
  may be late: a live alert errs towards alerting. The write may land in pages another request holds
  (findings/queries/late_write_responses.sql);
- pool_smaller_than_context: a server's KV pool (the pool rule of forensics.engines.sglang, as ingest's
  node_config and the audit take it) holds fewer tokens than its context length, so a full-context
  request cannot fit (forensics.engines.sglang.max_req_input_len; forensics.audit);
- exposure (page events, forensics.watch.pages): a read of slots another room wrote;
- the engines' integrity lines, each at once (forensics.watch.integrity): canary_violation,
  checksum_mismatch, nixl_failure, nixl_expired, mooncake_failure.
Alerts are deduplicated per (kind, room), per (kind, node) for the start-up check. A room is forgotten
once both sides are done with it, or an hour of log time after its last line: memory stays bounded by
the rooms in flight.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any
from zoneinfo import ZoneInfo

from forensics.engines.facts import EngineRows
from forensics.engines.sglang import POOL_SOURCES, SHAPES, node_pool, rank_pool
from forensics.engines.sglang.reader import READER
from forensics.watch import chunks
from forensics.watch import integrity as integrity_lines
from forensics.watch.alerts import (
    Alert,
    NodeFacts,
    Room,
    evidence,
    iso,
    late_alert,
    placeholder_alert,
    pool_alert,
)
from forensics.watch.engines import NodeEngines, OtherReader

# the line shapes the rules read (a cheap test before the parser: most lines of a busy server are batch
# logs), found by their literals (forensics.engines.sglang.SHAPES); investigate reads every shape
WATCHED_SHAPES = ("time_stats", "overlength", "transfer_failed", "server_args", "swa_pools", "kv_pool", "max_total")
TEXT_LITERALS = tuple(lit.encode() for k in WATCHED_SHAPES for lit in SHAPES[k].literals)
TEXT_MARKERS = re.compile(b"|".join(re.escape(lit) for lit in TEXT_LITERALS))
JSON_MARKER = b'"request.finished"'
JSON_LITERALS = (JSON_MARKER,)
JSON_MARKER_RE = re.compile(re.escape(JSON_MARKER))


KINDS = ("placeholder_signature", "late_transfer", "pool_smaller_than_context", "exposure", *integrity_lines.KINDS)
ROOM_TTL_S = 3600.0
CLOSED_KEPT = 20_000  # log-time seconds after its last line that an unfinished room is kept


class Detector:
    def __init__(self, tz: ZoneInfo = ZoneInfo("UTC"), year: int | None = None) -> None:
        self.tz = tz
        self.engines = NodeEngines(year)  # the engine of each node: the reader of its lines
        self.nodes: dict[str, NodeFacts] = {}
        self.rooms: dict[int, Room] = {}
        self.overlength: dict[str, dict[str, Any]] = {}  # "node\trid" -> the over-length line (no room yet)
        self.alerted: dict[str, float] = {}  # "kind\troom|node" -> log time: the dedupe set
        self.offsets: dict[str, list[float]] = {}  # "prefill\tdecode" -> [lo, hi] of prefill minus decode clock
        self.clock = 0.0  # the latest log time seen (epoch s)
        # rooms closed lately: a room's other lines (its JSON record beside its text line) come after it
        # closed, and must not open it again; the oldest are dropped past CLOSED_KEPT
        self.closed: dict[int, None] = {}

    # ---- state file --------------------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        return {
            "nodes": {n: asdict(f) for n, f in self.nodes.items()},
            "rooms": {str(r): asdict(s) for r, s in self.rooms.items()},
            "overlength": self.overlength,
            "alerted": self.alerted,
            "offsets": self.offsets,
            "closed": list(self.closed),
            "clock": self.clock,
            "engines": self.engines.decided,
        }

    def load(self, data: dict[str, Any]) -> None:
        self.nodes = {n: NodeFacts(**f) for n, f in data.get("nodes", {}).items()}
        self.rooms = {int(r): Room(**s) for r, s in data.get("rooms", {}).items()}
        self.overlength = dict(data.get("overlength", {}))
        self.alerted = dict(data.get("alerted", {}))
        self.offsets = {k: list(v) for k, v in data.get("offsets", {}).items()}
        self.closed = dict.fromkeys(int(r) for r in data.get("closed", []))
        self.clock = float(data.get("clock", 0.0))
        self.engines.decided = dict(data.get("engines", {}))

    # ---- feeding -----------------------------------------------------------------------------------

    def feed(self, node: str, path: str, lineno: int, raw: bytes, jsonl: bool) -> list[Alert]:
        """One line of `path` (relative to the watched folder) on `node`: the alerts it completes."""
        other = self.engines.of(node, raw)  # once: an undecided node counts the bytes it searched
        if not jsonl and integrity_lines.holds_one(raw):
            return self._integrity(node, path, lineno, raw, other)
        if (JSON_MARKER not in raw) if jsonl else (TEXT_MARKERS.search(raw) is None):
            if other is None or other.markers.search(raw) is None:
                return []
        rows = EngineRows()
        parse = other.read if other is not None else READER.json if jsonl else READER.text
        if not parse(raw, node, 0, lineno, self.tz, rows):
            return []
        res_ms = rows.lines[0].get("ts_resolution_ms") if rows.lines else None
        return self.apply(node, path, lineno, raw, rows.requests, rows.config, res_ms)

    def feed_chunk(self, node: str, path: str, before: int, data: bytes, jsonl: bool) -> list[Alert]:
        """A run of whole lines of `path` (`before` lines precede it): the alerts its lines complete, the
        candidate lines typed in bulk (forensics.watch.chunks), or one by one with KVF_WATCH_READER=python."""
        if (other := self.engines.of(node, data)) is not None:  # another engine's lines (forensics.watch.engines)
            lines = chunks.per_line(data, before, other.markers, jsonl, self.tz, other.read)
        elif chunks.READER == "python":
            lines = chunks.per_line(data, before, JSON_MARKER_RE if jsonl else TEXT_MARKERS, jsonl, self.tz)
        else:
            lines = chunks.typed(data, before, jsonl, self.tz, JSON_LITERALS if jsonl else TEXT_LITERALS)
        out: list[Alert] = []
        for lineno, raw, requests, config, res_ms in lines:
            out += self.apply(node, path, lineno, raw, requests, config, res_ms)
        if not jsonl and integrity_lines.holds_one(data):
            for lineno, raw in integrity_lines.lines(data, before):
                out += self._integrity(node, path, lineno, raw, other)
        return out

    def _integrity(self, node: str, path: str, lineno: int, raw: bytes, other: OtherReader | None) -> list[Alert]:
        """An integrity line's alert, once per what it names (forensics.watch.integrity), read by the node's
        engine's reader (`other`: another engine's, else SGLang's and the transfer libraries' table)."""
        out: list[Alert] = []
        for r in integrity_lines.rows_of(raw, node, lineno, self.tz, other.read if other is not None else None):
            key = integrity_lines.dedupe_key(r)
            if key in self.alerted:
                continue
            ts = r.get("ts")
            self.alerted[key] = ts.timestamp() if ts else self.clock
            rid = r.get("request_id")
            out.append(
                Alert(r["kind"], node, r.get("room"), [rid] if rid else [], [evidence(path, lineno, raw)], iso(ts),
                      summary=integrity_lines.summary(r))
            )  # fmt: skip
        return out

    def apply(
        self, node: str, path: str, lineno: int, raw: bytes, requests: list[dict[str, Any]],
        config: list[dict[str, Any]], res_ms: int | None,
    ) -> list[Alert]:  # fmt: skip
        """A parsed line's rows (its request and config rows, its time resolution): the alerts they complete."""
        if not requests and not config:
            return []
        ev = evidence(path, lineno, raw)
        out: list[Alert] = []
        for c in config:
            out += self._config(node, c, ev)
        res = (res_ms or 1) / 1000.0
        for r in requests:
            ts = r.get("ts")
            t = ts.timestamp() if ts else self.clock
            self.clock = max(self.clock, t)
            out += self._request(node, r, ev, t, res)
        return out

    def _config(self, node: str, c: dict[str, Any], ev: dict[str, Any]) -> list[Alert]:
        facts = self.nodes.setdefault(node, NodeFacts())
        if c.get("role") and c["role"] != "null":
            facts.role = c["role"]
        cited = False
        if any(c.get(s) is not None for s in POOL_SOURCES):
            # the pool rule, as ingest's store applies it: each source's first line per rank. A line of a
            # better source after the alert may change the pool; SGLang prints one number in all three
            rank = c.get("rank") or ""
            first = facts.stated.get(rank, [None] * len(POOL_SOURCES))
            facts.stated[rank] = [v if v is not None else c.get(s) for v, s in zip(first, POOL_SOURCES, strict=True)]
            pool = node_pool(rank_pool(*v) for v in facts.stated.values())
            if pool != facts.pool:
                facts.pool, cited = pool, True
        if c.get("context_len"):
            facts.context, cited = c["context_len"], True
        if cited:
            facts.evidence = [*facts.evidence, ev][-4:]
        if facts.pool is not None and facts.context is not None and facts.pool < facts.context:
            key = f"pool_smaller_than_context\t{node}"
            if key not in self.alerted:
                self.alerted[key] = self.clock
                return [pool_alert(node, facts)]
        return []

    def _role(self, node: str, r: dict[str, Any]) -> str | None:
        if r["kind"] == "time_stats" and r.get("detail") in ("prefill", "decode"):
            return r["detail"]
        facts = self.nodes.get(node)
        return facts.role if facts is not None else None

    def _request(self, node: str, r: dict[str, Any], ev: dict[str, Any], t: float, res: float) -> list[Alert]:
        kind, rid, room = r["kind"], r.get("rid"), r.get("room")
        if kind == "overlength" and rid:
            self.overlength[f"{node}\t{rid}"] = ev
            return []
        if room is None:
            return []
        if room in self.closed:
            return []
        role = self._role(node, r)
        s = self.rooms.get(room)
        if s is None:
            s = self.rooms[room] = Room()
        s.last_seen = t
        if rid and rid not in s.rids:
            s.rids.append(rid)
        if kind.startswith("decode_") and kind.endswith("_failed"):
            s.aborted, s.abort_ts, s.decode_node = ev, t, node
            out = self._late(room, s, ev)
            if s.prefill_done is not None:
                self._close(room)
            return out
        if kind not in ("time_stats", "finished") or role not in ("prefill", "decode"):
            return []
        if role == "prefill":
            s.prefill_node = node
            pending = self.overlength.pop(f"{node}\t{rid}", None) if rid else None
            if pending is not None:
                s.placeholder.append(pending)
            if r.get("input_len") == 1 and ev not in s.placeholder:
                s.placeholder.append(ev)
            if kind == "time_stats":
                s.prefill_done, s.prefill_ev, s.prefill_res = t, ev, res
            out = self._signature(room, s, ev) + self._late(room, s, ev)
        else:
            s.decode_node = node
            if kind == "finished" and '"abort"' in (r.get("detail") or ""):
                return []  # an aborted request's finish record: decode never ran it (a late_transfer case)
            if (r.get("input_len") or 0) > 1:
                s.decode, s.decode_input = ev, r["input_len"]
            if kind == "time_stats" and not s.decode_done:
                s.bound_offset(self.offsets, r, t, res)
            s.decode_done = s.decode_done or kind == "time_stats"
            out = self._signature(room, s, ev)
        if s.prefill_done is not None and (s.decode_done or s.aborted is not None):
            self._close(room)  # both sides are done with it (an aborted room: its transfer judged)
        return out

    def _close(self, room: int) -> None:
        del self.rooms[room]
        self.closed[room] = None
        if len(self.closed) > CLOSED_KEPT:
            del self.closed[next(iter(self.closed))]

    def _once(self, kind: str, room: int) -> bool:
        key = f"{kind}\t{room}"
        if key in self.alerted:
            return False
        self.alerted[key] = self.clock
        return True

    def _signature(self, room: int, s: Room, ev: dict[str, Any]) -> list[Alert]:
        if not (s.placeholder and s.decode is not None and s.aborted is None):
            return []
        if not self._once("placeholder_signature", room):
            return []
        return [placeholder_alert(room, s)]

    def _late(self, room: int, s: Room, ev: dict[str, Any]) -> list[Alert]:
        if s.aborted is None or s.prefill_done is None or s.abort_ts is None or s.landing_hi(self.offsets) < s.abort_ts:
            return []
        if not self._once("late_transfer", room):
            return []
        return [late_alert(room, s)]

    def sweep(self) -> int:
        """Forget rooms unheard of for ROOM_TTL_S of log time, and dedupe keys as old: bounded memory."""
        horizon = self.clock - ROOM_TTL_S
        old = [r for r, s in self.rooms.items() if s.last_seen < horizon]
        for r in old:
            del self.rooms[r]
        for k in [k for k, t in self.alerted.items() if t < horizon and not k.startswith("pool_")]:
            del self.alerted[k]
        if len(self.overlength) > 100_000:  # over-length lines whose room never came: keep the newest
            for k in list(self.overlength)[: len(self.overlength) - 100_000]:
                del self.overlength[k]
        return len(old)
