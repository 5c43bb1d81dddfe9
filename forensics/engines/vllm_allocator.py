"""vLLM's v1 KV block pool as each release runs it: a model of which block a request is handed next.

This module is the one home of the fact "which KV blocks does vLLM hand out next, and which freed
block can a later request hit". tests/engines/test_vllm_allocator_port.py replays traces recorded from
vLLM's own BlockPool and KVCacheManager (scripts/record_vllm_block_traces.py,
tests/data/vllm_block_traces/) through it and requires the same blocks and the same free queue, call
for call.

What the releases do (vllm/v1/core/block_pool.py, kv_cache_utils.py, kv_cache_manager.py and
single_type_kv_cache_manager.py of 0.10.2, 0.23.0, 0.24.0, 0.26.0, 0.27.0, 0.28.0 and 0.29.0):

- The pool has num_gpu_blocks blocks, ids 0..n-1. FreeKVCacheBlockQueue (kv_cache_utils.py) is a
  doubly linked list in id order at start; BlockPool.__init__ pops block 0 as the null block
  (a placeholder never handed out, never freed, never cached).
- get_new_blocks(n) pops n blocks from the head (popleft_n), or raises ValueError without change when
  fewer than n are free. With prefix caching on, a popped block that still has a hash is evicted
  from the cache then (_maybe_evict_cached_block): a freed block keeps its data and its hash until
  it is handed out again.
- free_blocks(ordered) takes one reference off each block; those at zero rejoin the queue. The
  managers free a request's blocks in reverse (SingleTypeKVCacheManager.free: reversed(req_blocks)),
  so the tail block is the first to be evicted of its request.
  - 0.10.2 and 0.23.0: every block at zero is appended at the tail (append_n), in the order given:
    LRU. (0.23.0's free_blocks takes prepend=True from the sliding-window and Mamba managers only.)
  - 0.24.0, 0.26.0, 0.28.0 and 0.29.0: blocks without a hash (every block, caching off) are put at
    the head (prepend_n, in the order given; 0.28.0: "LIFO reuse of non-cached blocks for better
    GPU locality") and cached blocks at the tail ("FIFO reuse of cached blocks for LRU eviction
    behavior"): vLLM PR #42656. An uncached block freed by one request (its partial last block) is
    the next block handed out.
  - 0.27.0: the same with prefix caching on; with it off every freed block is appended (PR #48017,
    undone in 0.28.0 by PR #51482): the pool cycles through every block id.
- touch(blocks) adds a reference; a block at zero leaves the queue wherever it is (remove).
- cache_full_blocks names the request's full blocks by their block hashes; the map is hash -> the
  blocks under it in insertion order (no de-duplication: two blocks may hold the same hash), and
  get_cached_block returns the first. 0.29.0's BlockHashToBlockMap keeps one block or a dict; the
  order it answers in is the same.
- A block hash chains its parent's hash, the block's tokens and the extra keys
  (kv_cache_utils.hash_block_tokens); generate_block_hash_extra_keys adds the request's cache_salt
  to the FIRST block only (start_token_idx == 0), so a salt changes every hash of the chain and two
  requests with different salts never hit each other's blocks.
- KVCacheManager.get_computed_blocks: the longest run of cached blocks over the first
  (num_tokens - 1) // block_size hashes (the last token is always recomputed); allocate_slots fails
  (None, nothing changed) when the blocks it needs (new ones, plus hit blocks now at zero, which
  leave the free queue) exceed the free blocks; else touches the hits, pops the new blocks and caches
  the request's full blocks (min(computed + new tokens, num_tokens) // block_size).
- evict_blocks(ids) (0.23.0 on; the KV connectors report blocks whose load failed) drops the hash of
  each block named and leaves it where it is. reset_prefix_cache drops every hash, only when no
  block but the null block is held.
Not modelled: hybrid models (several KV cache groups, sliding window, Mamba), 0.29.0's partial
block entries (cache_partial_block: a block size larger than the hash block size), lookahead and
external (connector) tokens, the watermark, eagle.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
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


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class BlockHasher:
    """Block hashes as keys equal where vLLM's are: each an interned id of (parent id, the block's
    tokens, the cache salt on the first block only). sha256 is not reproduced; equality is."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, tuple[int, ...], str | None], int] = {}

    def chain(self, tokens: Sequence[int], salt: str | None, block_size: int, start: list[int]) -> list[int]:
        """`start` (the hashes so far) extended over the full blocks of `tokens`."""
        out = list(start)
        for i in range(len(out), len(tokens) // block_size):
            parent = out[-1] if out else -1
            key = (parent, tuple(tokens[i * block_size : (i + 1) * block_size]), salt if i == 0 and salt else None)
            out.append(self._ids.setdefault(key, len(self._ids)))
        return out


@dataclass
class _Request:
    tokens: list[int]
    salt: str | None
    hashes: list[int]
    blocks: list[int]
    num_cached: int
    num_computed: int


class KVCacheManager:
    """vllm.v1.core.kv_cache_manager.KVCacheManager for one full-attention group: requests arrive,
    step one token at a time and finish."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool, max_model_len: int, release: str):
        self.pool = BlockPool(num_blocks, enable_caching, release)
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.hasher = BlockHasher()
        self.requests: dict[str, _Request] = {}

    def _computed(self, req: _Request) -> list[int]:
        if not self.pool.enable_caching:
            return []
        hits = []
        for h in req.hashes[: (len(req.tokens) - 1) // self.block_size]:
            b = self.pool.get_cached_block(h)
            if b is None:
                break
            hits.append(b)
        return hits

    def _allocate(self, req: _Request, num_new: int, hits: list[int]) -> bool:
        pool = self.pool
        computed = req.num_computed + len(hits) * self.block_size
        need = min(computed + num_new, self.max_model_len)
        wanted = _cdiv(need, self.block_size) - len(hits) - len(req.blocks)
        wanted += sum(1 for b in hits if pool.ref[b] == 0 and b != pool.NULL)
        if wanted > pool.num_free:
            return False
        if pool.enable_caching:
            pool.touch(hits)
        req.blocks.extend(hits)
        req.blocks.extend(pool.get_new_blocks(max(0, _cdiv(need, self.block_size) - len(req.blocks))))
        if pool.enable_caching:
            full = min(computed + num_new, len(req.tokens)) // self.block_size
            if full > req.num_cached:
                pool.cache_full_blocks(req.blocks[req.num_cached : full], req.hashes[req.num_cached : full])
                req.num_cached = full
        return True

    def arrive(self, rid: str, prompt: Sequence[int], salt: str | None) -> tuple[list[int], int, list[int] | None]:
        """get_computed_blocks then allocate_slots for the prompt: (hit blocks, computed tokens, the
        request's blocks or None when it is not admitted)."""
        hashes = self.hasher.chain(prompt, salt, self.block_size, [])
        req = _Request(list(prompt), salt, hashes, [], 0, 0)
        hits = self._computed(req)
        computed = len(hits) * self.block_size
        req.num_cached = len(hits)
        if not self._allocate(req, len(prompt) - computed, hits):
            return hits, computed, None
        req.num_computed = len(prompt)
        self.requests[rid] = req
        return hits, computed, list(req.blocks)

    def step(self, rid: str, token: int) -> list[int] | None:
        """One output token: allocate_slots for it; None when the pool cannot (the request stays)."""
        req = self.requests[rid]
        req.tokens.append(token)
        req.hashes = self.hasher.chain(req.tokens, req.salt, self.block_size, req.hashes)
        if not self._allocate(req, 1, []):
            return None
        req.num_computed += 1
        return list(req.blocks)

    def finish(self, rid: str) -> None:
        """free: the request's blocks in reverse, tail first."""
        self.pool.free_blocks(reversed(self.requests.pop(rid).blocks))
