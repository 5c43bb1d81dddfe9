"""Which free order each vLLM release's block pool runs (forensics.engines.vllm_allocator says what each does)."""

from __future__ import annotations

from dataclasses import dataclass

# the releases whose block pools were read and differentially tested (oldest first)
RELEASES = ("0.10.2", "0.23.0", "0.24.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0")


@dataclass(frozen=True)
class Rule:
    """Where a freed block rejoins the free queue: with prefix caching on (`uncached_first`) or off
    (`uncached_first_off`), blocks without a hash go to the head (reused next) where it is True; every
    other freed block goes to the tail."""

    name: str
    uncached_first: bool
    uncached_first_off: bool
    has_evict: bool
    source: str


_SPLIT = "free_blocks: prepend_n / append_n"
RULES = {
    "0.10.2": Rule("lru", False, False, False, "vllm/v1/core/block_pool.py 0.10.2 free_blocks: append_n"),
    "0.23.0": Rule("lru", False, False, True, "vllm/v1/core/block_pool.py 0.23.0 free_blocks: append_n"),
    "0.24.0": Rule("lifo-uncached", True, True, True, f"vllm/v1/core/block_pool.py 0.24.0 {_SPLIT}"),
    "0.26.0": Rule("lifo-uncached", True, True, True, f"vllm/v1/core/block_pool.py 0.26.0 {_SPLIT}"),
    "0.27.0": Rule("lifo-uncached, fifo off", True, False, True, f"vllm/v1/core/block_pool.py 0.27.0 {_SPLIT}"),
    "0.28.0": Rule("lifo-uncached", True, True, True, f"vllm/v1/core/block_pool.py 0.28.0 {_SPLIT}"),
    "0.29.0": Rule("lifo-uncached", True, True, True, f"vllm/v1/core/block_pool.py 0.29.0 {_SPLIT}"),
}


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.strip().lstrip("v").split(".")[:3])


def _order(r: Rule) -> tuple[bool, bool]:
    return r.uncached_first, r.uncached_first_off


def rule(release: str) -> Rule | None:
    """The rule of `release` where it is known: a tested release; one past the newest tested (its rule
    carried forward, as for SGLang's allocators); one between two tested releases whose free order is
    the same (the older one's rule). A release older than the oldest tested (the v1 engine's early
    releases, or the v0 block manager) or between two tested releases whose free order differs is
    unknown: None."""
    try:
        key = _version_key(release)
    except ValueError:
        return None
    tested = sorted((_version_key(r), r) for r in RELEASES)
    if key < tested[0][0]:
        return None
    below = max(r for k, r in tested if k <= key)
    above = [r for k, r in tested if k >= key]
    if not above:
        return RULES[below]
    return RULES[below] if _order(RULES[below]) == _order(RULES[above[0]]) else None
