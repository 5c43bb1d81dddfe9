"""SGLang's KV slot allocators as each release runs them: a port, and the registry of page-reuse rules.

This module is the one home of the fact "which slots does SGLang hand out next". The simulator
(forensics.simulate.cluster.PagePool) runs these classes; the allocator model
(forensics.ownership.kernels.allocator) and the likelihood model (forensics.findings.likelihood) take
their policy from `rule()`. tests/engines/test_allocator_port.py replays traces recorded from SGLang's
own classes (scripts/record_allocator_traces.py, tests/data/allocator_traces/) through this port and
requires the same slots, call for call.

What the releases do (sglang/srt/mem_cache/allocator.py in 0.4.9, 0.5.4 and 0.5.11;
sglang/srt/mem_cache/allocator/{base,token,paged}.py in 0.5.23):

- Both allocators start with free_pages = [1, 2, ..., n] and hand out from the front: slot (page
  size 1) or page 0 is never handed out ("The padded slot 0 is used for writing dummy outputs from
  padded tokens").
- TokenToKVPoolAllocator (page size 1) `free` APPENDS the freed slots, unsorted, in the order given:
  a FIFO queue. PagedTokenToKVPoolAllocator `free` takes torch.unique(free_index // page_size) (the
  freed pages, sorted, each once) and PREPENDS them: a LIFO stack, lowest freed page first.
- 0.5.4 and later take need_sort = disaggregation_mode in ("prefill", "decode")
  (model_executor/model_runner.py; 0.5.11 model_runner_kv_cache_mixin.py; 0.5.23
  mem_cache/kv_cache_configurator.py). With need_sort, frees go to release_pages (0.5.23 paged:
  staged_pages) instead, and join free_pages, the whole list sorted, only in merge_and_sort_free,
  which an allocation runs when free_pages looks too short: alloc when need > len(free_pages);
  alloc_extend when extend_num_tokens // page_size + batch_size + 1 > len(free_pages); alloc_decode
  when batch_size > len(free_pages). free_pages is then always ascending: lowest free page first.
  0.4.9 has no need_sort: PD nodes run the FIFO / LIFO rule.
- alloc_extend (paged) fills each request of the batch in order: first the rest of its last partial
  page (last_loc + 1, ...), then whole new pages, then a partial new page, its new pages taken
  consecutively from the front of free_pages after those of the requests before it. alloc_decode
  gives each request one slot: last_loc + 1, or the first slot of the next new page when its new
  token starts a page. A failed allocation (pool too short) returns None and changes nothing but a
  merge it ran.
- free_group_begin/end collect frees and free them as one call (torch.cat): one torch.unique over
  the whole group on the paged allocator. 0.5.23 adds free_page_ids (exactly the given pages, in the
  given order, no unique), whose grouped pages are released after the group's plain frees.
- backup_state/restore_state save and restore (free_pages[, release_pages]); 0.5.23 has neither.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
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


class Allocator:
    """SGLang's TokenToKVPoolAllocator (page_size 1) or PagedTokenToKVPoolAllocator, for one release.

    Indices are plain ints: alloc* return a list of slot indices or None, free* take any iterable of
    ints. The free list is a deque of page ids (slots when page_size is 1), front first."""

    def __init__(self, size: int, page_size: int = 1, need_sort: bool = False, release: str = "0.5.23") -> None:
        rel = known_release(release)
        if rel is None:
            raise ValueError(f"unknown SGLang release {release!r}")
        self.release, self.size, self.page_size = rel, size, page_size
        self.need_sort = need_sort and rel != "0.4.9"  # 0.4.9 has no need_sort
        self.num_pages = size // page_size
        self.clear()

    @classmethod
    def for_rule(cls, release: str, size: int, page_size: int, pd_mode: str) -> Allocator:
        return cls(size, page_size, rule(release, page_size, pd_mode).need_sort, release)

    # -- state ---------------------------------------------------------------------------------------
    def clear(self) -> None:
        self.free_pages: deque[int] = deque(range(1, self.num_pages + 1))
        self.release_pages: list[int] = []  # need_sort only; order is irrelevant (the merge sorts)
        self.free_group: list[list[int]] | None = None
        self.free_page_ids_group: list[list[int]] = []

    def available_size(self) -> int:
        return (len(self.free_pages) + len(self.release_pages)) * self.page_size

    def backup_state(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if self.release == "0.5.23":
            raise AttributeError("SGLang 0.5.23's allocators have no backup_state")
        return tuple(self.free_pages), tuple(self.release_pages)

    def restore_state(self, state: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
        if self.release == "0.5.23":
            raise AttributeError("SGLang 0.5.23's allocators have no restore_state")
        self.free_pages = deque(state[0])
        self.release_pages = list(state[1])

    def merge_and_sort_free(self) -> None:
        if self.release_pages:
            self.free_pages = deque(sorted([*self.free_pages, *self.release_pages]))
            self.release_pages = []

    def _take(self, n: int) -> list[int]:
        fp = self.free_pages
        return [fp.popleft() for _ in range(n)]

    # -- allocation ----------------------------------------------------------------------------------
    def alloc(self, need_size: int) -> list[int] | None:
        ps = self.page_size
        n = need_size // ps
        if self.need_sort and n > len(self.free_pages):
            self.merge_and_sort_free()
        if n > len(self.free_pages):
            return None
        pages = self._take(n)
        if ps == 1:
            return pages
        return [p * ps + j for p in pages for j in range(ps)]

    def alloc_pages(self, n: int) -> list[int] | None:
        """Page ids of a fresh request of n pages: alloc_extend of n * page_size tokens from nothing
        (what a decode node's pre-allocation runs) takes them in this order."""
        if self.page_size == 1:
            return self.alloc(n)
        out = self.alloc_extend([0], [n * self.page_size], [-1], n * self.page_size)
        return None if out is None else [s // self.page_size for s in out[:: self.page_size]]

    def _new_pages(self, prefix_lens: Sequence[int], seq_lens: Sequence[int]) -> int:
        ps = self.page_size
        return sum((s + ps - 1) // ps - (p + ps - 1) // ps for p, s in zip(prefix_lens, seq_lens, strict=True))

    def alloc_extend(
        self, prefix_lens: Sequence[int], seq_lens: Sequence[int], last_loc: Sequence[int], extend_num_tokens: int
    ) -> list[int] | None:
        ps = self.page_size
        if ps == 1:
            raise NotImplementedError("alloc_extend is only for paged allocator")
        bs = len(prefix_lens)
        if self.need_sort and extend_num_tokens // ps + bs + 1 > len(self.free_pages):
            self.merge_and_sort_free()
        need = self._new_pages(prefix_lens, seq_lens)
        if need > len(self.free_pages):
            return None
        pages = self._take(need)
        out: list[int] = []
        k = 0
        for pre, seq, last in zip(prefix_lens, seq_lens, last_loc, strict=True):
            ceil_pre = (pre + ps - 1) // ps * ps
            n1 = min(seq, ceil_pre) - pre
            out.extend(range(last + 1, last + 1 + n1))
            t = pre + n1
            while t < seq:  # whole and partial new pages, consecutively from the front
                n = min(ps, seq - t)
                out.extend(range(pages[k] * ps, pages[k] * ps + n))
                k += 1
                t += n
        return out

    def alloc_decode(self, seq_lens: Sequence[int], last_loc: Sequence[int]) -> list[int] | None:
        ps = self.page_size
        if ps == 1:
            raise NotImplementedError("alloc_decode is only for paged allocator")
        if self.need_sort and len(seq_lens) > len(self.free_pages):
            self.merge_and_sort_free()
        need = sum(1 for s in seq_lens if (s - 1) % ps == 0)
        if need > len(self.free_pages):
            return None
        pages = self._take(need)
        out, k = [], 0
        for s, last in zip(seq_lens, last_loc, strict=True):
            if (s - 1) % ps == 0:
                out.append(pages[k] * ps)
                k += 1
            else:
                out.append(last + 1)
        return out

    # -- freeing -------------------------------------------------------------------------------------
    def _release(self, pages: list[int]) -> None:
        if self.need_sort:
            self.release_pages.extend(pages)
        elif self.page_size == 1:
            self.free_pages.extend(pages)  # FIFO: appended in the order freed
        else:
            self.free_pages.extendleft(reversed(pages))  # LIFO: prepended, first page in front

    def free(self, free_index: Iterable[int]) -> None:
        idx = list(free_index)
        if not idx:
            return
        if self.free_group is not None:
            self.free_group.append(idx)
            return
        if self.page_size == 1:
            self._release(idx)
        else:
            self._release(sorted({s // self.page_size for s in idx}))  # torch.unique: sorted, once each

    def free_pages_of(self, pages: Iterable[int]) -> None:
        """Free whole pages (every slot of each): what freeing a request's KV row does."""
        ps = self.page_size
        self.free([p * ps + j for p in pages for j in range(ps)] if ps > 1 else list(pages))

    def free_page_ids(self, page_ids: Iterable[int]) -> None:
        if self.release != "0.5.23":
            raise AttributeError(f"SGLang {self.release}'s allocators have no free_page_ids")
        ids = list(page_ids)
        if self.page_size == 1:
            self.free(ids)
            return
        if not ids:
            return
        if self.free_group is None:
            self._release(ids)
        else:
            self.free_page_ids_group.append(ids)

    def free_group_begin(self) -> None:
        if self.release == "0.5.23":
            assert self.free_group is None, "free groups cannot be nested"
        self.free_group = []
        self.free_page_ids_group = []

    def free_group_end(self) -> None:
        pending, self.free_group = self.free_group, None
        if pending:
            self.free([s for part in pending for s in part])
        if self.free_page_ids_group:  # 0.5.23 paged only
            self._release([p for part in self.free_page_ids_group for p in part])
            self.free_page_ids_group = []
