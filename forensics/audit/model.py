"""What the audit reports: one ServerAudit per server, its verdict on the Facts an engine module read
(forensics.engines.facts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forensics.engines.facts import Derivation, Evidence

OK = "ok"
TOO_SMALL = "pool_smaller_than_context"
UNKNOWN = "unknown"


@dataclass
class ServerAudit:
    path: str
    engine: str
    node: str | None = None
    role: str | None = None
    model: str | None = None
    pool_tokens: int | None = None
    context_len: int | None = None
    context_source: str | None = None  # "log" | "--context-length"
    page_size: int | None = None
    max_req_input_len: int | None = None
    max_concurrency: float | None = None
    derivation: Derivation | None = None  # of the smallest binding pool, when it is blocks x block size
    verdict: str = UNKNOWN
    reason: str = ""
    ranks: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    leak_windows: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "node": self.node,
            "engine": self.engine,
            "role": self.role,
            "model": self.model,
            "pool_tokens": self.pool_tokens,
            "context_len": self.context_len,
            "context_source": self.context_source,
            "page_size": self.page_size,
            "max_req_input_len": self.max_req_input_len,
            "max_concurrency": self.max_concurrency,
            "derivation": self.derivation.to_json() if self.derivation else None,
            "verdict": self.verdict,
            "reason": self.reason,
            "ranks": self.ranks,
            "evidence": [e.to_json() for e in self.evidence],
            "notes": self.notes,
            "leak_windows": self.leak_windows,
        }
