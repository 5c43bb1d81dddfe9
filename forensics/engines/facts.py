"""What an engine's start-up lines state about one server, before any verdict: each engine module's
`parse` (forensics.engines.<engine>) fills a Facts from the server's logical lines (LogLine), and the
config audit (forensics.audit.verdict) and ingest's node config for engines without per-request lines
(forensics.ingest.startup) both read it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

EVIDENCE_TEXT_CHARS = 400


@dataclass(frozen=True)
class LogLine:
    file: str
    line: int  # 1-based physical line number where the logical line starts
    text: str  # message with ANSI codes and prefixes removed, wrapped pieces joined
    rank: str  # e.g. "DP1 TP3", "TP0", "rank0"; "" when the prefix carries none


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int
    text: str

    @classmethod
    def of(cls, ln: LogLine) -> Evidence:
        text = ln.text if len(ln.text) <= EVIDENCE_TEXT_CHARS else ln.text[:EVIDENCE_TEXT_CHARS] + "..."
        return cls(ln.file, ln.line, (f"[{ln.rank}] " if ln.rank else "") + text)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Derivation:
    """A pool the log gives as two factors, a block count and a block size (tokens per block).
    `size_evidence` is None when the log has no block size and `default_of`'s default is assumed."""

    blocks: int
    block_size: int
    blocks_evidence: Evidence
    size_evidence: Evidence | None
    default_of: str = "the engine"

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_size

    @property
    def assumed(self) -> bool:
        return self.size_evidence is None

    def describe(self) -> str:
        product = f"{self.blocks} blocks x {self.block_size} tokens per block = {self.tokens} tokens"
        blocks_at = f"{self.blocks_evidence.file}:{self.blocks_evidence.line}"
        if self.size_evidence is None:
            return f"assumed: {product} (blocks: {blocks_at}; block size not in the log: {self.default_of}'s default)"
        size_at = f"{self.size_evidence.file}:{self.size_evidence.line}"
        return f"derived: {product} (blocks: {blocks_at}; block size: {size_at})"

    def to_json(self) -> dict[str, Any]:
        return {
            "blocks": self.blocks,
            "block_size": self.block_size,
            "tokens": self.tokens,
            "block_size_assumed": self.assumed,
            "text": self.describe(),
            "blocks_evidence": self.blocks_evidence.to_json(),
            "block_size_evidence": self.size_evidence.to_json() if self.size_evidence else None,
        }


@dataclass(frozen=True)
class Pool:
    """One KV pool size a log states for one rank.

    `priority`: lower binds first (0 = the full-attention / main pool as the scheduler uses it).
    `exact`: False for an upper bound (can prove "too small", never "fits").
    `derivation`: set when the size is blocks x block size rather than a token count the log prints.
    """

    kind: str
    tokens: int
    evidence: Evidence
    priority: int = 2
    exact: bool = True
    derivation: Derivation | None = None

    @classmethod
    def derived(cls, kind: str, d: Derivation, priority: int) -> Pool:
        return cls(kind, d.tokens, d.blocks_evidence, priority, derivation=d)

    @property
    def assumed(self) -> bool:
        """The size rests on a block size the log does not state: it proves neither fit nor shortfall."""
        return self.derivation is not None and self.derivation.assumed


@dataclass
class Facts:
    """What one engine parser read from one server's logs, before any verdict."""

    engine: str
    role: str | None = None
    role_evidence: Evidence | None = None
    model: str | None = None
    context_len: int | None = None
    context_evidence: Evidence | None = None
    page_size: int | None = None
    page_evidence: Evidence | None = None
    pools: dict[str, list[Pool]] = field(default_factory=dict)  # rank -> pools
    concurrency: dict[str, tuple[float, Evidence]] = field(default_factory=dict)
    # direct proofs that one full-context request cannot fit: (reason, pool if stated, evidence)
    proofs: list[tuple[str, int | None, Evidence]] = field(default_factory=list)
    # SGLang over-length aborts: (max_req_input_len M, evidence)
    max_input_seen: list[tuple[int, Evidence]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_pool(self, rank: str, pool: Pool) -> None:
        self.pools.setdefault(rank, []).append(pool)

    def set_context(self, value: int, ev: Evidence, *, override: bool = True) -> None:
        if self.context_len is not None and self.context_len != value:
            self.notes.append(
                f"context length {value} at {ev.file}:{ev.line} differs from {self.context_len}"
                f" at {self.context_evidence.file}:{self.context_evidence.line}"
                if self.context_evidence
                else f"context length {value} differs from {self.context_len}"
            )
            if not override:
                return
        self.context_len, self.context_evidence = value, ev


def to_int(text: str) -> int:
    """An integer as logs print it, with or without thousands separators."""
    return int(text.replace(",", "").replace("_", ""))


@dataclass
class EngineRows:
    """What a line reader adds per line: its engine_lines row, the request, config, batch_stats and
    integrity_events rows it gives, the transfer references a request line names (engine_request_links:
    vLLM's kv_transfer_params), and (file_id, line, reason) of a rejected line."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    config: list[dict[str, Any]] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)  # batch_stats rows
    links: list[dict[str, Any]] = field(default_factory=list)  # engine_request_links rows
    integrity: list[dict[str, Any]] = field(default_factory=list)  # integrity_events rows
    rejected: list[tuple[int, int, str]] = field(default_factory=list)


# one line (its bytes, with its newline), its node, file id, line number and the zone of its local times,
# into the rows; False when the line is rejected (the reason is in rows.rejected)
ReadLine = Callable[[bytes, str, int, int, ZoneInfo, EngineRows], bool]


@dataclass(frozen=True)
class LineReader:
    """An engine's reader of its per-request lines, one line at a time (the reference its bulk readers
    are held to): `text` a line of its text log, `json` a record of its JSON request log."""

    text: ReadLine
    json: ReadLine
    # substrings one of which every line it gives rows for holds (the watcher's candidate lines; empty:
    # the engine's watcher reads its own, as SGLang's forensics.watch.detector)
    markers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Engine:
    """One engine as the registry (forensics.engines.ENGINES) knows it: how its logs name it, which of
    its lines state its start-up facts, and the reader of its per-request lines, if it has any."""

    name: str  # the id in audit.json and node_config.engine
    label: str  # as its users call it
    # substrings that name the engine: its banners and messages only it writes (a pasted excerpt of one
    # message is recognised by them too)
    markers: tuple[str, ...]
    # every line `parse` reads holds one of these: past a file's head, other lines are dropped unread
    keywords: tuple[str, ...]
    startup: re.Pattern[str]  # a line written once per server start: of several, the last start is read
    parse: Callable[[list[LogLine]], Facts]  # the start-up facts of one server's lines
    # the reader of its per-request lines, which ingest and the watcher read; None: ingest reads only its
    # start-up facts (forensics.ingest.startup), and its requests are outside the analysis, said so per node
    requests: LineReader | None = None
    # its request lines carry the leak signatures the logs-only findings read (a placeholder's lines,
    # failed transfers): on a node of another engine without page events, nothing decides a response
    signatures: bool = False
    # every line `parse` acts on and every line `startup` matches holds one of these (the tests of its
    # branches, narrower than keywords): past a long log's head the audit leaves the other single lines
    # unread (forensics.audit.lines.read_log); None when its parse has no such list
    reads: tuple[str, ...] | None = None
    # for an engine whose text lines print no year (vLLM's `%m-%d %H:%M:%S`): its line reader given the
    # year of the logs (bundle.toml [engine] log_year; None: a text line's time is unknown, NULL);
    # `requests` is the reader given None
    dated: Callable[[int | None], LineReader] | None = None


def loose(pattern: str) -> re.Pattern[str]:
    """A message pattern whose spaces match any whitespace or none: a message pasted wrapped over
    several lines loses the spaces at its breaks when the pieces are joined (forensics.audit.excerpt)."""
    return re.compile(pattern.replace(" ", r"\s*"))
