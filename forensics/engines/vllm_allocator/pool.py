"""vLLM's v1 block pool for one KV cache group (forensics.engines.vllm_allocator: what each release does)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from forensics.engines.vllm_allocator.rules import rule


class BlockPool:
    """vllm.v1.core.block_pool.BlockPool for one KV cache group, blocks named by id."""

    NULL = 0

    def __init__(self, num_blocks: int, enable_caching: bool, release: str) -> None:
        r = rule(release)
        if r is None:
            raise ValueError(f"vLLM {release}: its block pool's free order is not known")
        self.rule = r
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        # the free queue as a doubly linked list over ids; -1 is the head sentinel, n the tail's
        self._next = list(range(1, num_blocks + 1))
        self._prev = list(range(-1, num_blocks - 1))
        self._head_next = 0
        self._tail_prev = num_blocks - 1
        self._in_queue = [True] * num_blocks
        self.num_free = num_blocks
        self.ref = [0] * num_blocks
        self.hash: list[Hashable | None] = [None] * num_blocks
        self.cached: dict[Hashable, dict[int, None]] = {}
        self._remove(self.NULL)  # BlockPool.__init__: null_block = free_block_queue.popleft()

    # the free queue (kv_cache_utils.FreeKVCacheBlockQueue)
    def _link(self, a: int, b: int) -> None:
        if a == -1:
            self._head_next = b
        else:
            self._next[a] = b
        if b == self.num_blocks:
            self._tail_prev = a
        else:
            self._prev[b] = a

    def _remove(self, b: int) -> None:
        self._link(self._prev[b], self._next[b])
        self._in_queue[b] = False
        self.num_free -= 1

    def _insert_after(self, a: int, blocks: Sequence[int]) -> None:
        after = self._head_next if a == -1 else self._next[a]
        for b in blocks:
            self._link(a, b)
            self._in_queue[b] = True
            a = b
        self._link(a, after)
        self.num_free += len(blocks)

    def free_order(self) -> list[int]:
        """The free queue, head (evicted first) to tail."""
        out = []
        b = self._head_next
        while b != self.num_blocks:
            out.append(b)
            b = self._next[b]
        return out

    def is_free(self, b: int) -> bool:
        return self._in_queue[b]

    # the pool's calls
    def get_new_blocks(self, n: int) -> list[int]:
        if n > self.num_free:
            raise ValueError(f"Cannot get {n} free blocks from the pool")
        out = []
        for _ in range(n):
            b = self._head_next
            self._remove(b)
            if self.enable_caching:
                self._evict(b)
            self.ref[b] += 1
            out.append(b)
        return out

    def _evict(self, b: int) -> None:
        h = self.hash[b]
        if h is None:
            return
        self.hash[b] = None
        held = self.cached.get(h)
        if held is not None:
            held.pop(b, None)
            if not held:
                del self.cached[h]

    def touch(self, blocks: Iterable[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0 and b != self.NULL:
                self._remove(b)
            self.ref[b] += 1

    def free_blocks(self, ordered: Iterable[int]) -> None:
        first: list[int] = []
        last: list[int] = []
        for b in ordered:
            self.ref[b] -= 1
            if self.ref[b] == 0 and b != self.NULL:
                if self.enable_caching:
                    head = self.rule.uncached_first and self.hash[b] is None
                else:
                    head = self.rule.uncached_first_off
                (first if head else last).append(b)
        if first:
            self._insert_after(-1, first)
        if last:
            self._insert_after(self._tail_prev, last)

    def cache_full_blocks(self, blocks: Sequence[int], hashes: Sequence[Hashable]) -> None:
        for b, h in zip(blocks, hashes, strict=True):
            if b == self.NULL:
                continue
            if self.hash[b] is not None:
                raise AssertionError(f"block {b} is cached already")
            self.hash[b] = h
            self.cached.setdefault(h, {})[b] = None

    def get_cached_block(self, h: Hashable) -> int | None:
        held = self.cached.get(h)
        return next(iter(held)) if held else None

    def evict_blocks(self, blocks: Iterable[int]) -> None:
        if not self.rule.has_evict:
            raise AttributeError("this release's BlockPool has no evict_blocks")
        for b in blocks:
            self._evict(b)

    def reset_prefix_cache(self) -> bool:
        if self.num_blocks - self.num_free != 1:
            return False
        self.cached = {}
        self.hash = [None] * self.num_blocks
        return True
