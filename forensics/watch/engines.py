"""Watch, the engine of each node: the lines of a node whose logs name another engine of the registry
with a line reader of its own (vLLM's request lines: forensics.engines.vllm) are read by that reader,
every other node's by SGLang's (forensics.watch.chunks), as ingest picks them (forensics.ingest.startup:
a node is another engine's only when its lines name that engine and never SGLang).

A node is decided by the first chunk of its logs that names an engine (a server's start-up lines come
first); until then, and for good once an SGLang marker is seen, it is SGLang's. The decision is kept in
the watcher's state file. vLLM's text times print no year: the bundle's [engine] log_year gives it
(forensics.engines.facts.Engine.dated), else those lines' times are unknown and the watcher's clock
stays at the latest time it knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from forensics.engines import ENGINES, marker_scores, winner
from forensics.engines.facts import ReadLine
from forensics.engines.sglang_startup import NAME as SGLANG


@dataclass(frozen=True)
class OtherReader:
    """Another engine's reader of a node's lines: `markers` finds the lines it reads in a chunk."""

    engine: str
    markers: re.Pattern[bytes]
    read: ReadLine


@lru_cache(maxsize=16)
def _reader(engine: str, year: int | None) -> OtherReader | None:
    entry = ENGINES[engine]
    if entry.requests is None or not entry.requests.markers:
        return None  # no request lines to read (its start-up lines are the audit's)
    reader = entry.dated(year) if entry.dated is not None else entry.requests
    marks = re.compile(b"|".join(re.escape(m.encode()) for m in reader.markers))
    return OtherReader(engine, marks, reader.text)


# how much of a node's lines is searched for an engine's markers, as ingest reads a file's head
# (forensics.ingest.startup DETECT_BYTES): past it, a node that named none is SGLang's
DETECT_BYTES = 1 << 20


class NodeEngines:
    def __init__(self, year: int | None = None) -> None:
        self.year = year
        self.decided: dict[str, str] = {}  # node -> engine
        self.searched: dict[str, int] = {}  # node -> bytes searched while undecided

    def of(self, node: str, data: bytes) -> OtherReader | None:
        """The reader of `node`'s lines when its logs name another engine with one; None: SGLang's."""
        engine = self.decided.get(node)
        if engine is None:
            scores = marker_scores(data.decode("utf-8", "replace").splitlines())
            self.searched[node] = self.searched.get(node, 0) + len(data)
            if any(scores.values()):
                engine = (winner(scores) if scores[SGLANG] == 0 else None) or SGLANG
            elif self.searched[node] >= DETECT_BYTES:
                engine = SGLANG
            if engine is not None:
                self.decided[node] = engine
                self.searched.pop(node, None)
        return None if engine is None or engine == SGLANG else _reader(engine, self.year)
