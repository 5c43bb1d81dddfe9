"""The engines the project reads, one module each: the patterns of its lines, its start-up facts
(`parse`: pools, context length, role, page size) and, for SGLang, the pool rule, the input limit and
the per-request line shapes. Ingest (forensics.ingest: the readers it picks per node), the config audit
(forensics.audit), the watcher and the simulator read these and nothing else, so no two of them read a
line apart.

Adding an engine: one module here that ends with `ENGINE = Engine(...)` (forensics.engines.facts),
listed in ENGINES, plus its fixtures under tests/fixtures/engines/ (ARCHITECTURE.md, "Where to add").
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate

from forensics.engines import lmdeploy, sglang_startup, trtllm, vllm
from forensics.engines.facts import Engine

ENGINES: dict[str, Engine] = {e.name: e for e in (sglang_startup.ENGINE, vllm.ENGINE, trtllm.ENGINE, lmdeploy.ENGINE)}
# the engines whose request lines the logs-only findings read (Engine.signatures; findings' logs_decide)
SIGNATURE_ENGINES = tuple(name for name, e in ENGINES.items() if e.signatures)
# the words at least one of which every line an engine's parse reads holds
KEYWORDS = tuple(dict.fromkeys(k for e in ENGINES.values() for k in e.keywords))


def _squeeze(text: str) -> str:
    return "".join(text.split())


def marker_scores(texts: Iterable[str], *, ignore_spaces: bool = False) -> dict[str, int]:
    """Per engine, how many of the texts hold one of its markers; with ignore_spaces, how many markers
    the texts hold, markers and texts compared without their whitespace (a message pasted over several
    lines may have lost a space at each break)."""
    if not ignore_spaces:
        return _lines_marked(list(texts))
    scores = dict.fromkeys(ENGINES, 0)
    markers = {
        name: tuple(_squeeze(m) for m in e.markers) if ignore_spaces else e.markers for name, e in ENGINES.items()
    }
    for text in texts:
        if ignore_spaces:
            text = _squeeze(text)
        for name, marks in markers.items():
            if ignore_spaces:
                scores[name] += sum(m in text for m in marks)
            elif any(m in text for m in marks):
                scores[name] += 1
    return scores


def _lines_marked(texts: list[str]) -> dict[str, int]:
    """marker_scores without ignore_spaces, by searching the texts joined once: a marker holds no NUL,
    so none of its occurrences spans two texts, and each is mapped to its text by its offset."""
    buf = "\0".join(texts)
    starts = [0, *accumulate(len(t) + 1 for t in texts)]
    scores = dict.fromkeys(ENGINES, 0)
    for name, e in ENGINES.items():
        hit: set[int] = set()
        for m in e.markers:
            pos = buf.find(m)
            while pos >= 0:
                i = bisect_right(starts, pos) - 1
                hit.add(i)
                pos = buf.find(m, starts[i + 1])
        scores[name] = len(hit)
    return scores


def detect(texts: Iterable[str], *, ignore_spaces: bool = False) -> str | None:
    """The engine the texts name most often (marker_scores); None when none is named or two tie."""
    return winner(marker_scores(texts, ignore_spaces=ignore_spaces))


def winner(scores: dict[str, int]) -> str | None:
    """The engine of the highest score (marker_scores); None when none scored or two tie."""
    best = max(scores.values())
    winners = [name for name, score in scores.items() if score == best]
    return winners[0] if best > 0 and len(winners) == 1 else None
