"""The page-reuse rule each SGLang release runs, per page size and PD mode (forensics.engines.sglang_allocator
says what each release does; the allocator model and the simulator take their policy from rule())."""

from __future__ import annotations

from dataclasses import dataclass

# the releases whose allocators were read and differentially tested (oldest first)
RELEASES = ("0.4.9", "0.5.4", "0.5.11", "0.5.23")
PD_MODES = ("null", "prefill", "decode")  # ServerArgs.disaggregation_mode


@dataclass(frozen=True)
class Rule:
    """A page-reuse rule: `policy` is the allocator model's name for it (forensics.ownership.kernels.
    allocator: fifo, lifo, deferred), `merge_slack` the extra free pages a paged allocation wants
    before it merges (alloc_extend of one request: extend_num_tokens // page_size + 2 > free pages,
    i.e. one more page than it takes for a length that is not a page multiple), `source` where it
    comes from."""

    name: str
    policy: str
    need_sort: bool
    merge_slack: int
    source: str


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split(".")[:3])


def known_release(release: str) -> str | None:
    """The registry release whose allocator `release` runs (the newest known at or below it), or None
    for an unparseable or older one. The allocators of 0.5.4, 0.5.11 and 0.5.23 behave alike."""
    try:
        key = _version_key(release.strip().lstrip("v"))
    except ValueError:
        return None
    best = None
    for r in RELEASES:
        if _version_key(r) <= key:
            best = r
    return best


def _file(release: str) -> str:
    if _version_key(release) >= (0, 5, 23):
        return f"sglang {release} srt/mem_cache/allocator/{{token,paged,base}}.py"
    return f"sglang {release} srt/mem_cache/allocator.py"


def rule(release: str, page_size: int, pd_mode: str = "decode") -> Rule:
    """The page-reuse rule of SGLang `release` for a node of `page_size` in `pd_mode`."""
    rel = known_release(release)
    if rel is None:
        raise ValueError(f"unknown SGLang release {release!r} (known: {', '.join(RELEASES)})")
    if pd_mode not in PD_MODES:
        raise ValueError(f"unknown disaggregation mode {pd_mode!r} (expected one of {', '.join(PD_MODES)})")
    need_sort = rel != "0.4.9" and pd_mode in ("prefill", "decode")
    src = _file(rel)
    if need_sort:
        return Rule(
            "sorted-deferred",
            "deferred",
            True,
            merge_slack(page_size),
            f"{src}: need_sort; free -> release_pages, merge_and_sort_free when an alloc runs short",
        )
    if page_size == 1:
        return Rule("fifo", "fifo", False, 0, f"{src}: TokenToKVPoolAllocator.free appends to free_pages")
    return Rule("lifo", "lifo", False, 0, f"{src}: PagedTokenToKVPoolAllocator.free prepends torch.unique(pages)")


def registry() -> dict[tuple[str, int, str], Rule]:
    """Every (release, page size kind, PD mode) -> rule: page size 1 and 16 stand for 1 and > 1."""
    return {(r, ps, m): rule(r, ps, m) for r in RELEASES for ps in (1, 16) for m in PD_MODES}


def real_rules() -> dict[str, Rule]:
    """The distinct rules SGLang's known releases run, by name, in a fixed order (fifo, lifo,
    sorted-deferred), each with its page size > 1 merge slack."""
    out: dict[str, Rule] = {}
    order = ("fifo", "lifo", "sorted-deferred")
    for (_, ps, _), r in sorted(registry().items(), key=lambda kv: order.index(kv[1].name)):
        if r.name not in out and (ps > 1 or r.name != "sorted-deferred"):
            out[r.name] = r
    return out


def merge_slack(page_size: int) -> int:
    """The free pages beyond its own a deferred (need_sort) allocation of a request's pages wants
    before it merges: 0 on page size 1 (alloc), 1 above (alloc_extend, a length not a page multiple)."""
    return 0 if page_size == 1 else 1
