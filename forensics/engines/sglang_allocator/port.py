"""The port of SGLang's KV slot allocators, call for call (forensics.engines.sglang_allocator says what each
release does; tests/engines/test_allocator_port.py holds it to traces of SGLang's own classes)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from forensics.engines.sglang_allocator.rules import known_release, rule


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
        return self.alloc_extend_pages(n * self.page_size)

    def alloc_extend_pages(self, tokens: int) -> list[int] | None:
        """The page ids alloc_extend([0], [tokens], [-1], tokens) takes, in its order (its slots are each
        page's, from the first): a fresh request's pages, without listing their slots."""
        if self.page_size == 1:
            raise NotImplementedError("alloc_extend is only for paged allocator")
        return self._extend_take(1, tokens, self._new_pages([0], [tokens]))

    def _extend_take(self, bs: int, extend_num_tokens: int, need: int) -> list[int] | None:
        """alloc_extend's pages: the deferred frees merged as it merges them, then `need` pages taken."""
        if self.need_sort and extend_num_tokens // self.page_size + bs + 1 > len(self.free_pages):
            self.merge_and_sort_free()
        if need > len(self.free_pages):
            return None
        return self._take(need)

    def _new_pages(self, prefix_lens: Sequence[int], seq_lens: Sequence[int]) -> int:
        ps = self.page_size
        return sum((s + ps - 1) // ps - (p + ps - 1) // ps for p, s in zip(prefix_lens, seq_lens, strict=True))

    def alloc_extend(
        self, prefix_lens: Sequence[int], seq_lens: Sequence[int], last_loc: Sequence[int], extend_num_tokens: int
    ) -> list[int] | None:
        ps = self.page_size
        if ps == 1:
            raise NotImplementedError("alloc_extend is only for paged allocator")
        pages = self._extend_take(len(prefix_lens), extend_num_tokens, self._new_pages(prefix_lens, seq_lens))
        if pages is None:
            return None
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
        if ps == 1 or self.free_group is not None:  # a free group keeps the slots until its end
            self.free([p * ps + j for p in pages for j in range(ps)] if ps > 1 else list(pages))
            return
        # what free() makes of every slot of these pages (their pages, sorted, once each), without the
        # slots: listing them cost half of an incident preset's simulation at page size 64
        ids = sorted(set(pages))
        if ids:
            self._release(ids)

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
